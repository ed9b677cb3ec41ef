//! Following one session's transcript from "now": only what is appended is read, line by
//! line within bounds, waking on inotify (or every 50 ms where inotify cannot be had).

use std::fmt;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use claude_peer_probe::stream::{Line, LineBuffer};
use claude_peer_registry::ClaudeHome;
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::fs::{AtFlags, CWD, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::find::{self, Found};
use crate::{Error, Fact, fact};

/// The longest line read: a message's text (64 KiB) appears twice, escaped, in the line
/// that gives it to the model. Longer lines are skipped, never held.
const MAX_LINE: usize = 4 * 1024 * 1024;
/// Bytes read at a time.
const CHUNK: usize = 64 * 1024;
/// Bytes read per call to [`Follower::next`], at most: a call returns in bounded time
/// however much was written meanwhile; the rest waits for the next call.
const MAX_READ: usize = 8 * 1024 * 1024;
/// How often the file system is looked at where inotify cannot watch it.
const POLL: Duration = Duration::from_millis(50);
/// inotify reads per wakeup, at most, to empty its queue (events coalesce meanwhile).
const MAX_DRAIN: usize = 64;

/// What the followed file is watched for: writes, and every way it can stop being the
/// file at its path (`ATTRIB`: a link count dropping as it is removed or renamed over).
const FILE_EVENTS: WatchFlags = WatchFlags::MODIFY
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DONT_FOLLOW);
/// What directories are watched for while the transcript does not exist: a name
/// appearing in them.
const DIR_EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::ONLYDIR);

/// One session's transcript, followed from the moment [`Follower::start`] was called.
///
/// Lines already in the file at start are never reported. A transcript that does not
/// exist yet (a fresh session writes it at its first message) is looked for as it
/// appears and then read from its beginning: all of it was written after start.
///
/// After an error the follower is spent: every later call returns the same error.
pub struct Follower {
    home: ClaudeHome,
    session_id: String,
    state: State,
    /// The inotify descriptor holding the current state's watches; `None` where inotify
    /// cannot be had.
    notify: Option<OwnedFd>,
    /// Whether the watches cover every change that matters; if not, the file system is
    /// looked at again every [`POLL`] (and, with no transcript yet, after any event).
    watched: bool,
    lines: LineBuffer,
    path: Option<PathBuf>,
}

#[derive(Debug)]
enum State {
    /// No transcript yet.
    Absent,
    Open(Open),
    Lost(Error),
}

/// Where reading a newly opened transcript begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Begin {
    /// At its end: it existed at start.
    End,
    /// At its beginning: it appeared after start.
    Start,
    /// This many bytes in: the length it had when the caller last looked.
    At(u64),
}

/// The transcript being read.
#[derive(Debug)]
struct Open {
    file: OwnedFd,
    path: PathBuf,
    /// The file as opened: the path must go on naming it (same device and inode).
    opened: Stat,
    /// Bytes read so far (or skipped, at start).
    offset: u64,
    /// Started in the middle of a line: its rest, up to its newline, is skipped.
    mid_line: bool,
}

impl Follower {
    /// Starts following the transcript of `session_id` in `home` from its end now:
    /// call it before the send whose effects are to be seen.
    pub fn start(home: &ClaudeHome, session_id: &str) -> Result<Self, Error> {
        find::check_session_id(session_id)?;
        let mut follower = Self {
            home: home.clone(),
            session_id: session_id.to_owned(),
            state: State::Absent,
            notify: None,
            watched: false,
            lines: LineBuffer::new(MAX_LINE),
            path: None,
        };
        match find::locate(home, session_id, &mut |_| {})? {
            Some(found) => follower.open(found, Begin::End)?,
            None => follower.look()?,
        }
        Ok(follower)
    }

    /// Starts following the transcript of `session_id` in `home` from `offset` bytes
    /// in: the length it had when the caller looked before a send (0 when it had none),
    /// so the facts are those written since. One shorter than `offset` now is
    /// [`Error::Truncated`]: not the file looked at then.
    pub fn since(home: &ClaudeHome, session_id: &str, offset: u64) -> Result<Self, Error> {
        find::check_session_id(session_id)?;
        let mut follower = Self {
            home: home.clone(),
            session_id: session_id.to_owned(),
            state: State::Absent,
            notify: None,
            watched: false,
            lines: LineBuffer::new(MAX_LINE),
            path: None,
        };
        match find::locate(home, session_id, &mut |_| {})? {
            Some(found) => follower.open(found, Begin::At(offset))?,
            None if offset == 0 => follower.look()?,
            None => {
                let path = home
                    .root()
                    .join("projects/*")
                    .join(format!("{session_id}.jsonl"));
                return Err(Error::Replaced { path });
            }
        }
        Ok(follower)
    }

