//! `OsProcessTable` against real processes: live, zombie, thread, reaped.

use std::time::{Duration, SystemTime};

use claude_peer_probe::{Counting, OsProcessTable, ProcessTable};
use claude_peer_registry::{Pid, ProcessFacts, ProcessState, Signal};
use claude_peer_testkit::process::{ParkedThread, Sleeper, Zombie, proc_start, reaped_pid};

/// `pid` as the probe takes it.
fn pid_of(raw: u32) -> Pid {
    Pid::new(raw).expect("a child's pid is a valid pid")
}

/// Field 22 of `/proc/<pid>/stat`, read independently of the probe.
fn field_22(pid: Pid) -> String {
    proc_start(pid.get()).unwrap()
}

fn facts_of(table: &OsProcessTable, pid: Pid) -> ProcessFacts {
    let signal = table.signal(pid);
    table.facts(pid, signal)
}

#[test]
fn a_live_child_is_alive_running_a_leader_with_its_own_start_token() {
    let table = OsProcessTable::new();
    let child = Sleeper::spawn().unwrap();
    let pid = pid_of(child.pid());

    let facts = facts_of(&table, pid);
    assert_eq!(facts.signal, Signal::Alive);
    assert_eq!(facts.state, Some(ProcessState::Running));
    assert_eq!(
        facts.thread_group_leader,
        Some(true),
        "a process is its own group leader"
    );
    assert_eq!(
        facts.start_token.as_deref(),
        Some(field_22(pid).as_str()),
        "the start token is field 22 as written"
    );
    let started = facts.started_at.expect("a start time on Linux");
    let now = SystemTime::now();
    assert!(
        started > now - Duration::from_secs(3600) && started < now + Duration::from_secs(60),
        "a fresh child started about now, not at {started:?}"
    );
}

#[test]
fn an_exited_unreaped_child_is_a_zombie_that_still_answers_the_signal() {
    let table = OsProcessTable::new();
    let child = Zombie::spawn().unwrap();
    let pid = pid_of(child.pid());

    let facts = facts_of(&table, pid);
    assert_eq!(
        facts.signal,
        Signal::Alive,
        "kill(pid, 0) succeeds on a zombie"
    );
    assert_eq!(facts.state, Some(ProcessState::Zombie));
    assert_eq!(facts.start_token.as_deref(), Some(field_22(pid).as_str()));
}

#[test]
fn a_reaped_child_is_no_such_process_and_nothing_else_is_claimed() {
    let table = OsProcessTable::new();
    let pid = pid_of(reaped_pid().unwrap());

    // Pid reuse between the reap and the probe is possible in principle, not in a test run.
    assert_eq!(table.signal(pid), Signal::NoSuchProcess);
    assert_eq!(
        table.facts(pid, Signal::NoSuchProcess),
        ProcessFacts::gone()
    );
}

#[test]
fn a_thread_id_of_a_live_process_is_not_a_thread_group_leader() {
    let table = OsProcessTable::new();
    let thread = ParkedThread::spawn().unwrap();
    let tid = pid_of(thread.tid());

    let facts = facts_of(&table, tid);
    drop(thread);

    assert_ne!(tid.get(), std::process::id(), "the thread has its own id");
    assert_eq!(
        facts.signal,
        Signal::Alive,
        "Linux lets kill(2) name a thread id"
    );
    assert_eq!(facts.state, Some(ProcessState::Running));
    assert_eq!(
        facts.thread_group_leader,
        Some(false),
        "a thread id is not a session's pid"
    );
}

#[test]
fn this_process_is_alive_and_leads_its_thread_group() {
    let table = OsProcessTable::new();
    let me = Pid::new(std::process::id()).unwrap();
    let facts = facts_of(&table, me);
    assert_eq!(facts.signal, Signal::Alive);
    assert_eq!(facts.thread_group_leader, Some(true));
    assert!(facts.start_token.is_some());
}

