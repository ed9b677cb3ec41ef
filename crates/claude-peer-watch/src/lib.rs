//! Watch the live Claude Code sessions: an event whenever one appears, changes or
//! vanishes.
//!
//! A [`Watcher`] keeps the live set of one Claude home and turns what the OS announces
//! into [`Event`]s. It is incremental: a change names one registry entry, and that
//! entry alone is judged again, with the very function a scan uses
//! ([`Discovery::entry`]); a pidfd per live session reports its exit (a crash writes
//! nothing). Everything is read again only at the start, when events were lost (the
//! inotify queue overflowed), when the registry directory appears, moves or is
//! replaced, and every [`Timing::rescan_every`] (a leftover record's pid reused by a
//! process that writes nothing). So an idle watch costs nothing however many leftover
//! records the registry holds.
//!
//! Records are read whole: when their writer closes them or renames them into place,
//! or [`Timing::settle`] after a write that nobody closes. A live session whose record
//! is caught torn anyway (its writer started the next rewrite) keeps its last known
//! state, with no event, until the record parses again, the file is removed or
//! replaced, or the process exits. Where changes cannot be noticed (no inotify, a
//! registry that is a symlink) the registry is scanned every [`Timing::poll_every`].
//!
//! Wait with [`Watcher::next_event`], or, in a poll loop or async runtime of your own,
//! wait until [`AsFd::as_fd`] is readable or [`Watcher::wake_within`] has passed, then
//! take events with `next_event(Duration::ZERO)` until it returns `None`.
//!
//! ```
//! use std::time::Duration;
//! use claude_peer_registry::ClaudeHome;
//! use claude_peer_watch::{Event, Watcher};
//! # let dir = tempfile::tempdir()?;
//! # std::fs::create_dir(dir.path().join("sessions"))?;
//! # let sessions = dir.path().join("sessions");
//! # let me = std::process::id();
//!
//! let home = ClaudeHome::new(dir.path());
//! let mut watcher = Watcher::os(home)?;
//! // This process registers itself the way Claude Code does.
//! std::fs::write(sessions.join(format!("{me}.json")), r#"{"sessionId":"s-1"}"#)?;
//! let Some(Event::Appeared(session)) = watcher.next_event(Duration::from_secs(10))? else {
//!     panic!("the session appears")
//! };
//! assert_eq!(session.record.session_id, "s-1");
//!
//! std::fs::remove_file(sessions.join(format!("{me}.json")))?;
//! let event = watcher.next_event(Duration::from_secs(10))?;
//! assert!(matches!(event, Some(Event::Vanished(_))));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use claude_peer_probe::{
    Notice, Notifier, OsNotifier, OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs,
};
use claude_peer_registry::{ClaudeHome, EntryName, Liveness, Pid, classify_entry_name};
use claude_peer_resolve::{Discovery, LiveSession, Rereads, Scope, Warning};

/// What happened to a live session.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A session became live (or was live when the watch started).
    Appeared(LiveSession),
    /// A live session's record or addressability changed; the session as it is now.
    Changed(LiveSession),
    /// A session is no longer live: its process ended, its record was removed or
    /// replaced by one that is not live. The session as it was last seen.
    Vanished(LiveSession),
}

impl Event {
    /// The session it is about.
    #[must_use]
    pub const fn session(&self) -> &LiveSession {
        match self {
            Self::Appeared(session) | Self::Changed(session) | Self::Vanished(session) => session,
        }
    }

    /// The stable name: `appeared`, `changed` or `vanished`.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Appeared(_) => "appeared",
            Self::Changed(_) => "changed",
            Self::Vanished(_) => "vanished",
        }
    }
}

/// Why a watch cannot go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The registry exists but cannot be read.
    #[error(transparent)]
    Scan(#[from] claude_peer_resolve::Error),
    /// The OS would not say what changed.
    #[error("cannot wait for registry changes: {0}")]
    Notifier(#[source] io::Error),
}

/// How long a watch waits for what.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// An entry written and not closed (a writer keeping it open) is read this long
    /// after its last change: 20 ms.
    pub settle: Duration,
    /// Everything is read again this often: a leftover record whose pid an unrelated
    /// process reused without writing anything can only be seen so. 30 s.
    pub rescan_every: Duration,
    /// Where changes cannot be noticed the registry is scanned this often, and live
    /// sessions whose exit cannot be watched (no pidfds) are judged again: 200 ms.
    pub poll_every: Duration,
}

impl Timing {
    /// 20 ms to settle, a rescan every 30 s, polling every 200 ms.
    pub const DEFAULT: Self = Self {
        settle: Duration::from_millis(20),
        rescan_every: Duration::from_secs(30),
        poll_every: Duration::from_millis(200),
    };
}

