//! OS facts for the Claude Code session registry, behind small traits.
//!
//! This crate is how the registry and the process table are read: discovery, resolution
//! and the watch do no IO of their own, only through its traits. It answers questions,
//! it never decides: whether an entry is a live session is
//! `claude_peer_registry::judge`'s call. Two traits carry the facts, so tests and
//! property tests swap in fakes:
//!
//! - [`ProcessTable`]: `kill(pid, 0)` (or, for big registries, the pids `/proc`
//!   lists), `/proc/<pid>/stat` (state, start token, and thread-group leadership from
//!   its `exit_signal`; the parent), this reader's uid and pid domain. A long-lived [`OsProcessTable`] pins the live processes it
//!   has seen with pidfds and answers for them without reading `/proc` again;
//! - [`RegistryFs`]: the registry directory and its files, read without following
//!   links, without blocking and never past a bound; sockets by `lstat` only;
//! - [`Notifier`]: what changed since, for a watch: registry entries written or
//!   removed (inotify) and watched processes that exited (pidfd).
//!
//! Records are read with [`BoundedRead`], public so that other files someone else may
//! have planted (the settings store's) are read the same one way: links followed only
//! when asked, nothing blocking, only regular files, never past a limit.
//!
//! Nothing here connects to, reads or writes a socket, opens a `.key` file, or writes
//! anywhere in a Claude home.
//!
//! [`OsProcessTable`] and [`OsRegistryFs`] are the real implementations:
//!
//! ```
//! use claude_peer_probe::{FileKind, OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
//! use claude_peer_registry::{Pid, Signal};
//! # let home = tempfile::tempdir()?;
//! let sessions = home.path().join("sessions");
//! let fs = OsRegistryFs::new();
//! assert_eq!(fs.dir_status(&sessions)?, None, "no registry yet");
//!
//! std::fs::create_dir(&sessions)?;
//! std::fs::write(sessions.join("4242.json"), br#"{"sessionId":"x"}"#)?;
//! let record = fs.read_record(&sessions.join("4242.json"))?;
//! assert_eq!((record.kind, record.bytes.len()), (FileKind::Regular, 17));
//!
//! let table = OsProcessTable::new();
//! let me = Pid::new(std::process::id()).expect("a running process has a valid pid");
//! let facts = table.facts(me, table.signal(me));
//! assert_eq!(facts.signal, Signal::Alive);
//! # Ok::<(), std::io::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
use std::time::{Duration, SystemTime};

use claude_peer_registry::{Pid, ProcessFacts, Signal};

mod fs;
mod notify;
mod process;
pub mod stream;

pub use fs::{BoundedFile, BoundedRead, FileStatus, Links, Opens, OsRegistryFs, ReadError};
pub use notify::OsNotifier;
pub use process::OsProcessTable;

/// What this reader is: the facts a verdict compares records against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    /// The effective uid of this process.
    pub uid: u32,
    /// `linux:<machine-id>:<pid namespace>`, or `None` where it cannot be learned.
    pub pid_domain: Option<String>,
}

/// The pids that existed at one moment: every process, and with
/// [`Counting::ProcessesAndThreads`] every thread of one.
///
/// A pid not in it answered `kill(pid, 0)` with `ESRCH` at that moment (or, when only
/// processes were counted, was at most a thread's id), so a scan signals only the pids
/// in it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Census {
    /// Sorted, without duplicates.
    pids: Vec<Pid>,
}

impl Census {
    /// A census of exactly these pids.
    pub fn new(pids: impl IntoIterator<Item = Pid>) -> Self {
        let mut pids: Vec<Pid> = pids.into_iter().collect();
        pids.sort_unstable();
        pids.dedup();
        Self { pids }
    }

    /// Whether `pid` existed.
    #[must_use]
    pub fn contains(&self, pid: Pid) -> bool {
        self.pids.binary_search(&pid).is_ok()
    }

    /// How many pids existed.
    #[must_use]
    pub fn len(&self) -> usize {
        self.pids.len()
    }

    /// Whether none did.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pids.is_empty()
    }
}

/// Which pids a [`Census`] holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Counting {
    /// Thread-group leaders only: enough to find live sessions, since a thread's id is
    /// never one, and one listing of `/proc` finds them all.
    Processes,
    /// Every process and every thread of one: each pid `kill(pid, 0)` would find, so
    /// every leftover gets the very verdict signalling it would give.
    ProcessesAndThreads,
}

/// The process table, as far as the registry needs it. `Sync`: a scan judges many
/// live records on several threads at once.
pub trait ProcessTable: Sync {
    /// `kill(pid, 0)`. Never called for anything but a [`Pid`], so never for a group.
    fn signal(&self, pid: Pid) -> Signal;

    /// The pids that exist now, as `counting` says, learned at once when that costs
    /// less than signalling `records` pids one by one; `None` when it would not, or when
    /// this table cannot see every process (then each pid is signalled, and `EPERM`
    /// still tells a hidden process from none). By default, `None`.
    fn census(&self, records: usize, counting: Counting) -> Option<Census> {
        let _ = (records, counting);
        None
    }

    /// Everything else known about a pid that answered `signal`: state, thread-group
    /// leadership, start token and start time. Unknown facts stay `None`.
    fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts;

    /// The parent of `pid`'s process now, to find the session a program runs under;
    /// `None` when unknown or no [`Pid`] (0 or 1: no record names them). By default,
    /// `None`.
    fn parent(&self, pid: Pid) -> Option<Pid> {
        let _ = pid;
        None
    }