#[test]
fn the_reader_is_this_euid_and_the_pid_domain_claude_code_writes() {
    let reader = OsProcessTable::new().reader();
    assert_eq!(reader.uid, rustix::process::geteuid().as_raw());

    let machine_id = std::fs::read_to_string("/etc/machine-id")
        .ok()
        .map(|s| s.trim().to_owned());
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    match machine_id.filter(|id| !id.is_empty()) {
        Some(id) => assert_eq!(
            reader.pid_domain,
            Some(format!("linux:{id}:{}", ns.display())),
            "linux:<machine-id>:<pid namespace>"
        ),
        None => assert_eq!(
            reader.pid_domain, None,
            "no machine id: unknown, not invented"
        ),
    }
    let domain = reader.pid_domain.unwrap_or_default();
    if !domain.is_empty() {
        let ns_part = domain.rsplit_once(':').unwrap().1;
        assert!(
            ns_part.starts_with('[') && ns_part.ends_with(']'),
            "{domain}"
        );
        assert!(
            domain.starts_with("linux:") && domain.contains(":pid:["),
            "{domain}"
        );
    }
}

#[test]
fn the_cached_facts_are_the_same_on_a_second_call() {
    let table = OsProcessTable::new();
    assert_eq!(table.reader(), table.reader());
    let me = Pid::new(std::process::id()).unwrap();
    assert_eq!(facts_of(&table, me), facts_of(&table, me));
}

// ---- the pidfd pins of a long-lived table ----

/// `read(2)` calls this thread has made so far (`syscr` of `/proc/thread-self/io`),
/// learned with exactly one `read`, which the next figure includes. A `facts` call
/// served by a pin reads nothing (one `poll`); one that is not reads `/proc/<pid>/stat`.
fn reads_so_far() -> u64 {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        "/proc/thread-self/io",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .unwrap();
    let mut buf = [0_u8; 4096];
    let n = rustix::io::read(&fd, &mut buf).unwrap();
    let text = std::str::from_utf8(&buf[..n]).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("syscr:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// `table.facts(pid, Alive)` and the number of `read` calls it made.
fn facts_and_reads(table: &OsProcessTable, pid: Pid) -> (ProcessFacts, u64) {
    let before = reads_so_far();
    let facts = table.facts(pid, Signal::Alive);
    // Minus the one read that learned `before`.
    (facts, reads_so_far() - before - 1)
}

#[test]
fn a_live_child_is_pinned_and_answered_from_the_pin_the_second_time() {
    let table = OsProcessTable::new();
    let child = Sleeper::spawn().unwrap();
    let pid = pid_of(child.pid());

    let (first, first_reads) = facts_and_reads(&table, pid);
    assert!(first_reads >= 1, "a first look reads /proc/<pid>/stat");
    assert_eq!(first.state, Some(ProcessState::Running));
    assert_eq!(first.thread_group_leader, Some(true));
    assert_eq!(first.start_token.as_deref(), Some(field_22(pid).as_str()));
    assert_eq!(table.pinned(), 1);

    let (second, second_reads) = facts_and_reads(&table, pid);
    assert_eq!(second, first, "the pin holds the facts read the first time");
    assert_eq!(second_reads, 0, "a pinned live process costs no /proc read");
    assert_eq!(table.pinned(), 1);

    // The same calls on a table that pins nothing read /proc every time.
    let unpinned = OsProcessTable::with_pin_limit(0);
    for _ in 0..2 {
        let (facts, reads) = facts_and_reads(&unpinned, pid);
        assert_eq!(facts, first);
        assert!(reads >= 1);
    }
    assert_eq!(unpinned.pinned(), 0);
}

#[test]
fn a_pinned_child_that_exits_is_reported_a_zombie_not_from_the_pin() {
    let table = OsProcessTable::new();
    let mut child = Sleeper::spawn().unwrap();
    let pid = pid_of(child.pid());
    let live = facts_of(&table, pid);
    assert_eq!(live.state, Some(ProcessState::Running));
    assert_eq!(table.pinned(), 1);

    child.kill_unreaped().unwrap();
    let zombie = facts_of(&table, pid);
    assert_eq!(
        zombie.signal,
        Signal::Alive,
        "a zombie answers kill(pid, 0)"
    );
    assert_eq!(
        zombie.state,
        Some(ProcessState::Zombie),
        "an exited process's pidfd is readable: the pin is not trusted"
    );
    assert_eq!(zombie.start_token, live.start_token, "the same process");
    assert_eq!(table.pinned(), 0, "the exited process's pin was dropped");
    assert_eq!(facts_of(&table, pid).state, Some(ProcessState::Zombie));
    assert_eq!(table.pinned(), 0, "a zombie is never pinned");
}

#[test]
fn a_pin_left_by_a_reaped_child_never_answers_for_its_pid() {
    let table = OsProcessTable::new();
    let mut first = Sleeper::spawn().unwrap();
    let first_pid = pid_of(first.pid());
    let pinned = facts_of(&table, first_pid);
    assert_eq!(pinned.state, Some(ProcessState::Running));
    assert_eq!(table.pinned(), 1);
    // Killed and reaped without the table looking: its pin is stale, not yet dropped.
    first.crash().unwrap();

    let second = Sleeper::spawn().unwrap();
    let second_pid = pid_of(second.pid());
    let facts = facts_of(&table, second_pid);
    assert_eq!(facts.state, Some(ProcessState::Running));
    assert_eq!(
        facts.start_token.as_deref(),
        Some(field_22(second_pid).as_str())
    );
    if second_pid != first_pid {
        assert_eq!(
            table.pinned(),
            2,
            "the stale pin waits for a look or a sweep"
        );
    }

    // Asked about the reaped pid as if it were alive (a race with a signal that
    // came just before the reap): the pin's facts are not served.
    let stale = table.facts(first_pid, Signal::Alive);
    if second_pid != first_pid {
        assert_eq!(
            stale,
            ProcessFacts::with_signal(Signal::Alive),
            "nothing known"
        );
        assert_eq!(table.pinned(), 1, "only the second child is pinned");
    }
}

/// Spawns sleepers until one gets `pid` (steering the kernel with `ns_last_pid`),
/// or `None` where that is not permitted or other forks keep taking it.
fn spawn_with_pid(pid: Pid) -> Option<Sleeper> {
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid.get() - 1).to_string()).ok()?;
        let child = Sleeper::spawn().unwrap();
        if child.pid() == pid.get() {
            return Some(child);
        }
    }
    None
}

