//! In-memory stand-ins for the probe's traits.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use claude_peer_probe::{
    Census, Counting, DirStatus, FileKind, Notice, Notifier, ProcessTable, Reader, RecordFile,
    RegistryFs, SocketStatus,
};
use claude_peer_registry::{ClaudeHome, Pid, ProcessFacts, Signal};

/// A uid for fakes: the reader's, and the owner of the files it is to trust.
pub const UID: u32 = 1000;

/// A home for fakes, which never look at its paths beyond a file's name.
#[must_use]
pub fn home() -> ClaudeHome {
    ClaudeHome::new("/nonexistent/claude-home")
}

/// A process table held in a map: pids not in it answer `ESRCH`.
#[derive(Debug, Clone)]
pub struct FakeProcessTable {
    /// What each pid is.
    pub processes: HashMap<Pid, ProcessFacts>,
    /// Each pid's parent, where it has one.
    pub parents: HashMap<Pid, Pid>,
    /// This reader.
    pub reader: Reader,
}

impl FakeProcessTable {
    /// An empty table for a reader with `uid` in `pid_domain`.
    #[must_use]
    pub fn new(uid: u32, pid_domain: Option<&str>) -> Self {
        Self {
            processes: HashMap::new(),
            parents: HashMap::new(),
            reader: Reader {
                uid,
                pid_domain: pid_domain.map(str::to_owned),
            },
        }
    }

    /// Adds a live process leading its thread group, with `start_token`.
    #[must_use]
    pub fn with_live(mut self, pid: Pid, start_token: &str) -> Self {
        self.processes.insert(
            pid,
            ProcessFacts {
                signal: Signal::Alive,
                state: Some(claude_peer_registry::ProcessState::Running),
                thread_group_leader: Some(true),
                start_token: Some(start_token.to_owned()),
                started_at: None,
            },
        );
        self
    }

    /// Makes `parent` the parent of `pid`.
    #[must_use]
    pub fn with_parent(mut self, pid: Pid, parent: Pid) -> Self {
        self.parents.insert(pid, parent);
        self
    }
}

impl ProcessTable for FakeProcessTable {
    fn signal(&self, pid: Pid) -> Signal {
        self.processes
            .get(&pid)
            .map_or(Signal::NoSuchProcess, |facts| facts.signal)
    }

    /// A fake table sees every process: its census is every pid that answers the
    /// signal (alive or not permitted), whatever the number of records; counting
    /// processes only, none known to be a thread.
    fn census(&self, _records: usize, counting: Counting) -> Option<Census> {
        Some(Census::new(
            self.processes
                .iter()
                .filter(|(_, facts)| facts.signal != Signal::NoSuchProcess)
                .filter(|(_, facts)| {
                    counting == Counting::ProcessesAndThreads
                        || facts.thread_group_leader != Some(false)
                })
                .map(|(pid, _)| *pid),
        ))
    }

    fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts {
        self.processes
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| ProcessFacts::with_signal(signal))
    }

    fn parent(&self, pid: Pid) -> Option<Pid> {
        self.parents.get(&pid).copied()
    }

    fn reader(&self) -> Reader {
        self.reader.clone()
    }
}

/// One file in a [`FakeRegistryFs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeFile {
    /// What it is.
    pub kind: FileKind,
    /// Owner uid.
    pub owner: u32,
    /// Last modification.
    pub modified: Option<SystemTime>,
    /// Successive reads return these in turn; the last one repeats. A torn write that
    /// is whole again on the second read is `[torn, whole]`.
    pub reads: Vec<Vec<u8>>,
}

impl FakeFile {
    /// A regular file owned by `owner` holding `bytes`.
    #[must_use]
    pub fn regular(owner: u32, bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            kind: FileKind::Regular,
            owner,
            modified: None,
            reads: vec![bytes.into()],
        }
    }
}

