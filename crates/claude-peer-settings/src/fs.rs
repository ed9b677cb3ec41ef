//! The file-system seam: the steps of an update that can fail, so tests can inject a failure
//! or a concurrent edit between any two of them.

use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::Path;

use rustix::fs::{AtFlags, CWD, FileType, FlockOperation, Mode, OFlags};
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
    /// is followed only when `follow` is true, else refused like anything but a regular file.
    /// Never opens anything but a regular file, never reads more than one byte past
    /// [`MAX_SETTINGS_BYTES`].
    fn load(&self, path: &Path, follow: bool) -> Result<Option<Loaded>, Error>;
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

/// `Ok` for a regular file, else the error that refuses what `mode` says is at `path`.
fn regular(path: &Path, mode: u32) -> Result<(), Error> {
    let path = path.to_owned();
    let kind = match FileType::from_raw_mode(mode) {
        FileType::RegularFile => return Ok(()),
        FileType::Symlink => return Err(Error::Symlink { path }),
        FileType::Directory => "a directory",
        FileType::Fifo => "a fifo",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Unknown => "an unknown kind of file",
    };
    Err(Error::NotRegularFile { path, kind })
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
    fn load(&self, path: &Path, follow: bool) -> Result<Option<Loaded>, Error> {
        let read_error = |source: io::Error| Error::Read {
            path: path.to_owned(),
            source,
        };
        // Only a regular file is opened at all (opening a device can have effects).
        let stat = if follow {
            rustix::fs::stat(path)
        } else {
            rustix::fs::lstat(path)
        };
        match stat {
            Ok(stat) => regular(path, stat.st_mode)?,
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(read_error(e.into())),
        }
        let mut flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let fd = match rustix::fs::openat(CWD, path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) if !follow => {
                return Err(Error::Symlink {
                    path: path.to_owned(),
                });
            }
            Err(e) => return Err(read_error(e.into())),
        };
        // Whatever was swapped in between stat and open, judge what was actually opened.
        let stat = rustix::fs::fstat(&fd).map_err(|e| read_error(e.into()))?;
        regular(path, stat.st_mode)?;
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        let mut bytes = Vec::new();
        if size <= MAX_SETTINGS_BYTES {
            bytes.reserve_exact(usize::try_from(size).unwrap_or(0));
            // At most one byte past the limit, for a file that grows while it is read.
            File::from(fd)
                .take(MAX_SETTINGS_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(read_error)?;
        }
        let size = size.max(bytes.len() as u64);
        if size > MAX_SETTINGS_BYTES {
            return Err(Error::TooLarge {
                path: path.to_owned(),
                size,
                limit: MAX_SETTINGS_BYTES,
            });
        }
        Ok(Some((bytes, stat.st_mode & 0o7777)))
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