#[test]
fn a_recycled_pid_is_described_as_its_new_process_not_from_the_old_pin() {
    let table = OsProcessTable::new();
    let mut old = Sleeper::spawn().unwrap();
    let pid = pid_of(old.pid());
    let old_facts = facts_of(&table, pid);
    assert_eq!(table.pinned(), 1);
    old.crash().unwrap();
    // Let the clock tick on, so the new process's start token differs.
    std::thread::sleep(Duration::from_millis(30));

    let Some(new) = spawn_with_pid(pid) else {
        eprintln!("skipped: cannot steer the next pid (ns_last_pid) here");
        return;
    };
    let facts = facts_of(&table, pid_of(new.pid()));
    assert_eq!(facts.state, Some(ProcessState::Running));
    assert_eq!(facts.thread_group_leader, Some(true));
    assert_eq!(facts.start_token.as_deref(), Some(field_22(pid).as_str()));
    assert_ne!(
        facts.start_token, old_facts.start_token,
        "the new holder of the pid, not the pinned one"
    );
    assert_eq!(
        table.pinned(),
        1,
        "the new process is pinned in the old one's place"
    );
    let (again, reads) = facts_and_reads(&table, pid);
    assert_eq!((again, reads), (facts, 0));
}

#[test]
fn a_thread_id_is_never_pinned() {
    let table = OsProcessTable::new();
    let thread = ParkedThread::spawn().unwrap();
    let tid = pid_of(thread.tid());

    let answers: Vec<_> = (0..3)
        .map(|_| {
            let (facts, reads) = facts_and_reads(&table, tid);
            (facts.thread_group_leader, reads >= 1, table.pinned())
        })
        .collect();
    drop(thread);
    assert_eq!(
        answers,
        vec![(Some(false), true, 0); 3],
        "read afresh every time"
    );
}

