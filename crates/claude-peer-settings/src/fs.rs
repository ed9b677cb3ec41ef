//! The file-system seam: the few operations an update needs, so tests can inject a failure
//! or a concurrent edit between any two of them.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, IoSlice, Read as _, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, FileExt as _};
use std::path::Path;
use std::time::SystemTime;

use rustix::fs::{CWD, FileType, FlockOperation, Mode, OFlags};

/// The largest settings file read, in bytes. Claude Code's own settings are kilobytes; the
/// limit bounds what a file (a repository's `.claude/settings.json` among them) can make us
/// read into memory. A bigger file is refused unread.
pub const MAX_SETTINGS_BYTES: u64 = 16 * 1024 * 1024;

/// What is at a path, looked at without following a final symbolic link (except where
/// [`SettingsFs::load`] is asked to follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Nothing is there.
    Missing,
    /// A regular file, with its bytes and permission bits.
    Regular {
        /// The exact bytes.
        bytes: Vec<u8>,
        /// Permission bits (`st_mode & 0o7777`).
        mode: u32,
    },
    /// A regular file over [`MAX_SETTINGS_BYTES`] (its size when seen), not read.
    TooLarge {
        /// Its size in bytes, or how much of it was read when it grew past the limit.
        size: u64,
    },
    /// A symbolic link (only when not following).
    Symlink,
    /// Something else: `a directory`, `a fifo`, `a socket`, `a device`.
    Other(&'static str),
}

/// What [`SettingsFs::stat`] reports about a directory entry (not following links).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Whether it is a regular file.
    pub regular: bool,
    /// Its modification time.
    pub modified: SystemTime,
}

/// The operations a [`crate::SettingsStore`] performs, in the order an update uses them:
/// `lock` (`create_dir_all` first when that fails as the directory is missing), `load`, `read_note`, `list_dir`/`stat`/`remove` (stale temporary
/// files), `create_temp`, `write_temp`, `holds`, `rename`, `sync_dir`, `write_note` (`remove`
/// again for a temporary file that is not renamed).
pub trait SettingsFs {
    /// An open temporary file.
    type Temp;
    /// A held advisory lock, released on drop.
    type Lock;

    /// Reads what is at `path`; a final symbolic link is followed only when `follow` is true.
    /// Never blocks on a fifo.
    fn load(&self, path: &Path, follow: bool) -> io::Result<Entry>;
    /// Creates `dir` and its missing ancestors with `mode`.
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()>;
    /// Takes an exclusive advisory lock on `path`, creating it (mode 0600, no link followed);
    /// blocks until the lock is free.
    fn lock(&self, path: &Path) -> io::Result<Self::Lock>;
    /// What the lock file holds (at most 128 bytes of it): the note the last update left.
    fn read_note(&self, lock: &Self::Lock) -> io::Result<Vec<u8>>;
    /// Replaces what the lock file holds with `note`.
    fn write_note(&self, lock: &Self::Lock, note: &[u8]) -> io::Result<()>;
    /// The names in `dir`.
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>>;
    /// Looks at `path` without following a link; `None` when missing.
    fn stat(&self, path: &Path) -> io::Result<Option<Stat>>;
    /// Creates `path` exclusively, without following links, with exactly `mode`.
    fn create_temp(&self, path: &Path, mode: u32) -> io::Result<Self::Temp>;
    /// Writes all of `parts`, one after the other, to the temporary file and fsyncs it.
    fn write_temp(&self, temp: &mut Self::Temp, parts: &[&[u8]]) -> io::Result<()>;
    /// Whether `path`, not following a link, still holds exactly `expected`: a regular file
    /// with these bytes, or nothing at all when `expected` is `None`.
    fn holds(&self, path: &Path, expected: Option<&[u8]>) -> io::Result<bool>;
    /// Renames `from` over `to`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Fsyncs the directory `dir`.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Removes the file `path`.
    fn remove(&self, path: &Path) -> io::Result<()>;
}

impl<F: SettingsFs + ?Sized> SettingsFs for &F {
    type Temp = F::Temp;
    type Lock = F::Lock;
    fn load(&self, path: &Path, follow: bool) -> io::Result<Entry> {
        (**self).load(path, follow)
    }
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        (**self).create_dir_all(dir, mode)
    }
    fn lock(&self, path: &Path) -> io::Result<Self::Lock> {
        (**self).lock(path)
    }
    fn read_note(&self, lock: &Self::Lock) -> io::Result<Vec<u8>> {
        (**self).read_note(lock)
    }
    fn write_note(&self, lock: &Self::Lock, note: &[u8]) -> io::Result<()> {
        (**self).write_note(lock, note)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        (**self).list_dir(dir)
    }
    fn stat(&self, path: &Path) -> io::Result<Option<Stat>> {
        (**self).stat(path)
    }
    fn create_temp(&self, path: &Path, mode: u32) -> io::Result<Self::Temp> {
        (**self).create_temp(path, mode)
    }
    fn write_temp(&self, temp: &mut Self::Temp, parts: &[&[u8]]) -> io::Result<()> {
        (**self).write_temp(temp, parts)
    }
    fn holds(&self, path: &Path, expected: Option<&[u8]>) -> io::Result<bool> {
        (**self).holds(path, expected)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        (**self).rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        (**self).sync_dir(dir)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        (**self).remove(path)
    }
}

