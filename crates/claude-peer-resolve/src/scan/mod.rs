//! Discovery: the registry read afresh and each entry judged, handed over as the caller
//! advances.
//!
//! This module holds what callers see: [`Discovery`] with its scans, [`Entries`], [`Scan`],
//! and the types of an entry (`addressability` says whether and why not it can be
//! messaged). The work is in parts, one job each, in the order a scan
//! does it: `listing` lists the registry directory once and classifies its names,
//! `census` learns which pids exist, `batch` signals ahead of the caller and judges many
//! records across threads, `entry` judges one record, and `read` reads its file within
//! the limits, again while it is caught mid-rewrite.

mod addressability;
mod batch;
mod census;
mod entry;
mod listing;
mod read;

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::OnceLock;

use claude_peer_probe::{
    Census, DirStatus, FileKind, OsProcessTable, OsRegistryFs, ProcessTable, Reader, RegistryFs,
};
use claude_peer_registry::{ClaudeHome, Liveness, Pid, Record, Rejection, Signal, Verdict};

pub use self::addressability::{Addressability, Unaddressable};
use self::batch::Ahead;
use self::entry::invalid;
use self::listing::dir_warnings;
use self::read::At;
pub use self::read::Rereads;
use crate::Error;

/// Which entries a scan reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Live sessions only. Files of pids that do not answer `kill(pid, 0)` are not read.
    Live,
    /// Every `*.json` entry, each with its verdict.
    All,
}

/// One registry entry, live or not, and what was found about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The entry's path.
    pub file: PathBuf,
    /// The pid from the file name, when the name is a record name.
    pub pid: Option<Pid>,
    /// The record, when it parsed.
    pub record: Option<Record>,
    /// Live or not, and why.
    pub verdict: Verdict,
    /// Whether it can be messaged; only live sessions can.
    pub addressability: Addressability,
}

impl Entry {
    /// True for a live session.
    #[must_use]
    pub fn is_live(&self) -> bool {
        self.verdict.liveness == Liveness::Live
    }
}

/// Something about the registry directory itself that a careful user should know.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The registry directory is a symbolic link.
    DirIsSymlink {
        /// The registry directory.
        path: PathBuf,
    },
    /// The registry directory belongs to another user.
    DirNotOwned {
        /// The registry directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This reader's uid.
        uid: u32,
    },
    /// Group or others may write the registry directory, so anyone could plant records.
    DirWritableByOthers {
        /// The registry directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

impl Warning {
    /// The stable machine name of this warning.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::DirIsSymlink { .. } => "registry_is_symlink",
            Self::DirNotOwned { .. } => "registry_not_owned",
            Self::DirWritableByOthers { .. } => "registry_writable_by_others",
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DirIsSymlink { path } => {
                write!(
                    f,
                    "the registry directory `{}` is a symbolic link",
                    path.display()
                )
            }
            Self::DirNotOwned { path, owner, uid } => write!(
                f,
                "the registry directory `{}` belongs to uid {owner}, not to this user (uid {uid})",
                path.display()
            ),
            Self::DirWritableByOthers { path, mode } => write!(
                f,
                "the registry directory `{}` is writable by group or others (mode {mode:04o}); anyone could plant records",
                path.display()
            ),
        }
    }
}

/// The result of a scan: entries sorted by pid, and warnings about the directory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scan<S = Entry> {
    /// Entries sorted by pid; rejected names (no pid) last, by name.
    pub entries: Vec<S>,
    /// What is wrong with the registry directory itself.
    pub warnings: Vec<Warning>,
}

/// A scan in progress: each registry entry judged as the iterator reaches it, in
/// [`Scan::entries`] order (records by pid, then rejected names by name). Made by
/// [`Discovery::entries`].
pub struct Entries<'d, P, F: RegistryFs> {
    discovery: &'d Discovery<P, F>,
    scope: Scope,
    dir: PathBuf,
    /// `None` when there is no registry (then there are no entries either).
    status: Option<DirStatus>,
    /// The registry directory, opened once; `None` as `status`.
    handle: Option<F::Dir>,
    reader: Reader,
    /// Which pids exist, when learning that at once was cheaper than signalling each.
    census: Option<Census>,
    warnings: Vec<Warning>,
    records: std::vec::IntoIter<(Pid, FileKind)>,
    /// Records signalled ahead, each judged on its `next()`.
    ahead: VecDeque<(Pid, FileKind, Signal)>,
    /// Records judged ahead on several threads, in order, each with its entry; a slot
    /// stays empty where the record turned out to be no entry (removed since it was
    /// listed, or not live).
    judged: std::vec::IntoIter<((Pid, FileKind, Signal), OnceLock<Entry>)>,
    /// The cores to judge on, learned when first needed.
    cores: Option<usize>,
    rejected: std::vec::IntoIter<(OsString, Rejection)>,
}

impl<P, F: RegistryFs> fmt::Debug for Entries<'_, P, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entries")
            .field("dir", &self.dir)
            .field("scope", &self.scope)
            .field("records_left", &self.records.len())
            .finish_non_exhaustive()
    }
}

impl<P, F: RegistryFs> Entries<'_, P, F> {
    /// What is wrong with the registry directory itself; known before any entry.
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

