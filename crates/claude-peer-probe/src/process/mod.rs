//! The real process table: `kill(pid, 0)` everywhere, `/proc` and pidfds on Linux.
//!
//! This file is the public surface ([`OsProcessTable`]) and the part every Unix
//! shares; the Linux facts live beside it, one file per job: reading `/proc`
//! (`procfs`), pinning live processes with pidfds (`pins`), learning every pid at
//! once (`census`), and the pure parsers of what `/proc` says (`proc_stat`).

use claude_peer_registry::{Pid, ProcessFacts, Signal};
use rustix::io::Errno;

use crate::{Census, Counting, ProcessTable, Reader};

#[cfg(target_os = "linux")]
mod census;
#[cfg(target_os = "linux")]
mod pins;
// Its parsers serve the Linux probe; their tests run everywhere.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod proc_stat;
#[cfg(target_os = "linux")]
mod procfs;

/// The process table of the running OS.
///
/// On Linux it reads `/proc`. Boot time, clock rate, the pid domain and the `/proc`
/// directory are facts of the whole process: they are learned once per process, so a
/// fresh table costs nothing to build. On other Unix systems only the signal outcome
/// is known.
///
/// **A table pins the processes it has seen live.** The first time `facts` finds a
/// pid alive, running and a thread-group leader, it keeps a pidfd of that process with
/// the facts it read. A pidfd names one process, never a later holder of its pid, and
/// becomes readable when that process exits (zombie included); while it is not
/// readable the pid still names that very process, whose start token, start time and
/// leadership cannot have changed. So later calls answer with one zero-timeout `poll`
/// instead of reading `/proc/<pid>/stat`, and drop the entry the moment the pidfd is
/// readable. Pidfds are close-on-exec and few: at most [`OsProcessTable::PIN_LIMIT`]
/// (and at most half the soft `RLIMIT_NOFILE`), and exited ones are swept out as new
/// ones come in. Only a long-lived table benefits: callers that scan repeatedly
/// should keep one table (one `Discovery`), not build one per scan.
///
/// The one state a pinned answer cannot see is a leader *thread* that has exited
/// while other threads of its process still run (`/proc` shows such a process as a
/// zombie, its pidfd is not readable until the last thread exits); the cache keeps
/// reporting it running, which it is.
#[derive(Debug)]
pub struct OsProcessTable {
    #[cfg(target_os = "linux")]
    linux: pins::Cache,
}

impl Default for OsProcessTable {
    fn default() -> Self {
        Self::new()
    }
}

impl OsProcessTable {
    /// The most processes a table pins with a pidfd (see the type's docs); fewer
    /// when the soft `RLIMIT_NOFILE` is below twice this.
    pub const PIN_LIMIT: usize = 1024;

    /// A table that pins up to [`Self::PIN_LIMIT`] live processes, or half the soft
    /// `RLIMIT_NOFILE` if that is less.
    #[must_use]
    pub fn new() -> Self {
        #[cfg(target_os = "linux")]
        let limit = {
            let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
            soft.and_then(|soft| usize::try_from(soft / 2).ok())
                .map_or(Self::PIN_LIMIT, |half| half.min(Self::PIN_LIMIT))
        };
        #[cfg(not(target_os = "linux"))]
        let limit = 0;
        Self::with_pin_limit(limit)
    }

    /// A table that pins at most `limit` processes; `0` turns pinning off, so every
    /// `facts` call reads `/proc` afresh.
    #[must_use]
    pub fn with_pin_limit(limit: usize) -> Self {
        #[cfg(not(target_os = "linux"))]
        let _ = limit;
        Self {
            #[cfg(target_os = "linux")]
            linux: pins::Cache::new(limit),
        }
    }

    /// How many processes this table holds a pidfd for right now.
    #[must_use]
    pub fn pinned(&self) -> usize {
        #[cfg(target_os = "linux")]
        {
            self.linux.pinned()
        }
        #[cfg(not(target_os = "linux"))]
        {
            0
        }
    }
}

