//! A table's own state on Linux: the live processes it pins with pidfds, and the
//! `facts` path that answers from a pin or reads `/proc` and pins.
//!
//! A pidfd names one process, never a later holder of its pid, and becomes readable
//! when that process exits; while it is not, the facts read when it was pinned still
//! hold, so a zero-timeout `poll` replaces a read of `/proc/<pid>/stat`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use claude_peer_registry::{Pid, ProcessFacts, ProcessState, Signal};
use rustix::event::{self, PollFd, PollFlags, Timespec};
use rustix::fd::OwnedFd;
use rustix::io::Errno;
use rustix::process::PidfdFlags;

use super::procfs::{proc_dir, stat_facts};

/// Before a pin is added, exited pins are swept out once the table holds this
/// many, or twice as many as the last sweep left, whichever is more: dead
/// processes' pidfds never outnumber the live ones by much.
const SWEEP_FLOOR: usize = 32;

/// A `poll` that only looks.
const NO_WAIT: Timespec = Timespec {
    tv_sec: 0,
    tv_nsec: 0,
};

/// A table's own state: whether pidfds work, and the processes it pins.
#[derive(Debug)]
pub(super) struct Cache {
    /// Cleared when `pidfd_open` turns out to be unavailable (before Linux 5.3,
    /// or filtered by seccomp); nothing is pinned then.
    pidfd_usable: AtomicBool,
    /// The most processes pinned at once; fixed when the table is made, so a table
    /// that never pins (`0`) never takes the lock its judging threads would share.
    limit: usize,
    pins: Mutex<Pins>,
}

/// Live processes held by a pidfd, with the facts read when they were pinned.
#[derive(Debug)]
struct Pins {
    by_pid: HashMap<Pid, Pinned>,
    /// Sweep before adding once `by_pid` holds this many.
    sweep_at: usize,
    /// Pins refused for want of room since the last sweep.
    refused: usize,
}

#[derive(Debug)]
struct Pinned {
    pidfd: OwnedFd,
    facts: ProcessFacts,
}

impl Cache {
    pub(super) fn new(limit: usize) -> Self {
        Self {
            pidfd_usable: AtomicBool::new(true),
            limit,
            pins: Mutex::new(Pins {
                by_pid: HashMap::new(),
                sweep_at: SWEEP_FLOOR,
                refused: 0,
            }),
        }
    }

    /// The map is consistent after every operation on it, so a panic elsewhere
    /// while it was locked leaves nothing to repair.
    fn pins(&self) -> MutexGuard<'_, Pins> {
        self.pins.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn pinned(&self) -> usize {
        self.pins().by_pid.len()
    }

    /// The facts of a pid that answered `signal`: from its pin while its process runs,
    /// else read from `/proc/<pid>/stat` (pinning a running leader on the way).
    pub(super) fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts {
        if signal == Signal::Alive
            && let Some(pinned) = self.pinned_facts(pid)
        {
            return pinned;
        }
        let Some(proc_dir) = proc_dir() else {
            // No /proc: nothing more is known.
            return ProcessFacts::with_signal(signal);
        };
        // A pin's pidfd is opened BEFORE the stat read, so what that read describes
        // is the pinned process or one that got its pid later. A later one means the
        // pinned process has exited, so its pidfd is readable and the first check
        // of the pin drops it: a pin never serves facts of another process.
        let pidfd = self.pidfd_to_pin(pid);
        let facts = stat_facts(proc_dir, pid, signal);
        // Only a running leader is pinned: a zombie's pidfd is already readable, and
        // an alive signal is what the pin stands for.
        if let Some(pidfd) = pidfd
            && signal == Signal::Alive
            && facts.state == Some(ProcessState::Running)
        {
            self.pin(pid, pidfd, &facts);
        }
        facts
    }

    /// The pinned facts of `pid`, if it is pinned and its process has not exited.
    fn pinned_facts(&self, pid: Pid) -> Option<ProcessFacts> {
        if self.limit == 0 {
            return None;
        }
        let mut pins = self.pins();
        let pinned = pins.by_pid.get(&pid)?;
        if exited(&pinned.pidfd) {
            // Exited (maybe a zombie, maybe reaped and the pid reused): the
            // pinned facts say nothing about what the pid names now.
            pins.by_pid.remove(&pid);
            return None;
        }
        Some(pinned.facts.clone())
    }

    fn pin(&self, pid: Pid, pidfd: OwnedFd, facts: &ProcessFacts) {
        let mut pins = self.pins();
        if pins.admits(pid, self.limit) {
            let facts = facts.clone();
            pins.by_pid.insert(pid, Pinned { pidfd, facts });
        }
    }

    /// A pidfd of `pid`'s process, to pin it, when this table pins and `pid` is a
    /// thread-group leader (`pidfd_open` refuses thread ids).
    fn pidfd_to_pin(&self, pid: Pid) -> Option<OwnedFd> {
        if self.limit == 0 || !self.pidfd_usable.load(Ordering::Relaxed) {
            return None;
        }
        let target = rustix::process::Pid::from_raw(pid.as_i32())?;
        match rustix::process::pidfd_open(target, PidfdFlags::empty()) {
            Ok(pidfd) => Some(pidfd),
            Err(Errno::NOSYS | Errno::PERM | Errno::ACCESS) => {
                self.pidfd_usable.store(false, Ordering::Relaxed);
                None
            }
            // A thread id, gone since, or out of descriptors: nothing to pin.
            Err(_) => None,
        }
    }
}

impl Pins {
    /// Whether `pid` may be pinned now, at most `limit` being pinned, sweeping out
    /// exited pins first when due.
    fn admits(&mut self, pid: Pid, limit: usize) -> bool {
        if limit == 0 {
            return false;
        }
        if self.by_pid.contains_key(&pid) {
            // A replacement (two threads missed at once): no more descriptors.
            return true;
        }
        let len = self.by_pid.len();
        // When full of live processes, a sweep is tried once per quarter of the
        // limit refused, so a table full of live pins never polls them all on
        // every miss.
        let full = len >= limit && self.refused >= limit / 4;
        if len >= self.sweep_at || full {
            self.sweep();
        }
        if self.by_pid.len() < limit {
            true
        } else {
            self.refused += 1;
            false
        }
    }

    /// Drops every pin whose process has exited, with one `poll` over all.
    fn sweep(&mut self) {
        let (pids, mut fds): (Vec<Pid>, Vec<PollFd<'_>>) = self
            .by_pid
            .iter()
            .map(|(pid, pinned)| (*pid, PollFd::new(&pinned.pidfd, PollFlags::IN)))
            .unzip();
        let exited: Vec<Pid> = match event::poll(&mut fds, Some(&NO_WAIT)) {
            Ok(0) => Vec::new(),
            Ok(_) => pids
                .iter()
                .zip(&fds)
                .filter(|(_, fd)| !fd.revents().is_empty())
                .map(|(pid, _)| *pid)
                .collect(),
            // Cannot tell which are still live: trust none of them.
            Err(_) => pids,
        };
        drop(fds);
        for pid in exited {
            self.by_pid.remove(&pid);
        }
        self.refused = 0;
        self.sweep_at = self.by_pid.len().saturating_mul(2).max(SWEEP_FLOOR);
    }
}

/// Whether the process behind `pidfd` has exited (readable: zombie or reaped).
/// An error is taken as exited: the pin is then dropped, never trusted.
fn exited(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    event::poll(&mut fds, Some(&NO_WAIT)).map_or(true, |ready| ready > 0)
}