/// A registry directory in memory, counting the reads it serves.
#[derive(Debug, Default)]
pub struct FakeRegistryFs {
    /// The directory's own status; `None` when it does not exist.
    pub dir: Option<DirStatus>,
    /// Its entries by name.
    pub files: BTreeMap<OsString, FakeFile>,
    /// Socket paths and what `lstat` says of them; absent paths are missing.
    pub sockets: HashMap<PathBuf, SocketStatus>,
    reads: Mutex<HashMap<OsString, VecDeque<Vec<u8>>>>,
    read_log: Mutex<Vec<OsString>>,
}

impl FakeRegistryFs {
    /// An existing registry directory owned by `owner`, mode 0700.
    #[must_use]
    pub fn owned_by(owner: u32) -> Self {
        Self {
            dir: Some(DirStatus {
                kind: FileKind::Directory,
                owner,
                mode: 0o700,
            }),
            ..Self::default()
        }
    }

    /// Adds a file.
    #[must_use]
    pub fn with_file(mut self, name: &str, file: FakeFile) -> Self {
        self.files.insert(name.into(), file);
        self
    }

    /// The names of the files read so far, in order.
    #[must_use]
    pub fn reads(&self) -> Vec<OsString> {
        lock(&self.read_log).clone()
    }

    /// Puts `file` at `name`, replacing what was there; its reads start over.
    pub fn put(&mut self, name: &str, file: FakeFile) {
        lock(&self.reads).remove(OsString::from(name).as_os_str());
        self.files.insert(name.into(), file);
    }

    /// Removes `name`.
    pub fn remove(&mut self, name: &str) {
        lock(&self.reads).remove(OsString::from(name).as_os_str());
        self.files.remove(OsString::from(name).as_os_str());
    }
}

impl RegistryFs for FakeRegistryFs {
    fn dir_status(&self, _dir: &Path) -> io::Result<Option<DirStatus>> {
        Ok(self.dir)
    }

    /// The directory's path: a fake has nothing to open.
    type Dir = PathBuf;

    fn open_dir(&self, dir: &Path) -> io::Result<PathBuf> {
        if self.dir.is_none() {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(dir.to_owned())
    }

    fn list(&self, _dir: &PathBuf, each: &mut dyn FnMut(&OsStr, FileKind)) -> io::Result<()> {
        if self.dir.is_none() {
            return Err(io::ErrorKind::NotFound.into());
        }
        for (name, file) in &self.files {
            each(name, file.kind);
        }
        Ok(())
    }

    fn read_record(&self, path: &Path) -> io::Result<RecordFile> {
        let name = path.file_name().unwrap_or_default().to_owned();
        let file = self.files.get(&name).ok_or(io::ErrorKind::NotFound)?;
        lock(&self.read_log).push(name.clone());
        let bytes = if file.kind == FileKind::Regular {
            let mut reads = lock(&self.reads);
            let queue = reads
                .entry(name)
                .or_insert_with(|| file.reads.iter().cloned().collect());
            if queue.len() > 1 {
                queue.pop_front().unwrap_or_default()
            } else {
                queue.front().cloned().unwrap_or_default()
            }
        } else {
            Vec::new()
        };
        Ok(RecordFile {
            kind: file.kind,
            owner: file.owner,
            modified: file.modified,
            size: bytes.len() as u64,
            bytes,
        })
    }

    fn read_record_in(&self, dir: &PathBuf, name: &OsStr) -> io::Result<RecordFile> {
        self.read_record(&dir.join(name))
    }

    fn socket_status(&self, path: &Path) -> io::Result<SocketStatus> {
        Ok(self
            .sockets
            .get(path)
            .copied()
            .unwrap_or(SocketStatus::Missing))
    }
}

/// One fake shared between the code under test and the test that changes it.
///
/// Clones share the fake; the probe's traits are implemented by borrowing it, so a
/// `Discovery` or a watch owns one handle while the test keeps another.
#[derive(Debug, Default)]
pub struct Shared<T>(Arc<Mutex<T>>);

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

/// A fake's lock; a test that panicked while holding it leaves nothing half done.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<T> Shared<T> {
    /// Shares `fake`.
    pub fn new(fake: T) -> Self {
        Self(Arc::new(Mutex::new(fake)))
    }

