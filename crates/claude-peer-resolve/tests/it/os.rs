//! The real OS: live children, zombies, threads, reaped and reused pids, and every
//! kind of file a registry directory can hold.

use std::fs::{self, File};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, SystemTime};

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_registry::{ClaudeHome, Liveness};
use claude_peer_resolve::{Discovery, RefusalKind, Scope, Session, Warning};
use rustix::process::{WaitId, WaitIdOptions};

/// A child process killed and reaped when the test ends, pass or fail.
struct Sleeper(Child);

impl Sleeper {
    fn spawn() -> Self {
        Self(
            Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("spawn sleep"),
        )
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Field 22 of `/proc/<pid>/stat` (or of a thread's stat file), read independently of the probe.
fn start_token(stat: &Path) -> String {
    let text = fs::read_to_string(stat).unwrap();
    let after = &text[text.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().to_owned()
}

fn token_of(pid: u32) -> String {
    start_token(Path::new(&format!("/proc/{pid}/stat")))
}

struct Home {
    _dir: tempfile::TempDir,
    home: ClaudeHome,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = ClaudeHome::new(dir.path().join(".claude"));
        fs::create_dir_all(home.sessions_dir()).unwrap();
        fs::set_permissions(home.sessions_dir(), fs::Permissions::from_mode(0o700)).unwrap();
        Self { _dir: dir, home }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.home.sessions_dir().join(name)
    }

    fn write(&self, pid: u32, body: &str) -> PathBuf {
        let path = self.path(&format!("{pid}.json"));
        fs::write(&path, body).unwrap();
        path
    }

    /// A record of the live `pid`, with its true start token unless `token` says otherwise.
    fn record(
        &self,
        pid: u32,
        session: &str,
        token: Option<&str>,
        socket: Option<&Path>,
    ) -> PathBuf {
        let token = token.map_or_else(|| token_of(pid), str::to_owned);
        let mut body = serde_json::json!({ "pid": pid, "sessionId": session, "procStart": token, "name": format!("s-{pid}") });
        if let Some(socket) = socket {
            body["messagingSocketPath"] = socket.to_str().unwrap().into();
        }
        self.write(pid, &body.to_string())
    }

    /// A thread of this test process, parked until `done` is sent, and a record of its
    /// id with its true start token: its id, `done`, and the thread to join.
    fn thread_record(
        &self,
    ) -> (
        u32,
        std::sync::mpsc::Sender<()>,
        std::thread::JoinHandle<()>,
    ) {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            tx.send(
                rustix::thread::gettid()
                    .as_raw_nonzero()
                    .get()
                    .cast_unsigned(),
            )
            .unwrap();
            let _ = done_rx.recv();
        });
        let tid = rx.recv().unwrap();
        let token = start_token(Path::new(&format!("/proc/self/task/{tid}/stat")));
        self.record(tid, "thread", Some(&token), None);
        (tid, done_tx, thread)
    }

    fn verdicts(&self) -> Vec<(String, Liveness, String)> {
        Discovery::os()
            .scan(&self.home, Scope::All)
            .unwrap()
            .sessions
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

    fn verdict_of(&self, name: &str) -> (Liveness, String) {
        let (_, liveness, reason) = self
            .verdicts()
            .into_iter()
            .find(|(n, _, _)| n == name)
            .unwrap_or_else(|| panic!("{name} is in the scan"));
        (liveness, reason)
    }

    fn live_pids(&self) -> Vec<u32> {
        Discovery::os()
            .live(&self.home)
            .unwrap()
            .sessions
            .iter()
            .map(|s| s.pid.get())
            .collect()
    }
}

#[test]
fn a_live_child_with_its_start_token_and_socket_is_live_and_addressable() {
    let home = Home::new();
    let child = Sleeper::spawn();
    let socket_dir = tempfile::tempdir().unwrap();
    let socket = socket_dir.path().join("s.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    home.record(child.pid(), "live-session", None, Some(&socket));
    let scan = Discovery::os().scan(&home.home, Scope::Live).unwrap();
    assert_eq!(scan.sessions.len(), 1);
    assert!(
        scan.sessions[0].addressability.is_addressable(),
        "{:?}",
        scan.sessions[0].addressability
    );
    assert!(scan.warnings.is_empty(), "{:?}", scan.warnings);
    let resolved = Discovery::os()
        .resolve_live_session(&home.home, "live-session")
        .unwrap();
    assert_eq!(resolved.pid.get(), child.pid());
}

#[test]
fn resolution_reads_the_registry_afresh_so_a_killed_session_is_refused_at_once() {
    let home = Home::new();
    let socket_dir = tempfile::tempdir().unwrap();
    let socket = socket_dir.path().join("s.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let discovery = Discovery::os();
    let mut child = Sleeper::spawn();
    home.record(child.pid(), "short-lived", None, Some(&socket));
    assert!(
        discovery
            .resolve_live_session(&home.home, "short-lived")
            .is_ok()
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let err = discovery
        .resolve_live_session(&home.home, "short-lived")
        .unwrap_err();
    assert_eq!(err.refusal().map(|r| r.kind), Some(RefusalKind::NotLive));
}

#[test]
fn a_zombie_child_is_gone() {
    let home = Home::new();
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    // Wait for the exit without reaping: the pid stays a zombie until `wait` below.
    rustix::process::waitid(
        WaitId::Pid(rustix::process::Pid::from_raw(pid.cast_signed()).unwrap()),
        WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
    )
    .unwrap();
    home.write(pid, &format!(r#"{{"pid":{pid},"sessionId":"z"}}"#));
    let (liveness, reason) = home.verdict_of(&format!("{pid}.json"));
    child.wait().unwrap();
    assert_eq!(liveness, Liveness::Gone, "{reason}");
    assert!(reason.contains("zombie"), "{reason}");
}

#[test]
fn a_thread_id_of_a_live_process_is_recycled() {
    let home = Home::new();
    let (tid, done_tx, thread) = home.thread_record();
    let (liveness, reason) = home.verdict_of(&format!("{tid}.json"));
    done_tx.send(()).unwrap();
    thread.join().unwrap();
    assert_eq!(liveness, Liveness::Recycled, "{reason}");
    assert!(reason.contains("thread"), "{reason}");
}

#[test]
fn a_reaped_pid_is_gone_and_a_live_pid_with_another_start_token_is_recycled() {
    let home = Home::new();
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    home.write(
        dead_pid,
        &format!(r#"{{"pid":{dead_pid},"sessionId":"d"}}"#),
    );
    let reused = Sleeper::spawn();
    home.record(reused.pid(), "old-owner", Some("1"), None);
    assert_eq!(
        home.verdict_of(&format!("{dead_pid}.json")).0,
        Liveness::Gone
    );
    assert_eq!(
        home.verdict_of(&format!("{}.json", reused.pid())).0,
        Liveness::Recycled
    );
    assert!(home.live_pids().is_empty());
}

#[test]
fn fifos_device_links_and_huge_files_are_invalid_and_never_hang_the_scan() {
    let home = Home::new();
    let child = Sleeper::spawn();
    let pid = child.pid();
    let fifo = home.path(&format!("{pid}.json"));
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    symlink("/dev/zero", home.path("3.json")).unwrap();
    File::create(home.path("4.json"))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let verdicts = home.verdicts();
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
    let home = Home::new();
    let child = Sleeper::spawn();
    File::create(home.path(&format!("{}.json", child.pid())))
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let (liveness, reason) = home.verdict_of(&format!("{}.json", child.pid()));
    assert_eq!(liveness, Liveness::Invalid);
    assert!(reason.contains("larger than 262144 bytes"), "{reason}");
}

#[test]
fn a_record_owned_by_another_uid_is_invalid() {
    let home = Home::new();
    let child = Sleeper::spawn();
    let path = home.record(child.pid(), "planted", None, None);
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&path, Some(4242), None).unwrap();
        let (liveness, reason) = home.verdict_of(&format!("{}.json", child.pid()));
        assert_eq!(liveness, Liveness::Invalid);
        assert!(reason.contains("4242"), "{reason}");
    } else {
        // Without root no other uid's file can be made; the same-owner record is live.
        assert_eq!(
            home.verdict_of(&format!("{}.json", child.pid())).0,
            Liveness::Live
        );
    }
}

#[test]
fn an_empty_record_of_a_live_pid_is_unreadable_once_the_reread_budget_is_spent() {
    let home = Home::new();
    let child = Sleeper::spawn();
    home.write(child.pid(), "");
    let (liveness, reason) = home.verdict_of(&format!("{}.json", child.pid()));
    assert_eq!(liveness, Liveness::Unreadable, "{reason}");
}

#[test]
fn an_unparseable_record_older_than_its_live_pid_was_left_by_the_previous_owner() {
    let home = Home::new();
    let child = Sleeper::spawn();
    let path = home.write(child.pid(), r#"{"pid":1,"sessionId":"#);
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    let (liveness, reason) = home.verdict_of(&format!("{}.json", child.pid()));
    assert_eq!(liveness, Liveness::Gone, "{reason}");
    assert!(reason.contains("previous owner"), "{reason}");
}

#[test]
fn a_missing_registry_is_an_empty_scan_and_a_loose_one_is_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ClaudeHome::new(dir.path().join("nowhere"));
    let scan = Discovery::os().scan(&missing, Scope::All).unwrap();
    assert!(scan.sessions.is_empty() && scan.warnings.is_empty());

    let home = Home::new();
    fs::set_permissions(home.home.sessions_dir(), fs::Permissions::from_mode(0o777)).unwrap();
    let scan = Discovery::os().scan(&home.home, Scope::Live).unwrap();
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
    symlink(home.home.sessions_dir(), linked_home.sessions_dir()).unwrap();
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
    let home = Home::new();
    let child = Sleeper::spawn();
    home.record(child.pid(), "s", None, None);
    // Secrets, markers and temporary files are not records: never listed, never opened.
    let key = home.path(&format!("{}.{}.key", child.pid(), "ab".repeat(32)));
    fs::write(&key, "secret").unwrap();
    fs::write(home.path(".fleetview-heartbeat"), "").unwrap();
    fs::write(home.path(&format!("{}.json.tmp", child.pid())), "{").unwrap();
    let names: Vec<String> = home.verdicts().into_iter().map(|(n, _, _)| n).collect();
    assert_eq!(names, [format!("{}.json", child.pid())]);
}

/// Each of a scan's `sessions` is what `Discovery::entry` gives for its pid alone.
fn assert_each_agrees_judged_alone(
    discovery: &Discovery<OsProcessTable, OsRegistryFs>,
    home: &ClaudeHome,
    sessions: &[Session],
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
    let home = Home::new();
    let live = Sleeper::spawn();
    home.record(live.pid(), "live", None, None);
    let mut zombie = Command::new("true").spawn().unwrap();
    rustix::process::waitid(
        WaitId::Pid(rustix::process::Pid::from_raw(zombie.id().cast_signed()).unwrap()),
        WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
    )
    .unwrap();
    home.record(zombie.id(), "zombie", Some("1"), None);
    let (tid, done_tx, thread) = home.thread_record();
    let mut reaped = Command::new("true").spawn().unwrap();
    reaped.wait().unwrap();
    home.record(reaped.id(), "reaped", Some("1"), None);
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
        home.write(pid, &format!(r#"{{"pid":{pid},"sessionId":"d"}}"#));
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
    let scan = discovery.scan(&home.home, Scope::All).unwrap();
    let verdict = |pid: u32| {
        let session = scan
            .sessions
            .iter()
            .find(|s| s.pid.unwrap().get() == pid)
            .unwrap();
        (
            session.verdict.liveness,
            session.verdict.reason.clone().unwrap_or_default(),
        )
    };
    assert_eq!(verdict(live.pid()).0, Liveness::Live);
    let (zombie_is, why) = verdict(zombie.id());
    assert_eq!(zombie_is, Liveness::Gone, "{why}");
    assert!(why.contains("zombie"), "{why}");
    let (thread_is, why) = verdict(tid);
    assert_eq!(thread_is, Liveness::Recycled, "{why}");
    assert!(why.contains("thread"), "{why}");
    assert_eq!(verdict(reaped.id()).0, Liveness::Gone);
    assert_each_agrees_judged_alone(&discovery, &home.home, &scan.sessions, Scope::All);
    // A live-only scan counts processes only: the thread's record is left out as the
    // full scan's `recycled` verdict says it must be, and nothing else changes.
    let live_only = discovery.scan(&home.home, Scope::Live).unwrap();
    let live_part: Vec<_> = scan.sessions.iter().filter(|s| s.is_live()).collect();
    assert_eq!(live_only.sessions.iter().collect::<Vec<_>>(), live_part);
    assert_eq!(live_only.sessions.len(), 1);
    done_tx.send(()).unwrap();
    thread.join().unwrap();
    zombie.wait().unwrap();
}

#[test]
fn hundreds_of_live_sessions_among_leftovers_are_judged_across_threads_as_each_alone() {
    use claude_peer_testkit::registry::{Children, Machine, Registry};
    let machine = Machine::learn();
    let children = Children::spawn(300).unwrap();
    // Enough leftovers that a live scan learns the pids from one listing of /proc.
    let registry = Registry::generate(&machine, 1200, &children).unwrap();
    let discovery = Discovery::os();
    let live = discovery.scan(&registry.home, Scope::Live).unwrap();
    let mut pids = children.pids();
    pids.sort_unstable();
    let listed: Vec<u32> = live.sessions.iter().map(|s| s.pid.unwrap().get()).collect();
    assert_eq!(listed, pids, "every live child, in pid order");
    assert_each_agrees_judged_alone(&discovery, &registry.home, &live.sessions, Scope::Live);
    let full = discovery.scan(&registry.home, Scope::All).unwrap();
    assert_eq!(full.sessions.len(), 1500);
    let live_part: Vec<Session> = full.sessions.into_iter().filter(Session::is_live).collect();
    assert_eq!(live.sessions, live_part);
}

#[test]
fn a_record_grown_past_the_limit_before_the_hand_over_is_not_live_as_too_large() {
    let home = Home::new();
    let child = Sleeper::spawn();
    let socket_dir = tempfile::tempdir().unwrap();
    let socket = socket_dir.path().join("s.sock");
    let _listener = UnixListener::bind(&socket).unwrap();
    let file = home.record(child.pid(), "growing", None, Some(&socket));
    let discovery = Discovery::os();
    let resolved = discovery
        .resolve_live_session(&home.home, "growing")
        .unwrap();
    // Still valid JSON naming the same session, but over Claude Code's 262,144 bytes.
    let mut body: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    body["padding"] = "x".repeat(300_000).into();
    fs::write(&file, body.to_string()).unwrap();
    let refusal = discovery.confirm(&home.home, &resolved).unwrap_err();
    let refusal = refusal.refusal().unwrap();
    assert_eq!(refusal.kind, RefusalKind::NotLive);
    assert!(
        refusal.message.contains("larger than 262144 bytes"),
        "{}",
        refusal.message
    );
}
