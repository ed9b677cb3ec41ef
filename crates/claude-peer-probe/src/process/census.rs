//! Learning at once which pids exist, from `/proc` on Linux, for scans so big that
//! listing `/proc` (and some `task/` directories) costs less than signalling each
//! record.
//!
//! Only where `/proc` hides nothing: under `hidepid`, a hidden process would look gone
//! rather than unverifiable, so no census is taken there.

use claude_peer_registry::Pid;
use rustix::fs::{AtFlags, Dir, Mode, OFlags};
use rustix::io::Errno;

use super::proc_stat;
use super::procfs::{ProcPathBuf, proc_dir, read_file};
use crate::{Census, Counting};

/// Fewer records than this are signalled one by one: listing `/proc` would cost more.
const CENSUS_FLOOR: usize = 1024;
/// System calls to list a process's threads (`statx` for their number, then open,
/// two `getdents64` and close when there are several), where a record costs one
/// `kill`.
const CALLS_PER_PROCESS: usize = 4;
/// `/proc/self/mountinfo` is a few KiB; one that does not fit is not parsed.
const MOUNTINFO_BUF: usize = 256 * 1024;

/// The census [`crate::ProcessTable::census`] describes, or `None` when it would cost
/// more than signalling or could miss a process.
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
    let mut path = ProcPathBuf::new();
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