    /// This reader's uid and pid domain.
    fn reader(&self) -> Reader;
}

/// What kind of file system object an entry is, seen without following links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// A regular file.
    Regular,
    /// A directory.
    Directory,
    /// A symbolic link (never followed).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// The OS did not say.
    Unknown,
}

impl FileKind {
    /// A short name for messages: `regular file`, `fifo`, `symlink`, ….
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Regular => "regular file",
            Self::Directory => "directory",
            Self::Symlink => "symlink",
            Self::Fifo => "fifo",
            Self::Socket => "socket",
            Self::CharDevice => "character device",
            Self::BlockDevice => "block device",
            Self::Unknown => "file of unknown type",
        }
    }
}

/// The registry directory itself, from `lstat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirStatus {
    /// What the path is (a symlink is reported, not followed).
    pub kind: FileKind,
    /// Owner uid.
    pub owner: u32,
    /// Permission bits (`0o7777` mask).
    pub mode: u32,
}

/// What opening a record file gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFile {
    /// What the opened object is; only a regular file's bytes are read.
    pub kind: FileKind,
    /// Owner uid.
    pub owner: u32,
    /// Last modification.
    pub modified: Option<SystemTime>,
    /// The size `fstat` reported.
    pub size: u64,
    /// At most `MAX_RECORD_BYTES + 1` bytes; empty unless `kind` is regular, and empty
    /// when `size` is already over the limit (such a file is never read).
    pub bytes: Vec<u8>,
}

/// A messaging socket's facts, from `lstat` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketStatus {
    /// Nothing at that path.
    Missing,
    /// Something is there.
    Present {
        /// What it is; only a socket can be a messaging endpoint.
        kind: FileKind,
        /// Owner uid.
        owner: u32,
        /// The directory it is in (`lstat`), `None` when that is no directory.
        dir: Option<SocketDir>,
    },
}

/// The directory a messaging socket is in: whoever may change what it holds could put
/// another socket at the record's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketDir {
    /// Owner uid.
    pub owner: u32,
    /// Whether its group or others may write to it (sticky or not).
    pub shared: bool,
}

/// The registry directory, as far as scanning needs it. `Sync`: a scan reads many
/// records on several threads at once.
pub trait RegistryFs: Sync {
    /// `lstat` of the registry directory; `Ok(None)` when it does not exist.
    fn dir_status(&self, dir: &Path) -> io::Result<Option<DirStatus>>;

    /// The registry directory, opened once per scan: it is listed, and its records
    /// opened, relative to this handle rather than by walking the path again each time.
    type Dir: Sync;

    /// Opens the registry directory at `dir`.
    fn open_dir(&self, dir: &Path) -> io::Result<Self::Dir>;

    /// Hands each of the directory's entries (no `.`/`..`) to `each`, with its type
    /// seen without following links. A name is lent, not allocated: a registry of
    /// 10,000 leftovers is listed without 10,000 strings made and dropped.
    fn list(&self, dir: &Self::Dir, each: &mut dyn FnMut(&OsStr, FileKind)) -> io::Result<()>;

    /// Opens `path` without following links and without blocking, and reads at most
    /// `MAX_RECORD_BYTES + 1` bytes if it is a regular file no larger than the limit.
    fn read_record(&self, path: &Path) -> io::Result<RecordFile>;

    /// [`RegistryFs::read_record`] of the entry `name` of an opened directory.
    fn read_record_in(&self, dir: &Self::Dir, name: &OsStr) -> io::Result<RecordFile>;

    /// `lstat` of a messaging socket path. Never connects, reads or writes.
    fn socket_status(&self, path: &Path) -> io::Result<SocketStatus>;
}

/// A change the OS announced, for a watch to act on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Notice {
    /// A registry entry was written and closed, renamed into place, or had its owner or
    /// mode changed: it is whole, read it now.
    Written(OsString),
    /// A registry entry is being written (created or modified, not closed yet): read it
    /// once it has settled.
    Writing(OsString),
    /// A registry entry was removed or renamed away.
    Removed(OsString),
    /// Changes may have been missed (the event queue overflowed), or the registry
    /// directory appeared, moved or was replaced: everything must be read again.
    Rescan,
    /// A process watched with [`Notifier::watch_exit`] has exited (it may be a zombie,
    /// or reaped and its pid reused). It is no longer watched.
    Exited(Pid),
}

/// Registry changes and process exits, as far as a watch needs them.
///
/// A notifier only says what to look at again; what a record says and whether its
/// session is live are read and judged as a scan does.
pub trait Notifier {
    /// Starts (or re-establishes, after [`Notice::Rescan`]) watching the registry
    /// directory `registry` and, so that it is seen to appear or go, its `home`.
    /// `false` when changes in the registry cannot be noticed, so it must be polled.
    fn watch_registry(&mut self, home: &Path, registry: &Path) -> bool;

    /// Starts watching the process that has `pid` now for its exit; `false` when it
    /// cannot be watched (no such process, or no pidfds here). Watch before judging:
    /// what a judgement reads afterwards is then this process or a later one.
    fn watch_exit(&mut self, pid: Pid) -> bool;

    /// Stops watching `pid`'s process, if it is watched.
    fn unwatch_exit(&mut self, pid: Pid);

    /// Waits at most `timeout` for changes and appends what it learned to `notices`;
    /// returns with none when the time is up (or a signal interrupted the wait).
    fn wait(&mut self, timeout: Duration, notices: &mut Vec<Notice>) -> io::Result<()>;
}