impl Default for Timing {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A live session as the watch last saw it.
#[derive(Debug)]
struct Live {
    session: LiveSession,
    /// Its process's exit will be announced (a pidfd is held).
    exit_watched: bool,
}

/// The live sessions of one Claude home, kept up to date as the OS announces changes.
#[derive(Debug)]
pub struct Watcher<P, F, N> {
    discovery: Discovery<P, F>,
    notifier: N,
    home: ClaudeHome,
    timing: Timing,
    live: BTreeMap<Pid, Live>,
    events: VecDeque<Event>,
    /// Entries being written, and when to read them if nobody closes them first.
    settling: BTreeMap<Pid, Instant>,
    /// Whether registry changes are announced; else the registry is polled.
    notified: bool,
    rescan_at: Instant,
    /// When live sessions without an exit watch are judged again.
    poll_at: Instant,
    warnings: Vec<Warning>,
}

impl Watcher<OsProcessTable, OsRegistryFs, OsNotifier> {
    /// Watches `home` on this machine: inotify where the kernel offers it, else polling.
    pub fn os(home: ClaudeHome) -> Result<Self, Error> {
        let notifier = OsNotifier::new().map_err(Error::Notifier)?;
        Self::new(Discovery::os(), notifier, home, Timing::DEFAULT)
    }

    /// Watches `home` on this machine by polling the registry (process exits are still
    /// watched by pidfd).
    pub fn os_polling(home: ClaudeHome) -> Result<Self, Error> {
        let notifier = OsNotifier::without_inotify().map_err(Error::Notifier)?;
        Self::new(Discovery::os(), notifier, home, Timing::DEFAULT)
    }
}

impl<P: ProcessTable, F: RegistryFs, N: Notifier> Watcher<P, F, N> {
    /// Starts watching `home`: the sessions live now are the first events.
    ///
    /// The watch reads a record when its writer is done with it, so it never waits to
    /// read a torn one again: `discovery`'s rereads are turned off.
    pub fn new(
        discovery: Discovery<P, F>,
        notifier: N,
        home: ClaudeHome,
        timing: Timing,
    ) -> Result<Self, Error> {
        let now = Instant::now();
        let mut watcher = Self {
            discovery: discovery.with_rereads(Rereads::NONE),
            notifier,
            home,
            timing,
            live: BTreeMap::new(),
            events: VecDeque::new(),
            settling: BTreeMap::new(),
            notified: false,
            rescan_at: now,
            poll_at: now,
            warnings: Vec::new(),
        };
        watcher.rescan()?;
        Ok(watcher)
    }

    /// The next event, waiting at most `timeout` for one; `None` when none came.
    /// `Duration::ZERO` takes what is ready without waiting.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<Event>, Error> {
        let deadline = Instant::now().checked_add(timeout);
        let mut notices = Vec::new();
        loop {
            if let Some(event) = self.events.pop_front() {
                return Ok(Some(event));
            }
            let due = self.next_due();
            let until = deadline.map_or(due, |deadline| deadline.min(due));
            let wait = until.saturating_duration_since(Instant::now());
            self.notifier
                .wait(wait, &mut notices)
                .map_err(Error::Notifier)?;
            self.handle(&mut notices)?;
            self.run_due(Instant::now())?;
            if self.events.is_empty() && deadline.is_some_and(|d| Instant::now() >= d) {
                return Ok(None);
            }
        }
    }

    /// How long a caller's own loop may wait on [`AsFd::as_fd`] before calling
    /// [`Watcher::next_event`] anyway (for a settle time or a rescan that is due).
    #[must_use]
    pub fn wake_within(&self) -> Duration {
        if self.events.is_empty() {
            self.next_due().saturating_duration_since(Instant::now())
        } else {
            Duration::ZERO
        }
    }

    /// The live sessions as the watch sees them now, by pid (the events not yet taken
    /// included).
    pub fn sessions(&self) -> impl Iterator<Item = &LiveSession> {
        self.live.values().map(|live| &live.session)
    }

    /// What is wrong with the registry directory itself, as of the last full read.
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// When something is due without any notice: a settled entry, a rescan or a poll.
    fn next_due(&self) -> Instant {
        let mut due = self.rescan_at;
        if let Some(settled) = self.settling.values().min() {
            due = due.min(*settled);
        }
        if self.live.values().any(|live| !live.exit_watched) {
            due = due.min(self.poll_at);
        }
        due
    }

