//! The real process table: `kill(pid, 0)` everywhere, `/proc` on Linux.

use claude_peer_registry::{Pid, ProcessFacts, Signal};
use rustix::io::Errno;

use crate::{ProcessTable, Reader};

/// The process table of the running OS.
///
/// On Linux it reads `/proc`; boot time, clock rate and pid domain are learned once
/// per value and cached. On other Unix systems only the signal outcome is known.
#[derive(Debug, Default)]
pub struct OsProcessTable {
    #[cfg(target_os = "linux")]
    linux: linux::Cache,
}

impl OsProcessTable {
    /// A table that learns its cached facts on first use.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
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

    fn reader(&self) -> Reader {
        Reader {
            uid: rustix::process::geteuid().as_raw(),
            #[cfg(target_os = "linux")]
            pid_domain: self.linux.pid_domain().map(str::to_owned),
            #[cfg(not(target_os = "linux"))]
            pid_domain: None,
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::Write as _;
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, SystemTime};

    use claude_peer_registry::{Pid, ProcessFacts, ProcessState, Signal};
    use rustix::fd::{AsFd, OwnedFd};
    use rustix::fs::{CWD, Mode, OFlags};
    use rustix::io::Errno;
    use rustix::process::PidfdFlags;

    use crate::proc_stat;

    /// `/proc/<pid>/stat` is one line well under this.
    const STAT_BUF: usize = 4096;
    /// `Tgid:` is the fourth line of `/proc/<pid>/status`; this holds it with room.
    const STATUS_BUF: usize = 8192;
    /// `/proc/stat` grows with the CPU and interrupt count; `btime` comes after both.
    const PROC_STAT_BUF: usize = 256 * 1024;
    /// `USER_HZ` on every Linux architecture but alpha; used if auxv does not say.
    const DEFAULT_CLOCK_TICKS: u64 = 100;
    /// Flags for every `/proc` and `/etc` read: nothing followed, nothing inherited.
    const READ_FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::CLOEXEC)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::NOCTTY);

    /// Facts learned once: they do not change while this process runs.
    #[derive(Debug)]
    pub(super) struct Cache {
        /// `/proc`, opened once so each pid costs an `openat` of `<pid>/stat` only.
        proc_dir: OnceLock<Option<OwnedFd>>,
        clock: OnceLock<Option<Clock>>,
        pid_domain: OnceLock<Option<String>>,
        /// Cleared when `pidfd_open` turns out to be unavailable (before Linux 5.3,
        /// or filtered by seccomp); `/proc/<pid>/status` answers instead.
        pub(super) pidfd_usable: AtomicBool,
    }

    impl Default for Cache {
        fn default() -> Self {
            Self {
                proc_dir: OnceLock::new(),
                clock: OnceLock::new(),
                pid_domain: OnceLock::new(),
                pidfd_usable: AtomicBool::new(true),
            }
        }
    }

    /// What turns a `starttime` into wall-clock time.
    #[derive(Debug, Clone, Copy)]
    struct Clock {
        boot: SystemTime,
        ticks_per_second: u64,
    }

    impl Clock {
        fn learn() -> Option<Self> {
            let mut buf = vec![0; PROC_STAT_BUF];
            let stat = read_file(CWD, "/proc/stat", &mut buf, |read| {
                proc_stat::boot_time(read).is_some()
            })?;
            let boot = SystemTime::UNIX_EPOCH
                .checked_add(Duration::from_secs(proc_stat::boot_time(stat)?))?;
            let mut auxv = [0; 1024];
            let ticks_per_second = read_file(CWD, "/proc/self/auxv", &mut auxv, |_| false)
                .and_then(proc_stat::auxv_clock_ticks)
                .unwrap_or(DEFAULT_CLOCK_TICKS);
            Some(Self {
                boot,
                ticks_per_second,
            })
        }

        fn at(self, ticks: u64) -> Option<SystemTime> {
            let hz = self.ticks_per_second;
            let nanos = (ticks % hz).checked_mul(1_000_000_000)? / hz;
            let since_boot =
                Duration::from_secs(ticks / hz).checked_add(Duration::from_nanos(nanos))?;
            self.boot.checked_add(since_boot)
        }
    }

    impl Cache {
        pub(super) fn facts(&self, pid: Pid, signal: Signal) -> ProcessFacts {
            let mut facts = ProcessFacts::with_signal(signal);
            let Some(proc_dir) = self.proc_dir() else {
                // No /proc: nothing more is known.
                return facts;
            };
            let mut path = PathBuf::new();

            let mut stat_buf = [0; STAT_BUF];
            // The stat line is complete once its newline has arrived.
            let stat = path
                .of(pid, "stat")
                .and_then(|p| {
                    read_file(proc_dir, p, &mut stat_buf, |read| {
                        read.last() == Some(&b'\n')
                    })
                })
                .and_then(proc_stat::parse_stat);
            let Some(stat) = stat else {
                // Vanished, unreadable or malformed: nothing is known.
                return facts;
            };
            facts.state = Some(match stat.state {
                b'Z' => ProcessState::Zombie,
                b'X' | b'x' => ProcessState::Dead,
                _ => ProcessState::Running,
            });
            facts.start_token = Some(stat.start_text.to_owned());
            facts.started_at = self.clock().and_then(|c| c.at(stat.start_ticks));
            facts.thread_group_leader = self.thread_group_leader(proc_dir, &mut path, pid);
            facts
        }

        /// Whether `pid` is a process rather than a thread of one.
        ///
        /// `pidfd_open` without `PIDFD_THREAD` accepts thread-group leaders only (its
        /// documented contract), and costs one call where reading `/proc/<pid>/status`
        /// (whose `Tgid:` says the same) costs three and has the kernel render the
        /// whole file. The status file is the fallback where `pidfd_open` is missing.
        fn thread_group_leader(
            &self,
            proc_dir: &OwnedFd,
            path: &mut PathBuf,
            pid: Pid,
        ) -> Option<bool> {
            if self.pidfd_usable.load(Ordering::Relaxed) {
                let target = rustix::process::Pid::from_raw(pid.as_i32())?;
                match rustix::process::pidfd_open(target, PidfdFlags::empty()) {
                    Ok(_pidfd) => return Some(true),
                    Err(Errno::INVAL) => return Some(false),
                    // Gone since the stat read: unknown, not guessed.
                    Err(Errno::SRCH) => return None,
                    Err(Errno::NOSYS | Errno::PERM | Errno::ACCESS) => {
                        self.pidfd_usable.store(false, Ordering::Relaxed);
                    }
                    // Out of descriptors or memory: ask /proc this time.
                    Err(_) => {}
                }
            }
            let mut status_buf = [0; STATUS_BUF];
            // Stop reading as soon as the Tgid line is whole.
            let status = read_file(proc_dir, path.of(pid, "status")?, &mut status_buf, |read| {
                proc_stat::status_tgid(read).is_some()
            })?;
            proc_stat::status_tgid(status).map(|tgid| tgid == pid.get())
        }

        fn proc_dir(&self) -> Option<&OwnedFd> {
            self.proc_dir
                .get_or_init(|| {
                    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
                    rustix::fs::open("/proc", flags, Mode::empty()).ok()
                })
                .as_ref()
        }

        fn clock(&self) -> Option<Clock> {
            *self.clock.get_or_init(Clock::learn)
        }

        pub(super) fn pid_domain(&self) -> Option<&str> {
            self.pid_domain.get_or_init(learn_pid_domain).as_deref()
        }
    }

    /// `linux:<machine-id>:<pid namespace>`, the form Claude Code writes.
    fn learn_pid_domain() -> Option<String> {
        let mut buf = [0; 256];
        let machine_id = read_file(CWD, "/etc/machine-id", &mut buf, |_| false)?.trim_ascii();
        if machine_id.is_empty() {
            return None;
        }
        let machine_id = std::str::from_utf8(machine_id).ok()?;
        let ns = rustix::fs::readlink("/proc/self/ns/pid", Vec::new()).ok()?;
        let ns = ns.to_str().ok()?;
        Some(format!("linux:{machine_id}:{ns}"))
    }

    /// A stack buffer for `<pid>/<leaf>` (relative to `/proc`), so the hot path
    /// does not allocate.
    struct PathBuf {
        bytes: [u8; 32],
    }

    impl PathBuf {
        fn new() -> Self {
            Self { bytes: [0; 32] }
        }

        fn of(&mut self, pid: Pid, leaf: &str) -> Option<&str> {
            let mut cursor = &mut self.bytes[..];
            write!(cursor, "{pid}/{leaf}").ok()?;
            let len = 32 - cursor.len();
            std::str::from_utf8(self.bytes.get(..len)?).ok()
        }
    }

    /// Reads `path` (relative to `dir`) into `buf` until EOF, or until `enough` says
    /// the bytes so far suffice. `None` if it cannot be opened or read, or if it fills
    /// `buf` first: a cut-off text is never parsed as if whole.
    fn read_file<'b>(
        dir: impl AsFd,
        path: &str,
        buf: &'b mut [u8],
        enough: impl Fn(&[u8]) -> bool,
    ) -> Option<&'b [u8]> {
        let fd = rustix::fs::openat(dir, path, READ_FLAGS, Mode::empty()).ok()?;
        let mut len = 0;
        loop {
            let spare = buf.get_mut(len..)?;
            if spare.is_empty() {
                return enough(buf).then_some(&*buf);
            }
            match rustix::io::read(&fd, spare) {
                Ok(0) => break,
                Ok(n) => {
                    len += n;
                    if enough(buf.get(..len)?) {
                        break;
                    }
                }
                Err(Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        buf.get(..len)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;

    use claude_peer_registry::{Pid, Signal};

    use super::OsProcessTable;

    /// The leadership answer of `pidfd_open` and of `/proc/<pid>/status`, in that order.
    fn both_answers(pid: Pid) -> (Option<bool>, Option<bool>) {
        let table = OsProcessTable::new();
        let by_pidfd = table.linux.facts(pid, Signal::Alive).thread_group_leader;
        table.linux.pidfd_usable.store(false, Ordering::Relaxed);
        let by_status = table.linux.facts(pid, Signal::Alive).thread_group_leader;
        (by_pidfd, by_status)
    }

    #[test]
    fn the_status_fallback_agrees_with_pidfd_for_a_process_and_for_a_thread() {
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