impl ProcessTable for OsProcessTable {
    fn signal(&self, pid: Pid) -> Signal {
        let raw = pid.as_i32();
        // `Pid` already rules these out; a second check costs nothing and keeps a
        // future change to `Pid` from ever signalling init or a process group.
        if raw <= 1 {
            return Signal::NotPermitted;
        }
        let Some(target) = rustix::process::Pid::from_raw(raw) else {
            return Signal::NotPermitted;
        };
        match rustix::process::test_kill_process(target) {
            Ok(()) => Signal::Alive,
            Err(Errno::SRCH) => Signal::NoSuchProcess,
            // EPERM, and anything unexpected: neither alive nor provably gone.
            Err(_) => Signal::NotPermitted,
        }
    }

    /// From 1,024 records on, the pids are learned from `/proc` when that is cheaper
    /// than signalling each record: one listing of `/proc` when records outnumber the
    /// processes it lists; with threads, also the `task/` of each process with several,
    /// when records number at least four times the processes (listing one process's
    /// threads costs up to four system calls, signalling one record one). Never where
    /// `/proc` is mounted with `hidepid` (it hides other users' processes) or a `task/`
    /// cannot be listed.
    fn census(&self, records: usize, counting: Counting) -> Option<Census> {
        #[cfg(target_os = "linux")]
        {
            census::census(records, counting)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = (records, counting);
            None
        }
    }

    fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts {
        if signal == Signal::NoSuchProcess {
            return ProcessFacts::gone();
        }
        #[cfg(target_os = "linux")]
        {
            self.linux.facts(pid, signal)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            ProcessFacts::with_signal(signal)
        }
    }

    /// Read afresh from `/proc/<pid>/stat` each time; `None` off Linux.
    fn parent(&self, pid: Pid) -> Option<Pid> {
        #[cfg(target_os = "linux")]
        {
            procfs::proc_dir()
                .and_then(|proc_dir| procfs::parent(proc_dir, pid))
                .and_then(Pid::new)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = pid;
            None
        }
    }

    fn reader(&self) -> Reader {
        Reader {
            uid: rustix::process::geteuid().as_raw(),
            #[cfg(target_os = "linux")]
            pid_domain: procfs::pid_domain().map(str::to_owned),
            #[cfg(not(target_os = "linux"))]
            pid_domain: None,
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::mpsc;

    use claude_peer_registry::{Pid, Signal};
    use rustix::io::Errno;
    use rustix::process::PidfdFlags;

    use super::OsProcessTable;

    /// Whether `pidfd_open` accepts `pid` (it accepts thread-group leaders only), and
    /// the leadership a table without pins reads from `/proc/<pid>/stat`.
    fn both_answers(pid: Pid) -> (Option<bool>, Option<bool>) {
        let by_pidfd = match rustix::process::Pid::from_raw(pid.as_i32())
            .map_or(Err(Errno::SRCH), |target| {
                rustix::process::pidfd_open(target, PidfdFlags::empty())
            }) {
            Ok(_) => Some(true),
            // EINVAL before Linux 6.9, ENOENT since (the thread itself is running).
            Err(Errno::INVAL | Errno::NOENT) => Some(false),
            Err(_) => None,
        };
        let table = OsProcessTable::with_pin_limit(0);
        let by_stat = table.linux.facts(pid, Signal::Alive).thread_group_leader;
        assert_eq!(table.pinned(), 0, "a table without pins pins nothing");
        (by_pidfd, by_stat)
    }

    #[test]
    fn the_parent_is_the_one_the_os_names() {
        use crate::ProcessTable as _;
        let me = Pid::new(std::process::id()).unwrap();
        let parent = OsProcessTable::new().parent(me);
        assert_eq!(parent, Pid::new(std::os::unix::process::parent_id()));
    }

    #[test]
    fn a_table_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<OsProcessTable>();
    }

    #[test]
    fn the_stat_exit_signal_agrees_with_pidfd_open_for_a_process_and_for_a_thread() {
        let me = Pid::new(std::process::id()).unwrap();
        assert_eq!(both_answers(me), (Some(true), Some(true)));

        let (tid_tx, tid_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tid_tx
                .send(rustix::thread::gettid().as_raw_nonzero().get())
                .unwrap();
            let _ = stop_rx.recv();
        });
        let tid = Pid::new(tid_rx.recv().unwrap().cast_unsigned()).unwrap();
        let answers = both_answers(tid);
        stop_tx.send(()).unwrap();
        thread.join().unwrap();
        assert_eq!(
            answers,
            (Some(false), Some(false)),
            "a thread id is no process"
        );
    }
}
