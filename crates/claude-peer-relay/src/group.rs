//! A child process in a process group of its own, killed with its group and reaped.

use std::io;
use std::process::{Child, ExitStatus};

use rustix::process::{Pid as RawPid, Signal, kill_process_group};

/// A child started with `process_group(0)`: what it starts shares its group, so killing
/// the group leaves nothing behind. Killed and reaped when dropped unreaped.
#[derive(Debug)]
pub(crate) struct Group {
    pub(crate) child: Child,
    reaped: bool,
}

impl Group {
    pub(crate) const fn new(child: Child) -> Self {
        Self {
            child,
            reaped: false,
        }
    }

    /// The exit status, once it exited (reaping it).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        let status = self.child.try_wait()?;
        self.reaped |= status.is_some();
        Ok(status)
    }

    /// Kills the whole group, then reaps the child. The group is signalled only while
    /// the child is unreaped, so its id cannot have been reused.
    pub(crate) fn kill_and_reap(&mut self) {
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

impl Drop for Group {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}
