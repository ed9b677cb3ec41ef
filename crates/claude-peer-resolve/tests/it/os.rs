//! The real OS: live children, zombies, threads, reaped and reused pids, and every
//! kind of file a registry directory can hold.

use std::fs::{self, File};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_registry::{ClaudeHome, Liveness};
use claude_peer_resolve::{Discovery, Entry, RefusalKind, Scope, Warning};
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{ParkedThread, Sleeper, Zombie, proc_start, reaped_pid};

/// A record of the live `pid`, with its true start token unless `token` says otherwise.
fn record(
    home: &TempHome,
    pid: u32,
    session: &str,
    token: Option<&str>,
    socket: Option<&Path>,
) -> PathBuf {
    let token = token.map_or_else(|| proc_start(pid).unwrap(), str::to_owned);
    let mut body = serde_json::json!({ "pid": pid, "sessionId": session, "procStart": token, "name": format!("s-{pid}") });
    if let Some(socket) = socket {
        body["messagingSocketPath"] = socket.to_str().unwrap().into();
    }
    home.write_record(pid, body.to_string()).unwrap()
}

/// A record of the parked `thread`'s id, with its true start token.
fn thread_record(home: &TempHome, thread: &ParkedThread) {
    let token = thread.proc_start().unwrap();
    record(home, thread.tid(), "thread", Some(&token), None);
}

/// Every entry of a full scan: its file name, liveness and reason.
fn verdicts(home: &TempHome) -> Vec<(String, Liveness, String)> {
    Discovery::os()
        .scan(home.claude(), Scope::All)
        .unwrap()
        .entries
        .into_iter()
        .map(|s| {
            let name = s.file.file_name().unwrap().to_string_lossy().into_owned();
            (
                name,
                s.verdict.liveness,
                s.verdict.reason.unwrap_or_default(),
            )
        })
        .collect()
}

fn verdict_of(home: &TempHome, name: &str) -> (Liveness, String) {
    let (_, liveness, reason) = verdicts(home)
        .into_iter()
        .find(|(n, _, _)| n == name)
        .unwrap_or_else(|| panic!("{name} is in the scan"));
    (liveness, reason)
}

fn live_pids(home: &TempHome) -> Vec<u32> {
    Discovery::os()
        .live(home.claude())
        .unwrap()
        .entries
        .iter()
        .map(|s| s.pid.get())
        .collect()
}

#[test]
fn a_live_child_with_its_start_token_and_socket_is_live_and_addressable() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let socket = home.socket(child.pid()).unwrap();
    record(&home, child.pid(), "live-session", None, Some(&socket));
    let scan = Discovery::os().scan(home.claude(), Scope::Live).unwrap();
    assert_eq!(scan.entries.len(), 1);
    assert!(
        scan.entries[0].addressability.is_addressable(),
        "{:?}",
        scan.entries[0].addressability
    );
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    let resolved = Discovery::os()
        .resolve_live_session(home.claude(), "live-session")
        .unwrap();
    assert_eq!(resolved.pid.get(), child.pid());
}

#[test]
fn resolution_reads_the_registry_afresh_so_a_killed_session_is_refused_at_once() {
    let mut home = TempHome::new().unwrap();
    let discovery = Discovery::os();
    let mut child = Sleeper::spawn().unwrap();
    let socket = home.socket(child.pid()).unwrap();
    record(&home, child.pid(), "short-lived", None, Some(&socket));
    assert!(
        discovery
            .resolve_live_session(home.claude(), "short-lived")
            .is_ok()
    );
    child.crash().unwrap();
    let err = discovery
        .resolve_live_session(home.claude(), "short-lived")
        .unwrap_err();
    assert_eq!(err.refusal().map(|r| r.kind), Some(RefusalKind::NotLive));
}

