//! The real registry directory: `lstat`, `readdir`, and one bounded, non-following,
//! non-blocking read per record (the [`BoundedRead`] of `bounded`, which the settings
//! store reads its files with too).

use std::ffi::OsStr;
use std::fs::{FileType, Metadata};
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _};
use std::path::Path;

use claude_peer_registry::MAX_RECORD_BYTES;
use rustix::fs::{AtFlags, CWD, Mode, OFlags, RawDir};
use rustix::io::Errno;

use crate::{DirStatus, FileKind, RecordFile, RegistryFs, SocketDir, SocketStatus};

mod bounded;

pub use bounded::{BoundedFile, BoundedRead, FileStatus, Links, Opens, ReadError};

/// How a record is read: never through a link, and whatever is there opened without
/// looking first (a scan opens thousands; a FIFO or device is typed, never read).
const RECORD_READ: BoundedRead = BoundedRead {
    limit: MAX_RECORD_BYTES as u64,
    links: Links::Refuse,
    opens: Opens::Anything,
};
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
            Some(meta) => {
                let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
                let dir = parent
                    .and_then(|parent| lstat(parent).ok().flatten())
                    .filter(Metadata::is_dir)
                    .map(|dir| SocketDir {
                        owner: dir.uid(),
                        shared: dir.mode() & 0o022 != 0,
                    });
                SocketStatus::Present {
                    kind: kind_of(meta.file_type()),
                    owner: meta.uid(),
                    dir,
                }
            }
        })
    }
}

/// Opens `path` (relative to `dir`) without following links or blocking, and reads it
/// if it is a regular file within the limit; what it is, if not.
fn read_record_at(dir: impl AsFd, path: &(impl AsRef<Path> + ?Sized)) -> io::Result<RecordFile> {
    let (status, bytes) = match RECORD_READ.read_in(dir, path) {
        Ok(file) => (file.status, file.bytes),
        // Unread, or cut one byte past the limit: the registry refuses either.
        Err(ReadError::TooLarge { status, read, .. }) => (status, read),
        Err(ReadError::Symlink(status) | ReadError::NotRegular(status)) => (status, Vec::new()),
        Err(ReadError::Io(err)) => return Err(err),
    };
    Ok(RecordFile {
        kind: status.kind,
        owner: status.owner,
        modified: status.modified,
        size: status.size,
        bytes,
    })
}

/// `lstat`, with "does not exist" as `None`.
fn lstat(path: &Path) -> io::Result<Option<Metadata>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(meta)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
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
