//! The real process table: `kill(pid, 0)` everywhere, `/proc` on Linux.

use claude_peer_registry::{Pid, ProcessFacts, Signal};
use rustix::io::Errno;

use crate::{Census, Counting, ProcessTable, Reader};

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
    linux: linux::Cache,
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
            linux: linux::Cache::new(limit),
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
            linux::census(records, counting)
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

    fn reader(&self) -> Reader {
        Reader {
            uid: rustix::process::geteuid().as_raw(),
            #[cfg(target_os = "linux")]
            pid_domain: linux::pid_domain().map(str::to_owned),
            #[cfg(not(target_os = "linux"))]
            pid_domain: None,
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashMap;
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
    use std::time::{Duration, SystemTime};

    use claude_peer_registry::{Pid, ProcessFacts, ProcessState, Signal};
    use rustix::event::{self, PollFd, PollFlags, Timespec};
    use rustix::fd::{AsFd, OwnedFd};
    use rustix::fs::{AtFlags, CWD, Dir, Mode, OFlags};
    use rustix::io::Errno;
    use rustix::process::PidfdFlags;

    use crate::{Census, Counting, proc_stat};

    /// `/proc/<pid>/stat` is one line well under this.
    const STAT_BUF: usize = 4096;
    /// `/proc/stat` grows with the CPU and interrupt count; `btime` comes after both.
    const PROC_STAT_BUF: usize = 256 * 1024;
    /// `USER_HZ` on every Linux architecture but alpha; used if auxv does not say.
    const DEFAULT_CLOCK_TICKS: u64 = 100;
    /// Flags for every `/proc` and `/etc` read: nothing followed, nothing inherited.
    const READ_FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::CLOEXEC)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::NOCTTY);

    /// `/proc`, opened once per process so each pid costs an `openat` of
    /// `<pid>/stat` only.
    static PROC_DIR: OnceLock<Option<OwnedFd>> = OnceLock::new();
    /// Boot time and clock rate: fixed while this process runs.
    static CLOCK: OnceLock<Option<Clock>> = OnceLock::new();
    /// This process's pid namespace never changes (`unshare`/`setns` of a pid
    /// namespace affect children only), nor does the machine id.
    static PID_DOMAIN: OnceLock<Option<String>> = OnceLock::new();

    /// Before a pin is added, exited pins are swept out once the table holds this
    /// many, or twice as many as the last sweep left, whichever is more: dead
    /// processes' pidfds never outnumber the live ones by much.
    const SWEEP_FLOOR: usize = 32;

    /// A table's own state: whether pidfds work, and the processes it pins.
    #[derive(Debug)]
    pub(super) struct Cache {
        /// Cleared when `pidfd_open` turns out to be unavailable (before Linux 5.3,
        /// or filtered by seccomp); nothing is pinned then.
        pub(super) pidfd_usable: AtomicBool,
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

    const NO_WAIT: Timespec = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };

    /// Whether the process behind `pidfd` has exited (readable: zombie or reaped).
    /// An error is taken as exited: the pin is then dropped, never trusted.
    fn exited(pidfd: &OwnedFd) -> bool {
        let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
        event::poll(&mut fds, Some(&NO_WAIT)).map_or(true, |ready| ready > 0)
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
            if signal == Signal::Alive
                && let Some(pinned) = self.pinned_facts(pid)
            {
                return pinned;
            }
            let mut facts = ProcessFacts::with_signal(signal);
            let Some(proc_dir) = proc_dir() else {
                // No /proc: nothing more is known.
                return facts;
            };
            // A pin's pidfd is opened BEFORE the stat read, so what that read describes
            // is the pinned process or one that got its pid later. A later one means the
            // pinned process has exited, so its pidfd is readable and the first check
            // of the pin drops it: a pin never serves facts of another process.
            let pidfd = self.pidfd_to_pin(pid);
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
            facts.started_at = clock().and_then(|c| c.at(stat.start_ticks));
            facts.thread_group_leader = stat.leader;
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

    /// Fewer records than this are signalled one by one: listing `/proc` would cost more.
    const CENSUS_FLOOR: usize = 1024;
    /// System calls to list a process's threads (`statx` for their number, then open,
    /// two `getdents64` and close when there are several), where a record costs one
    /// `kill`.
    const CALLS_PER_PROCESS: usize = 4;
    /// `/proc/self/mountinfo` is a few KiB; one that does not fit is not parsed.
    const MOUNTINFO_BUF: usize = 256 * 1024;

    pub(super) fn census(records: usize, counting: Counting) -> Option<Census> {
        if records < CENSUS_FLOOR {
            return None;
        }
        let proc_dir = proc_dir()?;
        let mut mountinfo = vec![0; MOUNTINFO_BUF];
        let mountinfo = read_file(proc_dir, "self/mountinfo", &mut mountinfo, |_| false)?;
        if proc_stat::proc_hides_processes(mountinfo)? {
            return None;
        }
        let leaders = pids_in(Dir::read_from(proc_dir).ok()?)?;
        let calls_per_process = match counting {
            Counting::Processes => 1,
            Counting::ProcessesAndThreads => CALLS_PER_PROCESS,
        };
        if records < calls_per_process.saturating_mul(leaders.len()) {
            return None;
        }
        if counting == Counting::Processes {
            return Some(Census::new(leaders));
        }
        let mut path = PathBuf::new();
        let mut pids = leaders.clone();
        for leader in leaders {
            let task = path.of(leader, "task")?;
            // `task/` has two links plus one per thread: a process of one thread (most
            // are) is its leader alone, which is listed already.
            let opened = rustix::fs::statat(proc_dir, task, AtFlags::empty()).and_then(|stat| {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
                (stat.st_nlink > 3)
                    .then(|| rustix::fs::openat(proc_dir, task, flags, Mode::empty()))
                    .transpose()
            });
            match opened {
                Ok(Some(task)) => pids.extend(pids_in(Dir::new(task).ok()?)?),
                // One thread, or exited since it was listed (its threads went with it).
                Ok(None) | Err(Errno::NOENT | Errno::SRCH) => {}
                // Not ours to look at: the census would miss its threads.
                Err(_) => return None,
            }
        }
        Some(Census::new(pids))
    }

    /// The pids a `/proc` or `task/` directory lists; `None` if it cannot be read whole.
    fn pids_in(dir: Dir) -> Option<Vec<Pid>> {
        let mut pids = Vec::new();
        for entry in dir {
            let name = entry.ok()?;
            let pid = std::str::from_utf8(name.file_name().to_bytes())
                .ok()
                .and_then(|name| name.parse().ok())
                .and_then(Pid::new);
            pids.extend(pid);
        }
        Some(pids)
    }

    fn proc_dir() -> Option<&'static OwnedFd> {
        PROC_DIR
            .get_or_init(|| {
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
                rustix::fs::open("/proc", flags, Mode::empty()).ok()
            })
            .as_ref()
    }

    fn clock() -> Option<Clock> {
        *CLOCK.get_or_init(Clock::learn)
    }

    pub(super) fn pid_domain() -> Option<&'static str> {
        PID_DOMAIN.get_or_init(learn_pid_domain).as_deref()
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
