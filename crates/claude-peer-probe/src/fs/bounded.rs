//! One bounded read of a file, for every file this workspace reads that someone else
//! may have planted: registry records here, settings files in `claude-peer-settings`.
//!
//! A link is followed only when asked, nothing blocks (a FIFO or device is never
//! read), only a regular file is read, and memory never follows a file's size: a file
//! whose `fstat` size is over the limit is refused unread, one that grows meanwhile is
//! cut one byte past the limit, which is enough to see that it is too large.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, CWD, Mode, OFlags};
use rustix::io::Errno;

use super::{kind_of, kind_of_mode};
use crate::FileKind;

/// Whether a [`BoundedRead`] follows a final symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Links {
    /// Follow it, as a plain `open` does: read what any reader of the path reads.
    Follow,
    /// Refuse it with [`ReadError::Symlink`]: what a link points to is never read.
    Refuse,
}

/// What a [`BoundedRead`] may open to learn what a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opens {
    /// Whatever is there, without blocking, typed by `fstat` (never read unless it is
    /// a regular file): one system call less per file, for reads of many files.
    Anything,
    /// Only what a `stat` just before (`lstat` with [`Links::Refuse`]) showed to be a
    /// regular file: opening a FIFO wakes a writer waiting for a reader, opening a
    /// device can have effects, and a socket cannot be opened at all.
    RegularFilesOnly,
}

/// How to read a file: its size limit, and what to do about links and non-files.
///
/// ```
/// use claude_peer_probe::{BoundedRead, Links, Opens, ReadError};
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("settings.json");
/// let read = BoundedRead { limit: 1024, links: Links::Refuse, opens: Opens::RegularFilesOnly };
///
/// std::fs::write(&path, b"{}")?;
/// assert_eq!(read.read(&path)?.bytes, b"{}");
///
/// std::fs::write(&path, vec![b' '; 4096])?;
/// assert!(matches!(read.read(&path), Err(ReadError::TooLarge { size: 4096, .. })));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BoundedRead {
    /// The most bytes a file may have; at most one byte more is ever read.
    pub limit: u64,
    /// Whether a final symbolic link is followed.
    pub links: Links,
    /// What may be opened.
    pub opens: Opens,
}

/// What `fstat` said of an opened file, or `stat` (`lstat`) of one refused unopened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStatus {
    /// What it is.
    pub kind: FileKind,
    /// Owner uid.
    pub owner: u32,
    /// Permission bits (`0o7777` mask).
    pub mode: u32,
    /// Last modification.
    pub modified: Option<SystemTime>,
    /// Its size in bytes.
    pub size: u64,
}

/// A regular file within the limit, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundedFile {
    /// What `fstat` said of it.
    pub status: FileStatus,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Why a [`BoundedRead`] gave no file.
#[derive(Debug)]
pub enum ReadError {
    /// The file is over the limit.
    TooLarge {
        /// What `fstat` said of it.
        status: FileStatus,
        /// At least this many bytes: `fstat`'s size, or `limit + 1` when it grew
        /// past the limit while read.
        size: u64,
        /// The limit.
        limit: u64,
        /// What was read: nothing when `fstat`'s size was already over the limit,
        /// else the first `limit + 1` bytes.
        read: Vec<u8>,
    },
    /// A final symbolic link, refused ([`Links::Refuse`]); its `lstat`.
    Symlink(FileStatus),
    /// Not a regular file (nor a refused link); nothing was read.
    NotRegular(FileStatus),
    /// Looking, opening or reading failed; `NotFound` when nothing is there.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooLarge { size, limit, .. } => {
                write!(f, "it is {size} bytes, over the limit of {limit}")
            }
            Self::Symlink(_) => f.write_str("it is a symbolic link"),
            Self::NotRegular(status) => {
                write!(f, "it is a {}, not a regular file", status.kind.as_str())
            }
            Self::Io(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io(err) => Some(err),
            _ => None,
        }
    }
}

impl From<io::Error> for ReadError {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

impl BoundedRead {
    /// Reads the file at `path`.
    pub fn read(&self, path: &Path) -> Result<BoundedFile, ReadError> {
        self.read_in(CWD, path)
    }