    /// The fake, to change it.
    pub fn get(&self) -> MutexGuard<'_, T> {
        lock(&self.0)
    }
}

impl<T: ProcessTable + Send> ProcessTable for Shared<T> {
    fn signal(&self, pid: Pid) -> Signal {
        lock(&self.0).signal(pid)
    }

    fn census(&self, records: usize, counting: Counting) -> Option<Census> {
        lock(&self.0).census(records, counting)
    }

    fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts {
        lock(&self.0).facts(pid, signal)
    }

    fn parent(&self, pid: Pid) -> Option<Pid> {
        lock(&self.0).parent(pid)
    }

    fn reader(&self) -> Reader {
        lock(&self.0).reader()
    }
}

impl<T: RegistryFs + Send> RegistryFs for Shared<T> {
    fn dir_status(&self, dir: &Path) -> io::Result<Option<DirStatus>> {
        lock(&self.0).dir_status(dir)
    }

    type Dir = T::Dir;

    fn open_dir(&self, dir: &Path) -> io::Result<T::Dir> {
        lock(&self.0).open_dir(dir)
    }

    fn list(&self, dir: &T::Dir, each: &mut dyn FnMut(&OsStr, FileKind)) -> io::Result<()> {
        lock(&self.0).list(dir, each)
    }

    fn read_record(&self, path: &Path) -> io::Result<RecordFile> {
        lock(&self.0).read_record(path)
    }

    fn read_record_in(&self, dir: &T::Dir, name: &OsStr) -> io::Result<RecordFile> {
        lock(&self.0).read_record_in(dir, name)
    }

    fn socket_status(&self, path: &Path) -> io::Result<SocketStatus> {
        lock(&self.0).socket_status(path)
    }
}

impl<T: Notifier> Notifier for Shared<T> {
    fn watch_registry(&mut self, home: &Path, registry: &Path) -> bool {
        lock(&self.0).watch_registry(home, registry)
    }

    fn watch_exit(&mut self, pid: Pid) -> bool {
        lock(&self.0).watch_exit(pid)
    }

    fn unwatch_exit(&mut self, pid: Pid) {
        lock(&self.0).unwatch_exit(pid);
    }

    fn wait(&mut self, timeout: Duration, notices: &mut Vec<Notice>) -> io::Result<()> {
        lock(&self.0).wait(timeout, notices)
    }
}

/// A notifier fed by the test: the notices it is given, and exits of the pids the
/// watch asked it to watch.
#[derive(Debug, Default)]
pub struct FakeNotifier {
    /// Notices not yet taken.
    pub pending: Vec<Notice>,
    /// Whether the registry counts as watched (else the watch polls).
    pub polling: bool,
    watched: BTreeSet<Pid>,
}

impl FakeNotifier {
    /// Announces `notice`.
    pub fn notify(&mut self, notice: Notice) {
        self.pending.push(notice);
    }

    /// `pid`'s process exited: announced if it is watched, as a pidfd would.
    pub fn exit(&mut self, pid: Pid) {
        if self.watched.remove(&pid) {
            self.pending.push(Notice::Exited(pid));
        }
    }

    /// Whether `pid`'s exit is watched.
    #[must_use]
    pub fn watches(&self, pid: Pid) -> bool {
        self.watched.contains(&pid)
    }
}

impl Notifier for FakeNotifier {
    fn watch_registry(&mut self, _home: &Path, _registry: &Path) -> bool {
        !self.polling
    }

    fn watch_exit(&mut self, pid: Pid) -> bool {
        self.watched.insert(pid);
        true
    }

    fn unwatch_exit(&mut self, pid: Pid) {
        self.watched.remove(&pid);
    }

    /// Hands over the pending notices; with none, sleeps `timeout` as a quiet OS would.
    fn wait(&mut self, timeout: Duration, notices: &mut Vec<Notice>) -> io::Result<()> {
        if self.pending.is_empty() {
            std::thread::sleep(timeout);
        }
        notices.append(&mut self.pending);
        Ok(())
    }
}