/// The real file system, through `rustix`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealFs;

fn kind_name(file_type: FileType) -> &'static str {
    match file_type {
        FileType::Directory => "a directory",
        FileType::Fifo => "a fifo",
        FileType::Socket => "a socket",
        FileType::CharacterDevice | FileType::BlockDevice => "a device",
        FileType::Symlink => "a symbolic link",
        _ => "an unknown kind of file",
    }
}

fn missing_as_none<T>(result: io::Result<T>) -> io::Result<Option<T>> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl SettingsFs for RealFs {
    type Temp = File;
    type Lock = File;

    fn load(&self, path: &Path, follow: bool) -> io::Result<Entry> {
        let stat = if follow {
            rustix::fs::stat(path)
        } else {
            rustix::fs::lstat(path)
        };
        let Some(stat) = missing_as_none(stat.map_err(io::Error::from))? else {
            return Ok(Entry::Missing);
        };
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            FileType::Symlink => return Ok(Entry::Symlink),
            other => return Ok(Entry::Other(kind_name(other))),
        }
        let mut flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
        if !follow {
            flags |= OFlags::NOFOLLOW;
        }
        let fd = match rustix::fs::openat(CWD, path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(Entry::Missing),
            Err(rustix::io::Errno::LOOP) if !follow => return Ok(Entry::Symlink),
            Err(e) => return Err(e.into()),
        };
        // Whatever was swapped in between stat and open, judge what was actually opened.
        let stat = rustix::fs::fstat(&fd)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::RegularFile => {}
            other => return Ok(Entry::Other(kind_name(other))),
        }
        let size = u64::try_from(stat.st_size).unwrap_or(0);
        if size > MAX_SETTINGS_BYTES {
            return Ok(Entry::TooLarge { size });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
        // At most one byte past the limit, for a file that grows while it is read.
        File::from(fd)
            .take(MAX_SETTINGS_BYTES + 1)
            .read_to_end(&mut bytes)?;
        if bytes.len() as u64 > MAX_SETTINGS_BYTES {
            return Ok(Entry::TooLarge {
                size: bytes.len() as u64,
            });
        }
        Ok(Entry::Regular {
            bytes,
            mode: stat.st_mode & 0o7777,
        })
    }

    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(dir)
    }

    fn lock(&self, path: &Path) -> io::Result<File> {
        let fd = rustix::fs::openat(
            CWD,
            path,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        rustix::fs::flock(&fd, FlockOperation::LockExclusive)?;
        Ok(File::from(fd))
    }

    fn read_note(&self, lock: &File) -> io::Result<Vec<u8>> {
        let mut note = vec![0u8; crate::store::NOTE_MAX];
        let mut len = 0;
        while let Some(rest) = note.get_mut(len..).filter(|r| !r.is_empty()) {
            match lock.read_at(rest, len as u64)? {
                0 => break,
                n => len += n,
            }
        }
        note.truncate(len);
        Ok(note)
    }

    fn write_note(&self, lock: &File, note: &[u8]) -> io::Result<()> {
        lock.write_all_at(note, 0)?;
        // Notes have one length: the truncation (a journalled change) is rarely needed.
        if lock.metadata()?.len() > note.len() as u64 {
            lock.set_len(note.len() as u64)?;
        }
        Ok(())
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(dir)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect()
    }

    fn stat(&self, path: &Path) -> io::Result<Option<Stat>> {
        let Some(meta) = missing_as_none(std::fs::symlink_metadata(path))? else {
            return Ok(None);
        };
        Ok(Some(Stat {
            regular: meta.file_type().is_file(),
            modified: meta.modified()?,
        }))
    }

    fn create_temp(&self, path: &Path, mode: u32) -> io::Result<File> {
        let fd = rustix::fs::openat(
            CWD,
            path,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        // The umask narrowed the creation mode; set exactly the one wanted.
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
        Ok(File::from(fd))
    }

    fn write_temp(&self, temp: &mut File, parts: &[&[u8]]) -> io::Result<()> {
        let mut slices: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            match temp.write_vectored(rest) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => IoSlice::advance_slices(&mut rest, n),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        temp.sync_all()
    }

    fn holds(&self, path: &Path, expected: Option<&[u8]>) -> io::Result<bool> {
        let flags =
            OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW;
        let fd = match rustix::fs::openat(CWD, path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Ok(expected.is_none()),
            Err(rustix::io::Errno::LOOP) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        let Some(mut expected) = expected else {
            return Ok(false);
        };
        let stat = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile
            || u64::try_from(expected.len()).ok() != u64::try_from(stat.st_size).ok()
        {
            return Ok(false);
        }
        // Compared through a buffer of at most 64 KiB (no second copy of a big file in memory,
        // few system calls).
        let mut file = File::from(fd);
        let mut buf = vec![0u8; expected.len().clamp(1, 64 * 1024)];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                return Ok(expected.is_empty());
            }
            let Some((head, rest)) = expected.split_at_checked(n) else {
                return Ok(false);
            };
            if buf.get(..n) != Some(head) {
                return Ok(false);
            }
            expected = rest;
        }
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
        rustix::fs::unlinkat(CWD, path, rustix::fs::AtFlags::empty())?;
        Ok(())
    }
}
