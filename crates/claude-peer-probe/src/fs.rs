//! The real registry directory: `lstat`, `readdir`, and one bounded, non-following,
//! non-blocking read per record.

use std::ffi::OsStr;
use std::fs::{FileType, Metadata};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;
use std::time::{Duration, SystemTime};

use claude_peer_registry::MAX_RECORD_BYTES;
use rustix::fs::{AtFlags, CWD, Mode, OFlags, RawDir};
use rustix::io::Errno;

use crate::{DirStatus, FileKind, RecordFile, RegistryFs, SocketStatus};

/// At most this many bytes of a record are ever read: one past the limit, so that
/// "too large" is seen without reading the rest.
const READ_CAP: usize = MAX_RECORD_BYTES + 1;
/// The `getdents64` buffer a listing reads into: a few hundred entries a call.
const LIST_BUF: usize = 32 * 1024;

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

    type Dir = OwnedFd;

    fn open_dir(&self, dir: &Path) -> io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        Ok(rustix::fs::open(dir, flags, Mode::empty())?)
    }

    fn list(&self, dir: &OwnedFd, each: &mut dyn FnMut(&OsStr, FileKind)) -> io::Result<()> {
        let mut buf = Vec::with_capacity(LIST_BUF);
        let mut raw = RawDir::new(dir, buf.spare_capacity_mut());
        while let Some(entry) = raw.next() {
            let entry = entry?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            // The entry's d_type, or `lstat` where the file system gives none: links
            // are never followed.
            let kind = match entry.file_type() {
                rustix::fs::FileType::Unknown => {
                    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => kind_of_mode(stat.st_mode),
                        // Removed since `getdents` saw it: it is no longer an entry.
                        Err(Errno::NOENT) => continue,
                        Err(_) => FileKind::Unknown,
                    }
                }
                file_type => kind_of_type(file_type),
            };
            each(name, kind);
        }
        Ok(())
    }

    fn read_record(&self, path: &Path) -> io::Result<RecordFile> {
        read_record_at(CWD, path)
    }

    fn read_record_in(&self, dir: &OwnedFd, name: &OsStr) -> io::Result<RecordFile> {
        read_record_at(dir, name)
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

/// Opens `path` (relative to `dir`) without following links or blocking, and reads it
/// if it is a regular file within the limit.
fn read_record_at(dir: impl AsFd, path: &(impl AsRef<Path> + ?Sized)) -> io::Result<RecordFile> {
    let path = path.as_ref();
    // NOFOLLOW: a link is reported, not read. NONBLOCK: opening a FIFO or device
    // returns at once. NOCTTY: a terminal never becomes ours.
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = match rustix::fs::openat(&dir, path, flags, Mode::empty()) {
        Ok(fd) => fd,
        // ELOOP on Linux (EMLINK on FreeBSD) when the last component is a link;
        // ELOOP can also mean a loop further up, so `lstat` decides.
        Err(errno @ (Errno::LOOP | Errno::MLINK)) => return symlink_record(dir, path, errno),
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
fn symlink_record(dir: impl AsFd, path: &Path, errno: Errno) -> io::Result<RecordFile> {
    match rustix::fs::statat(dir, path, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if kind_of_mode(stat.st_mode) == FileKind::Symlink => Ok(RecordFile {
            kind: FileKind::Symlink,
            owner: stat.st_uid,
            modified: SystemTime::UNIX_EPOCH.checked_add(Duration::new(
                u64::try_from(stat.st_mtime).unwrap_or(0),
                u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
            )),
            size: u64::try_from(stat.st_size).unwrap_or(0),
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

/// The kind of an `lstat` mode.
fn kind_of_mode(mode: u32) -> FileKind {
    kind_of_type(rustix::fs::FileType::from_raw_mode(mode))
}

/// The kind of a directory entry's or a mode's file type.
fn kind_of_type(file_type: rustix::fs::FileType) -> FileKind {
    use rustix::fs::FileType as T;
    match file_type {
        T::RegularFile => FileKind::Regular,
        T::Directory => FileKind::Directory,
        T::Symlink => FileKind::Symlink,
        T::Fifo => FileKind::Fifo,
        T::Socket => FileKind::Socket,
        T::CharacterDevice => FileKind::CharDevice,
        T::BlockDevice => FileKind::BlockDevice,
        T::Unknown => FileKind::Unknown,
    }
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
