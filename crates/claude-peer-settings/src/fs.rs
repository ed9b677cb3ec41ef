//! The file-system seam: the steps of an update that can fail, so tests can inject a failure
//! or a concurrent edit between any two of them.

use std::fs::File;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;

use claude_peer_probe::{BoundedRead, FileKind, Links, Opens, ReadError};
use rustix::fs::{AtFlags, CWD, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::Error;

/// The largest settings file read, in bytes. Claude Code's own settings are kilobytes; the
/// limit bounds what a file (a repository's `.claude/settings.json` among them) can make us
/// read into memory. A bigger file is refused unread.
pub(crate) const MAX_SETTINGS_BYTES: u64 = 16 * 1024 * 1024;

/// Mode of a Claude home directory this crate creates.
const NEW_DIR_MODE: u32 = 0o700;

/// A regular file's exact bytes and permission bits (`st_mode & 0o7777`).
pub(crate) type Loaded = (Vec<u8>, u32);

/// The steps of a read and of an update, in the order an update takes them.
pub(crate) trait Fs {
    /// Reads the regular file at `path` (`None` when nothing is there); a final symbolic link
    /// is followed as `links` says, else refused like anything but a regular file.
    /// Never opens anything but a regular file, never reads more than one byte past
    /// [`MAX_SETTINGS_BYTES`].
    fn load(&self, path: &Path, links: Links) -> Result<Option<Loaded>, Error>;
    /// Takes an exclusive advisory lock on `path`, creating it (mode 0600, no link followed)
    /// and its directory (mode 0700) when missing; blocks until the lock is free. The lock is
    /// held until the returned file is dropped.
    fn lock(&self, path: &Path) -> io::Result<File>;
    /// Creates the file `path` without following links, with exactly `mode`, and writes and
    /// fsyncs `bytes`. Whatever is at `path` is removed first (the caller holds the lock, so
    /// only a killed writer's left-over, or a link planted there, can be).
    fn write_temp(&self, path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()>;
    /// Renames `from` over `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Fsyncs the directory `dir`.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Removes the file `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
}

/// The real file system, through `rustix`.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct RealFs;

/// The error that refuses what is at `path`, of kind `kind`, instead of a regular file.
fn refused(path: &Path, kind: FileKind) -> Error {
    let path = path.to_owned();
    let kind = match kind {
        FileKind::Symlink => return Error::Symlink { path },
        FileKind::Directory => "a directory",
        FileKind::Fifo => "a fifo",
        FileKind::Socket => "a socket",
        FileKind::CharDevice | FileKind::BlockDevice => "a device",
        // A regular file is never refused; the OS did not say what this is.
        FileKind::Regular | FileKind::Unknown => "an unknown kind of file",
    };
    Error::NotRegularFile { path, kind }
}

/// Opens `path` with `flags` (creating it with mode 0600, before the umask, where they say
/// so); when that fails with `retry_on`, runs `fix` and tries once more.
fn open_retrying(
    path: &Path,
    flags: OFlags,
    retry_on: Errno,
    fix: impl FnOnce() -> io::Result<()>,
) -> io::Result<OwnedFd> {
    let open = || {
        rustix::fs::openat(
            CWD,
            path,
            flags | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
    };
    match open() {
        Err(e) if e == retry_on => {
            fix()?;
            Ok(open()?)
        }
        opened => Ok(opened?),
    }
}

impl Fs for RealFs {
    fn load(&self, path: &Path, links: Links) -> Result<Option<Loaded>, Error> {
        // Only a regular file is opened at all (opening a device can have effects).
        let read = BoundedRead {
            limit: MAX_SETTINGS_BYTES,
            links,
            opens: Opens::RegularFilesOnly,
        };
        match read.read(path) {
            Ok(file) => Ok(Some((file.bytes, file.status.mode))),
            Err(ReadError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(ReadError::Io(source)) => Err(Error::Read {
                path: path.to_owned(),
                source,
            }),
            Err(ReadError::Symlink(status) | ReadError::NotRegular(status)) => {
                Err(refused(path, status.kind))
            }
            Err(ReadError::TooLarge { size, limit, .. }) => Err(Error::TooLarge {
                path: path.to_owned(),
                size,
                limit,
            }),
        }
    }

    fn lock(&self, path: &Path) -> io::Result<File> {
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW;
        let fd = open_retrying(path, flags, Errno::NOENT, || {
            let dir = path.parent().unwrap_or(Path::new("."));
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(NEW_DIR_MODE)
                .create(dir)
        })?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
        Ok(File::from(fd))
    }

    fn write_temp(&self, path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
        // Exclusive creation never follows a link, nor opens a file a link points to.
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL;
        let fd = open_retrying(path, flags, Errno::EXIST, || self.remove(path))?;
        // The umask narrowed the creation mode; set exactly the one wanted.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        let mut file = File::from(fd);
        file.write_all(bytes)?;
        file.sync_all()
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        rustix::fs::renameat(CWD, from, CWD, to)?;
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let fd = rustix::fs::openat(
            CWD,
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        rustix::fs::fsync(&fd)?;
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        rustix::fs::unlinkat(CWD, path, AtFlags::empty())?;
        Ok(())
    }
}