#[test]
fn a_zombie_child_is_gone() {
    let home = TempHome::new().unwrap();
    // Exited, not reaped: the pid stays a zombie until dropped below.
    let zombie = Zombie::spawn().unwrap();
    let pid = zombie.pid();
    home.write_record(pid, format!(r#"{{"pid":{pid},"sessionId":"z"}}"#))
        .unwrap();
    let (liveness, reason) = verdict_of(&home, &format!("{pid}.json"));
    drop(zombie);
    assert_eq!(liveness, Liveness::Gone, "{reason}");
    assert!(reason.contains("zombie"), "{reason}");
}

#[test]
fn a_thread_id_of_a_live_process_is_recycled() {
    let home = TempHome::new().unwrap();
    let thread = ParkedThread::spawn().unwrap();
    thread_record(&home, &thread);
    let (liveness, reason) = verdict_of(&home, &format!("{}.json", thread.tid()));
    drop(thread);
    assert_eq!(liveness, Liveness::Recycled, "{reason}");
    assert!(reason.contains("thread"), "{reason}");
}

#[test]
fn a_reaped_pid_is_gone_and_a_live_pid_with_another_start_token_is_recycled() {
    let home = TempHome::new().unwrap();
    let dead_pid = reaped_pid().unwrap();
    home.write_record(dead_pid, format!(r#"{{"pid":{dead_pid},"sessionId":"d"}}"#))
        .unwrap();
    let reused = Sleeper::spawn().unwrap();
    record(&home, reused.pid(), "old-owner", Some("1"), None);
    assert_eq!(
        verdict_of(&home, &format!("{dead_pid}.json")).0,
        Liveness::Gone
    );
    assert_eq!(
        verdict_of(&home, &format!("{}.json", reused.pid())).0,
        Liveness::Recycled
    );
    assert!(live_pids(&home).is_empty());
}

#[test]
fn fifos_device_links_and_huge_files_are_invalid_and_never_hang_the_scan() {
    let home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let pid = child.pid();
    let fifo = home.record_path(pid);
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    symlink("/dev/zero", home.record_path(3)).unwrap();
    File::create(home.record_path(4))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let verdicts = verdicts(&home);
    let by_name = |name: &str| verdicts.iter().find(|(n, _, _)| n == name).unwrap().clone();
    let (_, liveness, reason) = by_name(&format!("{pid}.json"));
    assert_eq!(liveness, Liveness::Invalid);
    assert!(reason.contains("fifo"), "{reason}");
    let (_, liveness, reason) = by_name("3.json");
    assert_eq!(liveness, Liveness::Invalid);
    assert!(reason.contains("symlink"), "{reason}");
    // The huge file's pid is not alive here, so the full scan reads it and rejects it unparsed.
    let (_, liveness, _) = by_name("4.json");
    assert!(
        matches!(liveness, Liveness::Invalid | Liveness::Gone),
        "{liveness}"
    );
}

#[test]
fn a_huge_file_for_a_live_pid_is_invalid_without_reading_it_all() {
    let home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    File::create(home.record_path(child.pid()))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let (liveness, reason) = verdict_of(&home, &format!("{}.json", child.pid()));
    assert_eq!(liveness, Liveness::Invalid);
    assert!(reason.contains("larger than 262144 bytes"), "{reason}");
}

#[test]
fn a_record_owned_by_another_uid_is_invalid() {
    let home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let path = record(&home, child.pid(), "planted", None, None);
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
        let (liveness, reason) = verdict_of(&home, &format!("{}.json", child.pid()));
        assert_eq!(liveness, Liveness::Invalid);
        assert!(reason.contains("4242"), "{reason}");
    } else {
        // Without root no other uid's file can be made; the same-owner record is live.
        assert_eq!(
            verdict_of(&home, &format!("{}.json", child.pid())).0,
            Liveness::Live
        );
    }
}

#[test]
fn an_empty_record_of_a_live_pid_is_unreadable_once_the_reread_budget_is_spent() {
    let home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.write_record(child.pid(), "").unwrap();
    let (liveness, reason) = verdict_of(&home, &format!("{}.json", child.pid()));
    assert_eq!(liveness, Liveness::Unreadable, "{reason}");
}

#[test]
fn an_unparseable_record_older_than_its_live_pid_was_left_by_the_previous_owner() {
    let home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let path = home
        .write_record(child.pid(), r#"{"pid":1,"sessionId":"#)
        .unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    let (liveness, reason) = verdict_of(&home, &format!("{}.json", child.pid()));
    assert_eq!(liveness, Liveness::Gone, "{reason}");
    assert!(reason.contains("previous owner"), "{reason}");
}

#[test]
fn a_missing_registry_is_an_empty_scan_and_a_loose_one_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ClaudeHome::new(dir.path().join("nowhere"));
    let scan = Discovery::os().scan(&missing, Scope::All).unwrap();
    assert!(scan.entries.is_empty() && scan.warnings.is_empty());

    let home = TempHome::new().unwrap();
    fs::set_permissions(home.sessions(), fs::Permissions::from_mode(0o777)).unwrap();
    let scan = Discovery::os().scan(home.claude(), Scope::Live).unwrap();
    assert!(
        scan.warnings
            .iter()
            .any(|w| matches!(w, Warning::DirWritableByOthers { .. })),
        "{:?}",
        scan.warnings
    );

    let linked = tempfile::tempdir().unwrap();
    let linked_home = ClaudeHome::new(linked.path().join(".claude"));
    fs::create_dir_all(linked_home.root()).unwrap();
    symlink(home.sessions(), linked_home.sessions_dir()).unwrap();
    let scan = Discovery::os().scan(&linked_home, Scope::Live).unwrap();
    assert!(
        scan.warnings
            .iter()
            .any(|w| w.as_str() == "registry_is_symlink"),
        "{:?}",
        scan.warnings
    );
}

#[test]
fn keys_heartbeats_and_temporary_files_are_never_listed() {
    let home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    record(&home, child.pid(), "s", None, None);
    // Secrets, markers and temporary files are not records: never listed, never opened.
    let key = format!("{}.{}.key", child.pid(), "ab".repeat(32));
    home.write_entry(&key, "secret").unwrap();
    home.write_entry(".fleetview-heartbeat", "").unwrap();
    home.write_entry(&format!("{}.json.tmp", child.pid()), "{")
        .unwrap();
    let names: Vec<String> = verdicts(&home).into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, [format!("{}.json", child.pid())]);
}

/// Each of a scan's `sessions` is what `Discovery::entry` gives for its pid alone.
fn assert_each_agrees_judged_alone(
    discovery: &Discovery<OsProcessTable, OsRegistryFs>,
    home: &ClaudeHome,
    sessions: &[Entry],
    scope: Scope,
) {
    for session in sessions {
        let alone = discovery.entry(home, session.pid.unwrap(), scope).unwrap();
        assert_eq!(
            alone.as_ref(),
            Some(session),
            "an entry judged alone agrees"
        );
    }
}

#[test]
fn a_registry_big_enough_for_a_census_is_judged_exactly_as_signalling_each_pid() {
    use claude_peer_probe::{Counting, ProcessTable};
    let home = TempHome::new().unwrap();
    let live = Sleeper::spawn().unwrap();
    record(&home, live.pid(), "live", None, None);
    let zombie = Zombie::spawn().unwrap();
    record(&home, zombie.pid(), "zombie", Some("1"), None);
    let thread = ParkedThread::spawn().unwrap();
    thread_record(&home, &thread);
    let tid = thread.tid();
    let reaped = reaped_pid().unwrap();
    record(&home, reaped, "reaped", Some("1"), None);
    // Leftovers of pids that run nowhere (above any pid_max), four times the processes.
    let processes = fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .parse::<u32>()
                .is_ok()
        })
        .count();
    let leftovers = 4 * processes + 1100;
    for i in 0..leftovers {
        let pid = 4_194_305 + u32::try_from(i).unwrap();
        home.write_record(pid, format!(r#"{{"pid":{pid},"sessionId":"d"}}"#))
            .unwrap();
    }
    let table = OsProcessTable::new();
    if table
        .census(leftovers, Counting::ProcessesAndThreads)
        .is_none()
        || table.census(leftovers, Counting::Processes).is_none()
    {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
        assert!(
            mountinfo.contains("hidepid="),
            "no census although /proc hides nothing"
        );
    }

    let discovery = Discovery::os();
    let scan = discovery.scan(home.claude(), Scope::All).unwrap();
    let verdict = |pid: u32| {
        let session = scan
            .entries
            .iter()
            .find(|s| s.pid.unwrap().get() == pid)
            .unwrap();
        (
            session.verdict.liveness,
            session.verdict.reason.clone().unwrap_or_default(),
        )
    };
    assert_eq!(verdict(live.pid()).0, Liveness::Live);
    let (zombie_is, why) = verdict(zombie.pid());
    assert_eq!(zombie_is, Liveness::Gone, "{why}");
    assert!(why.contains("zombie"), "{why}");
    let (thread_is, why) = verdict(tid);
    assert_eq!(thread_is, Liveness::Recycled, "{why}");
    assert!(why.contains("thread"), "{why}");
    assert_eq!(verdict(reaped).0, Liveness::Gone);
    assert_each_agrees_judged_alone(&discovery, home.claude(), &scan.entries, Scope::All);
    // A live-only scan counts processes only: the thread's record is left out as the
    // full scan's `recycled` verdict says it must be, and nothing else changes.
    let live_only = discovery.scan(home.claude(), Scope::Live).unwrap();
    let live_part: Vec<_> = scan.entries.iter().filter(|s| s.is_live()).collect();
    assert_eq!(live_only.entries.iter().collect::<Vec<_>>(), live_part);
    assert_eq!(live_only.entries.len(), 1);
    drop(thread);
    drop(zombie);
}

#[test]
fn hundreds_of_live_sessions_among_leftovers_are_judged_across_threads_as_each_alone() {
    use claude_peer_testkit::process::Children;
    use claude_peer_testkit::registry::{Machine, Registry};
    let machine = Machine::learn();
    let children = Children::spawn(300).unwrap();
    // Enough leftovers that a live scan learns the pids from one listing of /proc.
    let registry = Registry::generate(&machine, 1200, &children).unwrap();
    let discovery = Discovery::os();
    let live = discovery.scan(&registry.home, Scope::Live).unwrap();
    let mut pids = children.pids();
    pids.sort_unstable();
    let listed: Vec<u32> = live.entries.iter().map(|s| s.pid.unwrap().get()).collect();
    assert_eq!(listed, pids, "every live child, in pid order");
    assert_each_agrees_judged_alone(&discovery, &registry.home, &live.entries, Scope::Live);
    let full = discovery.scan(&registry.home, Scope::All).unwrap();
    assert_eq!(full.entries.len(), 1500);
    let live_part: Vec<Entry> = full.entries.into_iter().filter(Entry::is_live).collect();
    assert_eq!(live.entries, live_part);
}

#[test]
fn a_record_grown_past_the_limit_before_the_hand_over_is_not_live_as_too_large() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let socket = home.socket(child.pid()).unwrap();
    let file = record(&home, child.pid(), "growing", None, Some(&socket));
    let discovery = Discovery::os();
    let resolved = discovery
        .resolve_live_session(home.claude(), "growing")
        .unwrap();
    // Still valid JSON naming the same session, but over Claude Code's 262,144 bytes.
    let mut body: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    body["padding"] = "x".repeat(300_000).into();
    fs::write(&file, body.to_string()).unwrap();
    let refusal = discovery.confirm(home.claude(), &resolved).unwrap_err();
    let refusal = refusal.refusal().unwrap();
    assert_eq!(refusal.kind, RefusalKind::NotLive);
    assert!(
        refusal.message.contains("larger than 262144 bytes"),
        "{}",
        refusal.message
    );
}
