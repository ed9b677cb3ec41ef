//! The real registry directory: `lstat`, `readdir`, and one bounded, non-following,
//! non-blocking read per record.

use std::fs::{FileType, Metadata};
use std::io;
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
            size: meta.len(),
            bytes: Vec::new(),
        };
        // A file already over the limit is rejected unread: no buffer, no read.
        if kind == FileKind::Regular && meta.len() <= MAX_RECORD_BYTES as u64 {
            record.bytes = read_bounded(&file, meta.len())?;
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
            size: meta.len(),
            bytes: Vec::new(),
        }),
        _ => Err(errno.into()),
    }
}

/// Reads at most `READ_CAP` bytes of a regular file whose `fstat` said `size`.
///
/// One allocation sized from `size` (one spare byte, to see growth), never more
/// than the cap. A short read once `size` bytes are in is EOF for a regular file,
/// which saves the usual zero-byte read.
fn read_bounded(file: &std::fs::File, size: u64) -> io::Result<Vec<u8>> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let mut bytes = vec![0; size.saturating_add(1).min(READ_CAP)];
    let mut len = 0;
    while let Some(spare) = bytes.get_mut(len..).filter(|s| !s.is_empty()) {
        let wanted = spare.len();
        match rustix::io::read(file, spare) {
            Ok(0) => break,
            Ok(n) => {
                len += n;
                if n < wanted && len >= size {
                    break;
                }
            }
            Err(Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
        if len == bytes.len() && len < READ_CAP {
            // The file grew past its size: make room, never past the cap.
            let more = len.max(4096).min(READ_CAP - len);
            bytes.resize(len + more, 0);
        }
    }
    bytes.truncate(len);
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

#[cfg(test)]
mod tests {
    use super::{READ_CAP, read_bounded};

    fn file_of(len: usize) -> (tempfile::TempDir, std::fs::File, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.json");
        let data: Vec<u8> = (0..len).map(|i| (i % 253) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        (dir, std::fs::File::open(&path).unwrap(), data)
    }

    #[test]
    fn a_file_that_grew_since_its_fstat_is_read_whole() {
        let (_dir, file, data) = file_of(10_000);
        assert_eq!(read_bounded(&file, 3).unwrap(), data);
    }

    #[test]
    fn a_file_that_grew_past_the_cap_is_cut_exactly_at_the_cap() {
        let (_dir, file, data) = file_of(READ_CAP + 5000);
        let bytes = read_bounded(&file, 0).unwrap();
        assert_eq!(bytes, data[..READ_CAP]);
    }

    #[test]
    fn a_file_that_shrank_since_its_fstat_gives_what_is_there() {
        let (_dir, file, data) = file_of(100);
        assert_eq!(read_bounded(&file, 5000).unwrap(), data);
    }
}
