//! The real registry directory: `lstat`, `readdir`, and one bounded, non-following,
//! non-blocking read per record.

use std::fs::{FileType, Metadata};
use std::io::{self, Read as _};
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use claude_peer_registry::MAX_RECORD_BYTES;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::{DirEntry, DirStatus, FileKind, RecordFile, RegistryFs, SocketStatus};

/// At most this many bytes of a record are ever read: one past the limit, so that
/// "too large" is seen without reading the rest.
const READ_CAP: usize = MAX_RECORD_BYTES + 1;

/// The registry directory on the real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsRegistryFs;

impl OsRegistryFs {
    /// The real file system.
    #[must_use]
    pub const fn new() -> Self {
        Self
    }
}

impl RegistryFs for OsRegistryFs {
    fn dir_status(&self, dir: &Path) -> io::Result<Option<DirStatus>> {
        Ok(lstat(dir)?.map(|meta| DirStatus {
            kind: kind_of(meta.file_type()),
            owner: meta.uid(),
            mode: meta.mode() & 0o7777,
        }))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            // `file_type` uses the entry's d_type, or `lstat` where the file system
            // gives none: links are never followed.
            let kind = match entry.file_type() {
                Ok(file_type) => kind_of(file_type),
                // Removed since `readdir` saw it: it is no longer an entry.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(_) => FileKind::Unknown,
            };
            entries.push(DirEntry {
                name: entry.file_name(),
                kind,
            });
        }
        Ok(entries)
    }

    fn read_record(&self, path: &Path) -> io::Result<RecordFile> {
        // NOFOLLOW: a link is reported, not read. NONBLOCK: opening a FIFO or device
        // returns at once. NOCTTY: a terminal never becomes ours.
        let flags =
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        let fd = match rustix::fs::open(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            // ELOOP on Linux (EMLINK on FreeBSD) when the last component is a link;
            // ELOOP can also mean a loop further up, so `lstat` decides.
            Err(errno @ (Errno::LOOP | Errno::MLINK)) => return symlink_record(path, errno),
            Err(errno) => return Err(errno.into()),
        };
        let file = std::fs::File::from(fd);
        let meta = file.metadata()?;
        let kind = kind_of(meta.file_type());
        let mut record = RecordFile {
            kind,
            owner: meta.uid(),
            modified: meta.modified().ok(),
            bytes: Vec::new(),
        };
        if kind == FileKind::Regular {
            // One spare byte beyond the size, so EOF is seen without growing.
            let hint = usize::try_from(meta.len())
                .unwrap_or(usize::MAX)
                .saturating_add(1);
            record.bytes = read_bounded(&file, hint.min(READ_CAP))?;
        }
        Ok(record)
    }

    fn socket_status(&self, path: &Path) -> io::Result<SocketStatus> {
        Ok(match lstat(path)? {
            None => SocketStatus::Missing,
            Some(meta) => SocketStatus::Present {
                kind: kind_of(meta.file_type()),
                owner: meta.uid(),
            },
        })
    }
}

/// `lstat`, with "does not exist" as `None`.
fn lstat(path: &Path) -> io::Result<Option<Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The record for a path `open` refused to follow; the original error if `lstat`
/// shows no link there after all.
fn symlink_record(path: &Path, errno: Errno) -> io::Result<RecordFile> {
    match lstat(path)? {
        Some(meta) if meta.file_type().is_symlink() => Ok(RecordFile {
            kind: FileKind::Symlink,
            owner: meta.uid(),
            modified: meta.modified().ok(),
            bytes: Vec::new(),
        }),
        _ => Err(errno.into()),
    }
}

/// Reads until EOF or `READ_CAP` bytes, into one allocation of `capacity`
/// unless the file grew since `fstat`.
fn read_bounded(file: &std::fs::File, capacity: usize) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(capacity);
    // `take` bounds the reads themselves, not just what is kept.
    let cap = u64::try_from(READ_CAP).unwrap_or(u64::MAX);
    file.take(cap).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The kind of a file type seen without following links.
fn kind_of(file_type: FileType) -> FileKind {
    if file_type.is_file() {
        FileKind::Regular
    } else if file_type.is_dir() {
        FileKind::Directory
    } else if file_type.is_symlink() {
        FileKind::Symlink
    } else if file_type.is_fifo() {
        FileKind::Fifo
    } else if file_type.is_socket() {
        FileKind::Socket
    } else if file_type.is_char_device() {
        FileKind::CharDevice
    } else if file_type.is_block_device() {
        FileKind::BlockDevice
    } else {
        FileKind::Unknown
    }
}
