//! Reading `/proc` (and `/etc/machine-id`) on Linux: a process's stat line and start
//! token, boot time and clock rate, this process's pid domain.
//!
//! Every read is bounded by a caller's buffer and never parsed when cut off; the
//! `/proc` handle, the clock and the pid domain are learned once per process, since
//! none of them changes while it runs. The parsing itself is [`super::proc_stat`]'s.

use std::io::Write as _;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use claude_peer_registry::{Pid, ProcessFacts, ProcessState, Signal};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{CWD, Mode, OFlags};
use rustix::io::Errno;

use super::proc_stat;

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

/// `/proc`, or `None` where it cannot be opened.
pub(super) fn proc_dir() -> Option<&'static OwnedFd> {
    PROC_DIR
        .get_or_init(|| {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
            rustix::fs::open("/proc", flags, Mode::empty()).ok()
        })
        .as_ref()
}

/// `signal` with what `/proc/<pid>/stat` adds: state, start token and time, and
/// thread-group leadership. Only `signal` when the line cannot be read or parsed.
pub(super) fn stat_facts(proc_dir: &OwnedFd, pid: Pid, signal: Signal) -> ProcessFacts {
    let mut facts = ProcessFacts::with_signal(signal);
    let mut stat_buf = [0; STAT_BUF];
    let Some(stat) = stat_line(proc_dir, pid, &mut stat_buf) else {
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
    facts
}

/// The parent pid `/proc/<pid>/stat` names now; never pinned, since a process whose
/// parent exits gets another.
pub(super) fn parent(proc_dir: &OwnedFd, pid: Pid) -> Option<u32> {
    let mut stat_buf = [0; STAT_BUF];
    stat_line(proc_dir, pid, &mut stat_buf).map(|stat| stat.parent)
}

/// `/proc/<pid>/stat`, read whole into `buf` and parsed.
fn stat_line<'b>(
    proc_dir: &OwnedFd,
    pid: Pid,
    buf: &'b mut [u8],
) -> Option<proc_stat::StatFields<'b>> {
    let mut path = ProcPathBuf::new();
    // The stat line is complete once its newline has arrived.
    let path = path.of(pid, "stat")?;
    read_file(proc_dir, path, buf, |read| read.last() == Some(&b'\n'))
        .and_then(proc_stat::parse_stat)
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
        let boot =
            SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(proc_stat::boot_time(stat)?))?;
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

fn clock() -> Option<Clock> {
    *CLOCK.get_or_init(Clock::learn)
}

/// This process's pid domain, learned once.
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
pub(super) struct ProcPathBuf {
    bytes: [u8; Self::LEN],
}

impl ProcPathBuf {
    /// Room for any pid's `stat` or `task`.
    const LEN: usize = 32;

    pub(super) fn new() -> Self {
        Self {
            bytes: [0; Self::LEN],
        }
    }

    /// `<pid>/<leaf>`, or `None` if it does not fit.
    pub(super) fn of(&mut self, pid: Pid, leaf: &str) -> Option<&str> {
        let mut cursor = &mut self.bytes[..];
        write!(cursor, "{pid}/{leaf}").ok()?;
        let len = Self::LEN - cursor.len();
        std::str::from_utf8(self.bytes.get(..len)?).ok()
    }
}

/// Reads `path` (relative to `dir`) into `buf` until EOF, or until `enough` says
/// the bytes so far suffice. `None` if it cannot be opened or read, or if it fills
/// `buf` first: a cut-off text is never parsed as if whole.
pub(super) fn read_file<'b>(
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