    /// Reads the file at `path` relative to the directory `dir`, as `openat` does.
    pub fn read_in(
        &self,
        dir: impl AsFd,
        path: &(impl AsRef<Path> + ?Sized),
    ) -> Result<BoundedFile, ReadError> {
        let path = path.as_ref();
        if self.opens == Opens::RegularFilesOnly {
            let flags = match self.links {
                Links::Follow => AtFlags::empty(),
                Links::Refuse => AtFlags::SYMLINK_NOFOLLOW,
            };
            let stat = rustix::fs::statat(&dir, path, flags).map_err(io::Error::from)?;
            regular(status_of(&stat))?;
        }
        // NONBLOCK: opening a FIFO or device returns at once. NOCTTY: a terminal never
        // becomes ours.
        let mut flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY;
        if self.links == Links::Refuse {
            flags |= OFlags::NOFOLLOW;
        }
        let fd = match rustix::fs::openat(&dir, path, flags, Mode::empty()) {
            Ok(fd) => fd,
            // ELOOP on Linux (EMLINK on FreeBSD) when the last component is a link;
            // ELOOP can also mean a loop further up, so `lstat` decides.
            Err(errno @ (Errno::LOOP | Errno::MLINK)) if self.links == Links::Refuse => {
                return Err(refused_link(&dir, path, errno));
            }
            Err(errno) => return Err(ReadError::Io(errno.into())),
        };
        let file = File::from(fd);
        // Whatever was swapped in since a `stat`, what was opened is judged.
        let meta = file.metadata()?;
        let status = FileStatus {
            kind: kind_of(meta.file_type()),
            owner: meta.uid(),
            mode: meta.mode() & 0o7777,
            modified: meta.modified().ok(),
            size: meta.len(),
        };
        regular(status)?;
        let limit = self.limit;
        // A file already over the limit is refused unread: no buffer, no read.
        if status.size > limit {
            return Err(ReadError::TooLarge {
                status,
                size: status.size,
                limit,
                read: Vec::new(),
            });
        }
        let cap = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
        let bytes = read_bounded(&file, status.size, cap)?;
        if bytes.len() as u64 > limit {
            return Err(ReadError::TooLarge {
                status,
                size: bytes.len() as u64,
                limit,
                read: bytes,
            });
        }
        Ok(BoundedFile { status, bytes })
    }
}

/// `Ok` for a regular file; else the error that refuses it.
fn regular(status: FileStatus) -> Result<(), ReadError> {
    match status.kind {
        FileKind::Regular => Ok(()),
        FileKind::Symlink => Err(ReadError::Symlink(status)),
        _ => Err(ReadError::NotRegular(status)),
    }
}

/// The refusal of a path `open` would not follow; the original error if `lstat`
/// shows no link there after all.
fn refused_link(dir: impl AsFd, path: &Path, errno: Errno) -> ReadError {
    match rustix::fs::statat(dir, path, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) if kind_of_mode(stat.st_mode) == FileKind::Symlink => {
            ReadError::Symlink(status_of(&stat))
        }
        _ => ReadError::Io(errno.into()),
    }
}

/// The status a `stat` or `lstat` gave.
fn status_of(stat: &rustix::fs::Stat) -> FileStatus {
    FileStatus {
        kind: kind_of_mode(stat.st_mode),
        owner: stat.st_uid,
        mode: stat.st_mode & 0o7777,
        modified: SystemTime::UNIX_EPOCH.checked_add(Duration::new(
            u64::try_from(stat.st_mtime).unwrap_or(0),
            u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
        )),
        size: u64::try_from(stat.st_size).unwrap_or(0),
    }
}

/// Reads at most `cap` bytes of a regular file whose `fstat` said `size`.
///
/// One allocation sized from `size` (one spare byte, to see growth), never more
/// than the cap. A short read once `size` bytes are in is EOF for a regular file,
/// which saves the usual zero-byte read.
fn read_bounded(file: &File, size: u64, cap: usize) -> io::Result<Vec<u8>> {
    let size = usize::try_from(size).unwrap_or(usize::MAX);
    let mut bytes = vec![0; size.saturating_add(1).min(cap)];
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
        if len == bytes.len() && len < cap {
            // The file grew past its size: make room, never past the cap.
            let more = len.max(4096).min(cap - len);
            bytes.resize(len + more, 0);
        }
    }
    bytes.truncate(len);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use claude_peer_registry::MAX_RECORD_BYTES;

    use super::read_bounded;

    /// A record read's cap: one byte past the registry's limit.
    const READ_CAP: usize = MAX_RECORD_BYTES + 1;

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
        assert_eq!(read_bounded(&file, 3, READ_CAP).unwrap(), data);
    }

    #[test]
    fn a_file_that_grew_past_the_cap_is_cut_exactly_at_the_cap() {
        let (_dir, file, data) = file_of(READ_CAP + 5000);
        let bytes = read_bounded(&file, 0, READ_CAP).unwrap();
        assert_eq!(bytes, data[..READ_CAP]);
    }

    #[test]
    fn a_file_that_shrank_since_its_fstat_gives_what_is_there() {
        let (_dir, file, data) = file_of(100);
        assert_eq!(read_bounded(&file, 5000, READ_CAP).unwrap(), data);
    }
}
