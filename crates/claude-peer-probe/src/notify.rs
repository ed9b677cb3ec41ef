//! The real notifier: inotify on the registry and its home, a pidfd per watched
//! process, all behind one epoll descriptor.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::time::Duration;

use claude_peer_registry::Pid;
use rustix::event::{Timespec, epoll};
use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
use rustix::io::Errno;
use rustix::process::PidfdFlags;

use crate::{Notice, Notifier};

/// The epoll key of the inotify descriptor; pidfds are keyed by their pid, which is
/// never this large.
const INOTIFY_KEY: u64 = u64::MAX;
/// inotify events are read in chunks of this many bytes (a few hundred events).
const INOTIFY_BUF: usize = 16 * 1024;
/// epoll events taken per wait; more wait for the next call.
const EPOLL_BATCH: usize = 64;

/// What the registry directory is watched for: every way a record is written,
/// replaced or removed, and the directory itself going away.
const REGISTRY_EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::MODIFY)
    .union(WatchFlags::CLOSE_WRITE)
    .union(WatchFlags::ATTRIB)
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    // A symlink or anything but a directory is refused: it is polled instead.
    .union(WatchFlags::DONT_FOLLOW)
    .union(WatchFlags::ONLYDIR);
/// What the home is watched for: the registry directory appearing, moving or going.
const HOME_EVENTS: WatchFlags = WatchFlags::CREATE
    .union(WatchFlags::DELETE)
    .union(WatchFlags::MOVED_FROM)
    .union(WatchFlags::MOVED_TO)
    .union(WatchFlags::DELETE_SELF)
    .union(WatchFlags::MOVE_SELF)
    .union(WatchFlags::ONLYDIR);

/// Registry changes by inotify and process exits by pidfd, on Linux.
///
/// One epoll descriptor holds the inotify descriptor and every pidfd, so a caller's
/// own poll loop or async runtime waits on [`AsFd::as_fd`] alone: it becomes readable
/// when [`Notifier::wait`] has something to report. Nothing here reads, writes or
/// creates anything in the Claude home.
#[derive(Debug)]
pub struct OsNotifier {
    epoll: OwnedFd,
    /// `None` where inotify is unavailable (or not wanted): the registry is polled.
    inotify: Option<Inotify>,
    pidfds: HashMap<Pid, OwnedFd>,
}

#[derive(Debug)]
struct Inotify {
    fd: OwnedFd,
    home: Option<i32>,
    registry: Option<i32>,
    /// The registry directory's name in the home (`sessions`).
    registry_name: OsString,
}

impl OsNotifier {
    /// A notifier using inotify where the kernel offers it.
    pub fn new() -> io::Result<Self> {
        let mut notifier = Self::without_inotify()?;
        let flags = inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK;
        if let Ok(fd) = inotify::init(flags) {
            epoll::add(
                &notifier.epoll,
                &fd,
                epoll::EventData::new_u64(INOTIFY_KEY),
                epoll::EventFlags::IN,
            )?;
            notifier.inotify = Some(Inotify {
                fd,
                home: None,
                registry: None,
                registry_name: OsString::new(),
            });
        }
        Ok(notifier)
    }

    /// A notifier that never watches the registry, so that it is polled; process
    /// exits are still watched by pidfd.
    pub fn without_inotify() -> io::Result<Self> {
        Ok(Self {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            inotify: None,
            pidfds: HashMap::new(),
        })
    }

    /// Reads every pending inotify event into notices.
    fn drain_inotify(&mut self, notices: &mut Vec<Notice>) -> io::Result<()> {
        let Some(inotify) = &mut self.inotify else {
            return Ok(());
        };
        let mut buf = [MaybeUninit::<u8>::uninit(); INOTIFY_BUF];
        let mut reader = inotify::Reader::new(&inotify.fd, &mut buf);
        let mut lost_registry = false;
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(Errno::AGAIN | Errno::INTR) => break,
                Err(err) => return Err(err.into()),
            };
            let flags = event.events();
            let name = event.file_name().map(|n| OsStr::from_bytes(n.to_bytes()));
            if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                notices.push(Notice::Rescan);
            } else if Some(event.wd()) == inotify.registry {
                match name {
                    Some(name) => notices.extend(entry_notice(flags, name)),
                    None if flags.intersects(
                        ReadFlags::DELETE_SELF
                            | ReadFlags::MOVE_SELF
                            | ReadFlags::IGNORED
                            | ReadFlags::UNMOUNT,
                    ) =>
                    {
                        lost_registry = true;
                        notices.push(Notice::Rescan);
                    }
                    None => {}
                }
            } else if Some(event.wd()) == inotify.home {
                if name == Some(inotify.registry_name.as_os_str())
                    || flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
                {
                    notices.push(Notice::Rescan);
                }
                if flags.intersects(ReadFlags::IGNORED | ReadFlags::MOVE_SELF) {
                    inotify.home = None;
                }
            }
            // Anything else comes from a watch already given up.
        }
        if lost_registry && let Some(wd) = inotify.registry.take() {
            // A moved directory would go on reporting from its new place.
            let _ = inotify::remove_watch(&inotify.fd, wd);
        }
        Ok(())
    }
}

