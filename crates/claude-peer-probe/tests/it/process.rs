//! `OsProcessTable` against real processes: live, zombie, thread, reaped.

use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use claude_peer_probe::{OsProcessTable, ProcessTable};
use claude_peer_registry::{Pid, ProcessFacts, ProcessState, Signal};
use rustix::process::{WaitId, WaitIdOptions};

/// A child that is killed and reaped however the test ends.
struct Reaped(Child);

impl Reaped {
    fn spawn(program: &str, args: &[&str]) -> Self {
        Self(
            Command::new(program)
                .args(args)
                .spawn()
                .expect("spawn a child"),
        )
    }

    fn pid(&self) -> Pid {
        Pid::new(self.0.id()).expect("a child's pid is a valid pid")
    }

    /// Blocks until the child has exited, without reaping it: it stays a zombie.
    fn wait_exited_unreaped(&self) {
        let pid = rustix::process::Pid::from_raw(self.pid().as_i32()).unwrap();
        rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        )
        .expect("waitid WNOWAIT");
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Field 22 of `/proc/<pid>/stat`, parsed here independently of the probe.
fn field_22(pid: Pid) -> String {
    let stat = std::fs::read(format!("/proc/{pid}/stat")).unwrap();
    let close = stat.iter().rposition(|&b| b == b')').unwrap();
    let rest = String::from_utf8(stat[close + 1..].to_vec()).unwrap();
    rest.split_whitespace().nth(19).unwrap().to_owned()
}

fn facts_of(table: &OsProcessTable, pid: Pid) -> ProcessFacts {
    let signal = table.signal(pid);
    table.facts(pid, signal)
}

#[test]
fn a_live_child_is_alive_running_a_leader_with_its_own_start_token() {
    let table = OsProcessTable::new();
    let child = Reaped::spawn("sleep", &["30"]);
    let pid = child.pid();

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
    let child = Reaped::spawn("true", &[]);
    child.wait_exited_unreaped();
    let pid = child.pid();

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
    let mut child = Command::new("true").spawn().unwrap();
    let pid = Pid::new(child.id()).unwrap();
    child.wait().unwrap();

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
    let (tid_tx, tid_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        tid_tx
            .send(rustix::thread::gettid().as_raw_nonzero().get())
            .unwrap();
        let _ = stop_rx.recv();
    });
    let tid = Pid::new(tid_rx.recv().unwrap().cast_unsigned()).unwrap();

    let facts = facts_of(&table, tid);
    stop_tx.send(()).unwrap();
    thread.join().unwrap();

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
