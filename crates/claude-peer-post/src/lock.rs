//! One post office per user: an exclusive lock in the runtime directory, which the
//! kernel releases when its holder ends, however it ends (a `kill -9` included).

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::path::Path;

use rustix::fs::{FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::Error;

/// The lock's file name in the runtime directory.
pub const LOCK_FILE: &str = "post.lock";

/// The held lock: while it lives, no other post office of this user runs.
#[derive(Debug)]
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Takes the lock in `dir` (a private directory) and writes this process's pid in
    /// it; [`Error::Running`] with the holder's pid when another post office holds it.
    /// A lock file left by one that was killed holds no lock: it is taken over.
    pub fn take(dir: &Path) -> Result<Self, Error> {
        Self::take_file(&dir.join(LOCK_FILE))
    }

    /// Takes the lock whose file is `path`, as [`Lock::take`] does.
    pub fn take_file(path: &Path) -> Result<Self, Error> {
        let path = path.to_owned();
        let io = |source: std::io::Error| Error::Io {
            path: path.clone(),
            source,
        };
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let mut file = rustix::fs::open(&path, flags, Mode::from_raw_mode(0o600))
            .map(File::from)
            .map_err(|errno| io(errno.into()))?;
        match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                file.set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| writeln!(file, "{}", std::process::id()))
                    .map_err(io)?;
                Ok(Self { _file: file })
            }
            Err(Errno::WOULDBLOCK) => {
                let mut text = String::new();
                let _ = (&file).take(32).read_to_string(&mut text);
                Err(Error::Running {
                    pid: text.trim().parse().ok(),
                    lock: path,
                })
            }
            Err(errno) => Err(io(errno.into())),
        }
    }
}