/// What an event naming a registry entry means for it.
fn entry_notice(flags: ReadFlags, name: &OsStr) -> Option<Notice> {
    let name = name.to_owned();
    if flags.intersects(ReadFlags::DELETE | ReadFlags::MOVED_FROM) {
        Some(Notice::Removed(name))
    } else if flags.intersects(ReadFlags::CLOSE_WRITE | ReadFlags::MOVED_TO | ReadFlags::ATTRIB) {
        Some(Notice::Written(name))
    } else if flags.intersects(ReadFlags::MODIFY | ReadFlags::CREATE) {
        Some(Notice::Writing(name))
    } else {
        None
    }
}

impl Notifier for OsNotifier {
    fn watch_registry(&mut self, home: &Path, registry: &Path) -> bool {
        let Some(inotify) = &mut self.inotify else {
            return false;
        };
        registry
            .file_name()
            .unwrap_or_default()
            .clone_into(&mut inotify.registry_name);
        match inotify::add_watch(&inotify.fd, home, HOME_EVENTS) {
            Ok(wd) => inotify.home = Some(wd),
            // No home to see the registry appear in: poll.
            Err(_) => return false,
        }
        match inotify::add_watch(&inotify.fd, registry, REGISTRY_EVENTS) {
            Ok(wd) => {
                if let Some(old) = inotify.registry.replace(wd)
                    && old != wd
                {
                    let _ = inotify::remove_watch(&inotify.fd, old);
                }
                true
            }
            // Not there yet: the home's watch reports it when it appears.
            Err(Errno::NOENT) => {
                inotify.registry = None;
                true
            }
            // A symlink, not a directory, or out of watches: poll.
            Err(_) => {
                inotify.registry = None;
                false
            }
        }
    }

    fn watch_exit(&mut self, pid: Pid) -> bool {
        if self.pidfds.contains_key(&pid) {
            return true;
        }
        let Some(target) = rustix::process::Pid::from_raw(pid.as_i32()) else {
            return false;
        };
        let Ok(pidfd) = rustix::process::pidfd_open(target, PidfdFlags::empty()) else {
            return false;
        };
        let key = epoll::EventData::new_u64(u64::from(pid.get()));
        if epoll::add(&self.epoll, &pidfd, key, epoll::EventFlags::IN).is_err() {
            return false;
        }
        self.pidfds.insert(pid, pidfd);
        true
    }

    fn unwatch_exit(&mut self, pid: Pid) {
        if let Some(pidfd) = self.pidfds.remove(&pid) {
            let _ = epoll::delete(&self.epoll, &pidfd);
        }
    }

    fn wait(&mut self, timeout: Duration, notices: &mut Vec<Notice>) -> io::Result<()> {
        let timeout = Timespec {
            tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(timeout.subsec_nanos()),
        };
        let mut ready = Vec::with_capacity(EPOLL_BATCH);
        match epoll::wait(
            &self.epoll,
            rustix::buffer::spare_capacity(&mut ready),
            Some(&timeout),
        ) {
            Ok(_) => {}
            Err(Errno::INTR) => return Ok(()),
            Err(err) => return Err(err.into()),
        }
        for event in ready {
            let key = event.data.u64();
            if key == INOTIFY_KEY {
                self.drain_inotify(notices)?;
            } else if let Some(pid) = u32::try_from(key).ok().and_then(Pid::new) {
                // Readable once, readable for ever: stop watching it.
                self.unwatch_exit(pid);
                notices.push(Notice::Exited(pid));
            }
        }
        Ok(())
    }
}

impl AsFd for OsNotifier {
    /// Readable when [`Notifier::wait`] has notices to give.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }
}