impl<P: ProcessTable, F: RegistryFs> Iterator for Entries<'_, P, F> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        let status = self.status?;
        loop {
            if let Some(session) = self.judged.find_map(|(_, slot)| slot.into_inner()) {
                return Some(session);
            }
            if let Some((pid, kind, signal)) = self.ahead.pop_front() {
                match self.judge_record(pid, kind, signal, status) {
                    Some(session) => return Some(session),
                    None => continue,
                }
            }
            if self.signal_ahead(status) == Ahead::Exhausted {
                break;
            }
        }
        let (name, rejection) = self.rejected.next()?;
        Some(invalid(self.dir.join(name), None, &rejection))
    }
}

/// Discovery over a process table and a registry file system.
#[derive(Debug, Clone)]
pub struct Discovery<P, F> {
    processes: P,
    fs: F,
    rereads: Rereads,
}

impl Discovery<OsProcessTable, OsRegistryFs> {
    /// Discovery on this machine's real process table and file system.
    #[must_use]
    pub fn os() -> Self {
        Self::new(OsProcessTable::new(), OsRegistryFs)
    }
}

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// Discovery over the given probes.
    pub const fn new(processes: P, fs: F) -> Self {
        Self {
            processes,
            fs,
            rereads: Rereads::DEFAULT,
        }
    }

    /// Changes how a live pid's torn record is read again (tests use short waits).
    #[must_use]
    pub const fn with_rereads(mut self, rereads: Rereads) -> Self {
        self.rereads = rereads;
        self
    }

    /// The process table.
    pub const fn processes(&self) -> &P {
        &self.processes
    }

    /// The registry file system.
    pub const fn fs(&self) -> &F {
        &self.fs
    }

    /// What is wrong with the registry directory itself (a link, another owner, writable
    /// by others), as a scan warns, without reading its entries: for a single send or
    /// resolution, whose user should hear it as `list`'s does.
    pub fn registry_warnings(&self, home: &ClaudeHome) -> Result<Vec<Warning>, Error> {
        let dir = home.sessions_dir();
        let status = self.fs.dir_status(&dir).map_err(|source| Error::Registry {
            path: dir.clone(),
            source,
        })?;
        Ok(status.map_or_else(Vec::new, |status| {
            dir_warnings(&dir, &status, self.processes.reader().uid)
        }))
    }

    /// Reads the registry afresh and judges every entry. A registry that does not
    /// exist is an empty scan; one that exists but cannot be listed is an error.
    ///
    /// This collects [`Discovery::entries`], which hands each entry over as it is judged.
    pub fn scan(&self, home: &ClaudeHome, scope: Scope) -> Result<Scan, Error> {
        let mut entries = self.entries(home, scope)?;
        let warnings = std::mem::take(&mut entries.warnings);
        Ok(Scan {
            entries: entries.collect(),
            warnings,
        })
    }

    /// Reads the registry afresh and judges its entries as the iterator is advanced, in
    /// the order of [`Scan::entries`]: memory stays flat however many records the
    /// registry holds (only the names are kept, a few bytes each, to sort them, and at
    /// most 1,024 entries judged ahead). Many live records are judged together across
    /// the cores; a few, one per `next()`. Each entry is judged exactly as
    /// [`Discovery::scan`] judges it. A registry that does not exist gives no entries;
    /// one that exists but cannot be listed is an error.
    pub fn entries(&self, home: &ClaudeHome, scope: Scope) -> Result<Entries<'_, P, F>, Error> {
        let dir = home.sessions_dir();
        let registry_error = |source: io::Error| Error::Registry {
            path: dir.clone(),
            source,
        };
        let reader = self.processes.reader();
        let mut entries = Entries {
            discovery: self,
            scope,
            status: None,
            warnings: Vec::new(),
            records: Vec::new().into_iter(),
            ahead: VecDeque::new(),
            judged: Vec::new().into_iter(),
            cores: None,
            rejected: Vec::new().into_iter(),
            census: None,
            handle: None,
            reader,
            dir: dir.clone(),
        };
        let Some(status) = self.fs.dir_status(&dir).map_err(registry_error)? else {
            return Ok(entries);
        };
        let listing = match self.list(&dir, scope) {
            Ok(listing) => listing,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(entries),
            Err(err) => return Err(registry_error(err)),
        };
        entries.warnings = dir_warnings(&dir, &status, entries.reader.uid);
        entries.status = Some(status);
        entries.handle = Some(listing.handle);
        entries.census = self.census(listing.records.len(), scope);
        entries.records = listing.records.into_iter();
        entries.rejected = listing.rejected.into_iter();
        Ok(entries)
    }

    /// The one entry `<pid>.json` judged afresh, exactly as a scan would judge it;
    /// `None` when there is no such file (or the registry does not exist), or when
    /// `scope` is live-only and it is not live.
    pub fn entry(&self, home: &ClaudeHome, pid: Pid, scope: Scope) -> Result<Option<Entry>, Error> {
        let dir = home.sessions_dir();
        let status = self.fs.dir_status(&dir).map_err(|source| Error::Registry {
            path: dir.clone(),
            source,
        })?;
        let Some(status) = status else {
            return Ok(None);
        };
        let reader = self.processes.reader();
        let signal = self.processes.signal(pid);
        Ok(self.judge_entry(
            At {
                dir: &dir,
                handle: None,
            },
            pid,
            FileKind::Unknown,
            signal,
            &status,
            &reader,
            scope,
        ))
    }
}