#[test]
fn a_full_table_pins_no_more_and_sweeps_exited_pins_to_make_room() {
    const LIMIT: usize = 3;
    let table = OsProcessTable::with_pin_limit(LIMIT);
    let mut children: Vec<Sleeper> = (0..LIMIT + 2).map(|_| Sleeper::spawn().unwrap()).collect();
    for child in &children {
        let facts = facts_of(&table, pid_of(child.pid()));
        assert_eq!(
            facts.state,
            Some(ProcessState::Running),
            "right facts, pinned or not"
        );
        assert_eq!(
            facts.start_token.as_deref(),
            Some(field_22(pid_of(child.pid())).as_str())
        );
        assert!(table.pinned() <= LIMIT);
    }
    assert_eq!(table.pinned(), LIMIT, "the first {LIMIT} are pinned");
    let (_, reads) = facts_and_reads(&table, pid_of(children[LIMIT].pid()));
    assert!(reads >= 1, "one that found no room is read afresh");
    assert_eq!(table.pinned(), LIMIT);

    // One pinned child exits (a zombie): the next pin sweeps it out.
    children[0].kill_unreaped().unwrap();
    let late = pid_of(children[LIMIT].pid());
    let (facts, _) = facts_and_reads(&table, late);
    assert_eq!(facts.start_token.as_deref(), Some(field_22(late).as_str()));
    assert_eq!(table.pinned(), LIMIT, "the exited pin made room");
    let (again, reads) = facts_and_reads(&table, late);
    assert_eq!((again, reads), (facts, 0), "now answered from its pin");

    // Still full of live processes: the last one stays unpinned, and correct.
    let last = pid_of(children[LIMIT + 1].pid());
    for _ in 0..3 {
        let (facts, reads) = facts_and_reads(&table, last);
        assert_eq!(facts.start_token.as_deref(), Some(field_22(last).as_str()));
        assert!(reads >= 1);
        assert_eq!(table.pinned(), LIMIT);
    }
    children.clear();
}

#[test]
fn a_default_table_pins_every_live_process_it_is_asked_about_within_its_limit() {
    const { assert!(OsProcessTable::PIN_LIMIT == 1024) };
    let table = OsProcessTable::default();
    let children: Vec<Sleeper> = (0..20).map(|_| Sleeper::spawn().unwrap()).collect();
    for child in &children {
        facts_of(&table, pid_of(child.pid()));
    }
    assert_eq!(table.pinned(), 20);
}

#[test]
fn a_census_holds_every_pid_that_answers_the_signal_and_none_that_does_not() {
    let table = OsProcessTable::new();
    for counting in [Counting::Processes, Counting::ProcessesAndThreads] {
        assert_eq!(
            table.census(1023, counting),
            None,
            "a thousand records are signalled one by one"
        );
    }
    if table
        .census(usize::MAX, Counting::ProcessesAndThreads)
        .is_none()
    {
        // Only where /proc hides processes (hidepid) or lists another's threads not.
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            mountinfo.contains("hidepid="),
            "no census although /proc hides nothing"
        );
        return;
    }
    let live = Sleeper::spawn().unwrap();
    let zombie = Zombie::spawn().unwrap();
    let thread = ParkedThread::spawn().unwrap();
    let tid = pid_of(thread.tid());
    let gone = pid_of(reaped_pid().unwrap());
    let census = table
        .census(usize::MAX, Counting::ProcessesAndThreads)
        .unwrap();
    let processes = table.census(usize::MAX, Counting::Processes).unwrap();
    let me = Pid::new(std::process::id()).unwrap();
    for (pid, what) in [
        (me, "this process"),
        (pid_of(live.pid()), "a live child"),
        (pid_of(zombie.pid()), "a zombie"),
        (tid, "a thread of this process"),
    ] {
        assert_eq!(
            table.signal(pid),
            Signal::Alive,
            "{what} answers the signal"
        );
        assert!(census.contains(pid), "{what} ({pid}) is in the census");
        let a_process = pid != tid;
        assert_eq!(
            processes.contains(pid),
            a_process,
            "{what} ({pid}) is in a census of processes only if it is one"
        );
    }
    assert_eq!(table.signal(gone), Signal::NoSuchProcess);
    assert!(
        !census.contains(gone) && !processes.contains(gone),
        "a reaped child is not in the census"
    );
    drop(thread);
    assert!(census.len() > 4, "{census:?}");
}
