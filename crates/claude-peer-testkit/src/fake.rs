//! In-memory stand-ins for the probe's traits.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use claude_peer_probe::{
    DirEntry, DirStatus, FileKind, ProcessTable, Reader, RecordFile, RegistryFs, SocketStatus,
};
use claude_peer_registry::{Pid, ProcessFacts, Signal};

/// A process table held in a map: pids not in it answer `ESRCH`.
#[derive(Debug, Clone)]
pub struct FakeProcessTable {
    /// What each pid is.
    pub processes: HashMap<Pid, ProcessFacts>,
    /// This reader.
    pub reader: Reader,
}

impl FakeProcessTable {
    /// An empty table for a reader with `uid` in `pid_domain`.
    #[must_use]
    pub fn new(uid: u32, pid_domain: Option<&str>) -> Self {
        Self {
            processes: HashMap::new(),
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
}

impl ProcessTable for FakeProcessTable {
    fn signal(&self, pid: Pid) -> Signal {
        self.processes
            .get(&pid)
            .map_or(Signal::NoSuchProcess, |facts| facts.signal)
    }

    fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts {
        self.processes
            .get(&pid)
            .cloned()
            .unwrap_or_else(|| ProcessFacts::with_signal(signal))
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
    reads: RefCell<HashMap<OsString, VecDeque<Vec<u8>>>>,
    read_log: RefCell<Vec<OsString>>,
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
        self.read_log.borrow().clone()
    }
}

impl RegistryFs for FakeRegistryFs {
    fn dir_status(&self, _dir: &Path) -> io::Result<Option<DirStatus>> {
        Ok(self.dir)
    }

    fn list(&self, _dir: &Path) -> io::Result<Vec<DirEntry>> {
        if self.dir.is_none() {
            return Err(io::ErrorKind::NotFound.into());
        }
        Ok(self
            .files
            .iter()
            .map(|(name, file)| DirEntry {
                name: name.clone(),
                kind: file.kind,
            })
            .collect())
    }

    fn read_record(&self, path: &Path) -> io::Result<RecordFile> {
        let name = path.file_name().unwrap_or_default().to_owned();
        let file = self.files.get(&name).ok_or(io::ErrorKind::NotFound)?;
        self.read_log.borrow_mut().push(name.clone());
        let bytes = if file.kind == FileKind::Regular {
            let mut reads = self.reads.borrow_mut();
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

    fn socket_status(&self, path: &Path) -> io::Result<SocketStatus> {
        Ok(self
            .sockets
            .get(path)
            .copied()
            .unwrap_or(SocketStatus::Missing))
    }
}
