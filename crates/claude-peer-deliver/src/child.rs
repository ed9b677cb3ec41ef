//! A child process in a process group of its own: waited for, else killed with its whole
//! group and reaped, so nothing it started outlives it.

use std::fmt;
use std::io;
use std::process::{Child, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid as RawPid, Signal, kill_process_group};

/// How often [`ChildGroup::wait_then_kill`] looks for the exit.
const POLL: Duration = Duration::from_millis(5);

/// A child started with `process_group(0)`: what it starts shares its group, so killing
/// the group leaves nothing behind. Killed and reaped when dropped unreaped.
#[derive(Debug)]
pub struct ChildGroup {
    child: Child,
    reaped: bool,
}

/// How a child that was waited for ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// It exited by itself, with this status.
    Exited(ExitStatus),
    /// It did not exit in time: its group was killed and it was reaped.
    Killed,
}

impl fmt::Display for Ended {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exited(status) => status.fmt(f),
            Self::Killed => f.write_str("killed"),
        }
    }
}

impl ChildGroup {
    /// Takes charge of `child`, which must have been started with `process_group(0)`.
    #[must_use]
    pub const fn new(child: Child) -> Self {
        Self {
            child,
            reaped: false,
        }
    }

    /// The child's pid, also its process group's id.
    #[must_use]
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The child, to take its pipes.
    pub const fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The exit status, once it exited (reaping it).
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// Waits up to `grace` for the exit, then kills the group and reaps the child.
    pub fn wait_then_kill(&mut self, grace: Duration) -> Ended {
        let deadline = Instant::now().checked_add(grace);
        loop {
            match self.try_wait() {
                Ok(Some(status)) => return Ended::Exited(status),
                Ok(None) if deadline.is_none_or(|deadline| Instant::now() < deadline) => {
                    thread::sleep(POLL);
                }
                _ => {
                    self.kill_and_reap();
                    return Ended::Killed;
                }
            }
        }
    }

    /// Kills the whole group, then reaps the child. The group is signalled only while
    /// the child is unreaped, so its id cannot have been reused.
    pub fn kill_and_reap(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(pgid) = RawPid::from_raw(self.child.id().cast_signed()) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
        let _ = self.child.kill();
        if self.child.wait().is_ok() {
            self.reaped = true;
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}