    /// The facts of the lines appended since the last call, in the order written; when
    /// there are none, waits up to `wait` for some, and returns what came (possibly
    /// nothing). Never blocks much longer than `wait`; reads at most 8 MiB per call.
    ///
    /// A line is reported once, whole, after its newline; lines over 4 MiB are skipped.
    /// Facts written before the transcript was truncated or replaced are returned first;
    /// then the error, and the same error on every later call.
    pub fn next(&mut self, wait: Duration) -> Result<Vec<Fact>, Error> {
        if let State::Lost(err) = &self.state {
            return Err(err.again());
        }
        let result = self.follow(wait);
        if let Err(err) = &result {
            self.state = State::Lost(err.again());
            self.notify = None;
        }
        result
    }

    /// The transcript being followed, once it was found.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    fn follow(&mut self, wait: Duration) -> Result<Vec<Fact>, Error> {
        let deadline = Instant::now().checked_add(wait);
        let mut facts = Vec::new();
        let mut budget = MAX_READ;
        loop {
            self.step(&mut facts, &mut budget)?;
            if !facts.is_empty() || budget == 0 {
                return Ok(facts);
            }
            let left = deadline.map_or(wait, |deadline| {
                deadline.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Ok(facts);
            }
            self.wait_for_change(left);
        }
    }

    /// Looks once: for the transcript, while there is none; else at what was appended,
    /// and (when nothing was) whether the file is still the one at its path, whole.
    fn step(&mut self, facts: &mut Vec<Fact>, budget: &mut usize) -> Result<(), Error> {
        if matches!(self.state, State::Absent) && !self.watched {
            self.look()?;
        }
        let State::Open(open) = &mut self.state else {
            return Ok(());
        };
        if open.read(&mut self.lines, facts, budget)? == 0 {
            open.check()?;
        }
        Ok(())
    }

    /// Watches where the transcript can appear, then searches for it (in that order, so
    /// that what the search misses, a watch reports).
    fn look(&mut self) -> Result<(), Error> {
        let notify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok();
        let mut watched = notify
            .as_ref()
            .is_some_and(|notify| watch_home(notify, &self.home));
        let found = find::locate(&self.home, &self.session_id, &mut |dir| {
            if let Some(notify) = &notify
                && inotify::add_watch(notify, dir, DIR_EVENTS | WatchFlags::DONT_FOLLOW).is_err()
            {
                watched = false;
            }
        })?;
        self.notify = notify;
        self.watched = watched;
        match found {
            Some(found) => self.open(found, Begin::Start),
            None => Ok(()),
        }
    }

    /// Opens a transcript found, where it was found, and watches it.
    fn open(&mut self, found: Found, begin: Begin) -> Result<(), Error> {
        let Found {
            path, dir, name, ..
        } = found;
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let file = match rustix::fs::openat(&dir, name.as_str(), flags, Mode::empty()) {
            Ok(file) => file,
            Err(Errno::LOOP) => {
                return Err(Error::NotOurs {
                    path,
                    why: "a symbolic link".to_owned(),
                });
            }
            // Removed since it was found: look again; one that appears later is new.
            Err(Errno::NOENT) => {
                self.state = State::Absent;
                self.watched = false;
                return Ok(());
            }
            Err(err) => return Err(Error::io(path, err)),
        };
        let opened = rustix::fs::fstat(&file).map_err(|err| Error::io(&path, err))?;
        find::check_ours(&opened, &path)?;
        let (offset, mid_line) = match begin {
            Begin::Start => (0, false),
            Begin::End => {
                let size = u64::try_from(opened.st_size).unwrap_or(0);
                let mid_line = size > 0 && !ends_a_line(&file, size - 1, &path)?;
                (size, mid_line)
            }
            Begin::At(offset) => {
                let size = u64::try_from(opened.st_size).unwrap_or(0);
                if size < offset {
                    return Err(Error::Truncated { path });
                }
                let mid_line = offset > 0 && !ends_a_line(&file, offset - 1, &path)?;
                (offset, mid_line)
            }
        };
        let notify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok();
        self.watched = notify
            .as_ref()
            .is_some_and(|notify| inotify::add_watch(notify, &path, FILE_EVENTS).is_ok());
        self.notify = notify;
        self.lines = LineBuffer::new(MAX_LINE);
        self.path = Some(path.clone());
        self.state = State::Open(Open {
            file,
            path,
            opened,
            offset,
            mid_line,
        });
        Ok(())
    }