    fn handle(&mut self, notices: &mut Vec<Notice>) -> Result<(), Error> {
        // Exits first: a pid reused after an exit is then never taken for the old session.
        notices.sort_by_key(|notice| !matches!(notice, Notice::Exited(_)));
        for notice in notices.drain(..) {
            match notice {
                Notice::Exited(pid) => {
                    self.settling.remove(&pid);
                    if let Some(gone) = self.live.remove(&pid) {
                        self.events.push_back(Event::Vanished(gone.session));
                    }
                }
                Notice::Rescan => self.rescan_at = Instant::now(),
                Notice::Written(name) | Notice::Removed(name) => {
                    if let EntryName::Record(pid) = classify_entry_name(&name) {
                        self.settling.remove(&pid);
                        self.rejudge(pid)?;
                    }
                }
                Notice::Writing(name) => {
                    if let EntryName::Record(pid) = classify_entry_name(&name) {
                        let at = later(Instant::now(), self.timing.settle);
                        self.settling.entry(pid).or_insert(at);
                    }
                }
            }
        }
        Ok(())
    }

    fn run_due(&mut self, now: Instant) -> Result<(), Error> {
        if now >= self.rescan_at {
            self.rescan()?;
        }
        let settled: Vec<Pid> = self
            .settling
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(pid, _)| *pid)
            .collect();
        for pid in settled {
            self.settling.remove(&pid);
            self.rejudge(pid)?;
        }
        if now >= self.poll_at {
            self.poll_at = later(now, self.timing.poll_every);
            let unwatched: Vec<Pid> = self
                .live
                .iter()
                .filter(|(_, live)| !live.exit_watched)
                .map(|(pid, _)| *pid)
                .collect();
            for pid in unwatched {
                self.rejudge(pid)?;
            }
        }
        Ok(())
    }

    /// Reads everything again (and re-establishes the registry's watch first, so that
    /// nothing written after the read goes unnoticed).
    fn rescan(&mut self) -> Result<(), Error> {
        let registry = self.home.sessions_dir();
        self.notified = self.notifier.watch_registry(self.home.root(), &registry);
        let scan = self.discovery.live(&self.home)?;
        self.warnings = scan.warnings;
        let fresh: BTreeMap<Pid, LiveSession> = scan
            .entries
            .into_iter()
            .map(|session| (session.pid, session))
            .collect();
        let missing: Vec<Pid> = self
            .live
            .keys()
            .filter(|pid| !fresh.contains_key(pid))
            .copied()
            .collect();
        for pid in missing {
            // Judged alone, so a record caught mid-rewrite keeps its session.
            self.rejudge(pid)?;
        }
        for (pid, session) in fresh {
            match self.live.get_mut(&pid) {
                Some(live) if live.exit_watched => {
                    if live.session != session {
                        live.session = session.clone();
                        self.events.push_back(Event::Changed(session));
                    }
                }
                // New (or not exit-watched): its exit is watched first, then it is judged.
                _ => self.rejudge(pid)?,
            }
        }
        let every = if self.notified {
            self.timing.rescan_every
        } else {
            self.timing.poll_every
        };
        self.rescan_at = later(Instant::now(), every);
        Ok(())
    }

    /// Judges `<pid>.json` afresh and records what changed.
    fn rejudge(&mut self, pid: Pid) -> Result<(), Error> {
        let known = self.live.get(&pid).map(|live| live.exit_watched);
        // The exit is watched before the judgement: whatever the judgement reads is then
        // the watched process or one that came after it (and the watch has fired).
        let exit_watched = known == Some(true) || self.notifier.watch_exit(pid);
        match self
            .discovery
            .entry(&self.home, pid, Scope::All)?
            .map(LiveSession::try_from)
        {
            Some(Ok(session)) => {
                let before = self.live.insert(
                    pid,
                    Live {
                        session: session.clone(),
                        exit_watched,
                    },
                );
                match before {
                    None => self.events.push_back(Event::Appeared(session)),
                    Some(before) if before.session != session => {
                        self.events.push_back(Event::Changed(session));
                    }
                    Some(_) => {}
                }
            }
            // Caught mid-rewrite while its process runs: it keeps what it last said.
            Some(Err(session))
                if session.verdict.liveness == Liveness::Unreadable && known.is_some() =>
            {
                if let Some(live) = self.live.get_mut(&pid) {
                    live.exit_watched = exit_watched;
                }
            }
            _ => {
                if exit_watched {
                    self.notifier.unwatch_exit(pid);
                }
                if let Some(gone) = self.live.remove(&pid) {
                    self.events.push_back(Event::Vanished(gone.session));
                }
            }
        }
        Ok(())
    }
}

/// `by` after `now`; a wait longer than a day is cut to a day (it only costs a rescan),
/// so that no `Timing` can overflow the clock.
fn later(now: Instant, by: Duration) -> Instant {
    const A_DAY: Duration = Duration::from_secs(86_400);
    now.checked_add(by.min(A_DAY)).unwrap_or(now)
}

impl<P, F, N: AsFd> AsFd for Watcher<P, F, N> {
    /// Readable when the OS has announced something; call [`Watcher::next_event`].
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.notifier.as_fd()
    }
}
