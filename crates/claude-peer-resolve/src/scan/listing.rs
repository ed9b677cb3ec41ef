//! The registry directory: its names listed once and classified as the listing lends
//! them, and what is wrong with the directory itself.
//!
//! Only a pid and a file type are kept per record name (and, for a full scan, each
//! rejected name), a few bytes each whatever the directory holds, sorted into the order
//! a scan hands entries over: records by pid, then rejected names by name. The handle the
//! listing used is kept, so every record is opened relative to that same directory.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use claude_peer_probe::{DirStatus, FileKind, RegistryFs};
use claude_peer_registry::{EntryName, Pid, Rejection, classify_entry_name};

use crate::{Discovery, Scope, Warning};

/// The registry directory's names, classified and sorted.
pub(super) struct Listing<D> {
    /// The directory, opened once.
    pub(super) handle: D,
    /// Each record's pid and the file type the listing gave, by pid.
    pub(super) records: Vec<(Pid, FileKind)>,
    /// Names that look like records but are not, by name; kept for a full scan only.
    pub(super) rejected: Vec<(OsString, Rejection)>,
}

impl<P, F: RegistryFs> Discovery<P, F> {
    /// Opens and lists the registry directory `dir`, keeping what a scan of `scope`
    /// reports.
    pub(super) fn list(&self, dir: &Path, scope: Scope) -> io::Result<Listing<F::Dir>> {
        let (mut records, mut rejected) = (Vec::new(), Vec::new());
        let mut classify = |name: &OsStr, kind| match classify_entry_name(name) {
            EntryName::NotARecord => {}
            EntryName::Rejected(rejection) => {
                if scope == Scope::All {
                    rejected.push((name.to_owned(), rejection));
                }
            }
            EntryName::Record(pid) => records.push((pid, kind)),
        };
        let handle = self.fs.open_dir(dir)?;
        self.fs.list(&handle, &mut classify)?;
        records.sort_unstable_by_key(|(pid, _)| *pid);
        rejected.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        Ok(Listing {
            handle,
            records,
            rejected,
        })
    }
}

/// What is wrong with the registry directory `dir` (as `lstat` gave `status`), for a
/// reader of uid `uid`.
pub(super) fn dir_warnings(dir: &Path, status: &DirStatus, uid: u32) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if status.kind == FileKind::Symlink {
        warnings.push(Warning::DirIsSymlink {
            path: dir.to_owned(),
        });
    }
    if status.owner != uid {
        warnings.push(Warning::DirNotOwned {
            path: dir.to_owned(),
            owner: status.owner,
            uid,
        });
    }
    if status.kind == FileKind::Directory && status.mode & 0o022 != 0 {
        warnings.push(Warning::DirWritableByOthers {
            path: dir.to_owned(),
            mode: status.mode,
        });
    }
    warnings
}