    /// Sleeps until a watch reports something or `left` passes; without watches, for
    /// [`POLL`] at most. Never fails: a broken watch turns into polling.
    fn wait_for_change(&mut self, left: Duration) {
        let Some(notify) = self.notify.as_ref().filter(|_| self.watched) else {
            std::thread::sleep(left.min(POLL));
            return;
        };
        let timeout = Timespec::try_from(left).unwrap_or(Timespec {
            tv_sec: i64::MAX,
            tv_nsec: 0,
        });
        let mut fds = [PollFd::new(notify, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(0) | Err(Errno::INTR) => {}
            Ok(_) => {
                if drain(notify).is_err() {
                    self.watched = false;
                }
                if matches!(self.state, State::Absent) {
                    // Something appeared: search again, and watch what appeared.
                    self.watched = false;
                }
            }
            Err(_) => self.watched = false,
        }
    }
}

impl fmt::Debug for Follower {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The pending line (up to 4 MiB) is shown by its length only.
        f.debug_struct("Follower")
            .field("home", &self.home)
            .field("session_id", &self.session_id)
            .field("state", &self.state)
            .field("watched", &self.watched)
            .field("pending", &self.lines.pending())
            .finish_non_exhaustive()
    }
}

impl Open {
    /// Reads what was appended (within `budget`), handing each complete line's fact to
    /// `facts`; the number of bytes read.
    fn read(
        &mut self,
        lines: &mut LineBuffer,
        facts: &mut Vec<Fact>,
        budget: &mut usize,
    ) -> Result<usize, Error> {
        let mut buf = vec![0; CHUNK];
        let mut total = 0;
        while *budget > 0 {
            let want = CHUNK.min(*budget);
            let n = match rustix::io::pread(&self.file, &mut buf[..want], self.offset) {
                Ok(0) => break,
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                // What was read is reported first; the next read meets the error again.
                Err(_) if total > 0 => break,
                Err(err) => return Err(Error::io(&self.path, err)),
            };
            self.offset += n as u64;
            total += n;
            *budget -= n;
            let mut chunk = &buf[..n];
            if self.mid_line {
                match chunk.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        chunk = &chunk[end + 1..];
                        self.mid_line = false;
                    }
                    None => continue,
                }
            }
            lines.push(chunk, |line| {
                if let Line::Whole(line) = line {
                    facts.extend(fact(line));
                }
            });
        }
        Ok(total)
    }

    /// Whether the file is still the one opened, at least as long as what was read.
    fn check(&self) -> Result<(), Error> {
        let now = rustix::fs::fstat(&self.file).map_err(|err| Error::io(&self.path, err))?;
        if u64::try_from(now.st_size).unwrap_or(0) < self.offset {
            return Err(Error::Truncated {
                path: self.path.clone(),
            });
        }
        match rustix::fs::statat(CWD, &self.path, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(at) if at.st_dev == self.opened.st_dev && at.st_ino == self.opened.st_ino => Ok(()),
            Ok(_) | Err(Errno::NOENT | Errno::NOTDIR) => Err(Error::Replaced {
                path: self.path.clone(),
            }),
            Err(err) => Err(Error::io(&self.path, err)),
        }
    }
}

/// Watches the `projects` directory for new project directories, or, while it does not
/// exist, the home for it to appear; whether that worked.
fn watch_home(notify: &OwnedFd, home: &ClaudeHome) -> bool {
    let projects = home.projects_dir();
    match inotify::add_watch(notify, &projects, DIR_EVENTS) {
        Ok(_) => true,
        Err(Errno::NOENT) => {
            if inotify::add_watch(notify, home.root(), DIR_EVENTS).is_err() {
                return false;
            }
            // It may have appeared between the two.
            matches!(
                inotify::add_watch(notify, &projects, DIR_EVENTS),
                Ok(_) | Err(Errno::NOENT)
            )
        }
        Err(_) => false,
    }
}

/// Whether the byte at `at` is a newline: a file that existed at start may be in the
/// middle of a line, whose rest was written before start too.
fn ends_a_line(file: &OwnedFd, at: u64, path: &Path) -> Result<bool, Error> {
    let mut byte = [0];
    loop {
        match rustix::io::pread(file, &mut byte, at) {
            Ok(0) => return Ok(true),
            Ok(_) => return Ok(byte[0] == b'\n'),
            Err(Errno::INTR) => {}
            Err(err) => return Err(Error::io(path, err)),
        }
    }
}

/// Empties the inotify queue: only that something happened matters.
fn drain(notify: &OwnedFd) -> rustix::io::Result<()> {
    let mut buf = [0; 4096];
    for _ in 0..MAX_DRAIN {
        match rustix::io::read(notify, &mut buf) {
            Ok(0) | Err(Errno::AGAIN) => return Ok(()),
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}
