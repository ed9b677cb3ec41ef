//! The post office as whole processes: `send --queue` until it returns with a post
//! office running, side by side with `list --json` (the same binary doing the least a
//! command does); a post office with nothing to do (its CPU and memory); `send` through
//! its warm sender side by side with a bare `claude -p`; a waiting message from its
//! receiver's record appearing to `delivered`; and 1,000 queued messages to 4 idle
//! receivers through one sender.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/bare.rs"]
mod bare;
#[path = "../tests/it/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use claude_peer_post::Client;
use claude_peer_post::protocol::{Record, Request};
use serde_json::json;

use bare::{bare_command, bare_sender};
use receiver::{Receiver, claude, prepare_home, wait_for};

const ROUNDS: usize = 50;
const IDLE_FOR: Duration = Duration::from_secs(30);

fn command(home: &Path, state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--json")
        .arg("--home")
        .arg(home)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_STATE_HOME", state.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    command
}

fn p50(mut times: Vec<Duration>) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn timed(mut command: Command) -> Duration {
    let started = Instant::now();
    let status = command.status().unwrap();
    let took = started.elapsed();
    assert!(status.success());
    took
}

/// User and system CPU time of `pid`, from `/proc/<pid>/stat` (clock ticks of 10 ms).
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    Duration::from_millis(ticks * 10)
}

/// The resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Receivers of the queue of 1,000, each idle in a folder of its own.
const FLEET: [&str; 4] = ["r0", "r1", "r2", "r3"];
/// Messages of the queue of 1,000.
const QUEUE: usize = 1_000;
/// Rounds of the record-to-delivered measure (each starts a receiver).
const LATE_ROUNDS: usize = 5;
/// Interleaved rounds of send through the post office and bare `claude -p`.
const SEND_ROUNDS: usize = 7;

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn ask(runtime: &Path, request: &Request) -> Option<Record> {
    let mut client = Client::connect(runtime).unwrap();
    client.request(request, |_| {}).unwrap().record
}

fn post_to(runtime: &Path, cwd: &Path, text: &str) -> Record {
    ask(
        runtime,
        &Request::Post {
            from: "harness".to_owned(),
            key: None,
            to_kind: "cwd".to_owned(),
            to: cwd.to_str().unwrap().to_owned(),
            text: text.to_owned(),
            expire_ms: 3_600_000,
            in_reply_to: None,
        },
    )
    .unwrap()
}

/// When the record was first `delivered`, in ms since the epoch.
fn delivered_at(record: &Record) -> Option<u64> {
    record
        .timeline
        .iter()
        .find(|change| change.state == "delivered")
        .map(|change| change.at_ms)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    // `cargo bench --bench post -- through` runs the phases whose names hold a word given.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let runs =
        |phase: &str| only.is_empty() || only.iter().any(|word| phase.contains(word.as_str()));
    let home = Arc::new(tempfile::tempdir().unwrap());
    let mut cwds = vec!["idle"];
    cwds.extend(FLEET);
    let late: Vec<String> = (0..LATE_ROUNDS)
        .map(|round| format!("late{round}"))
        .collect();
    cwds.extend(late.iter().map(String::as_str));
    prepare_home(
        home.path(),
        &cwds,
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = tempfile::tempdir().unwrap();
    std::fs::set_permissions(state.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let mut serve: Child = command(home.path(), state.path())
        .args(["serve", "--idle-exit", "0", "--claude"])
        .arg(claude())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runtime = state.path().join("cache/claude-peers");
    wait_for(Duration::from_secs(20), || {
        Client::connect(&runtime)
            .and_then(|mut c| c.request(&Request::Ping, |_| {}))
            .ok()
    })
    .expect("the post office answers");

    if runs("queue idle") {
        queue_and_idle(home.path(), state.path(), serve.id());
    }
    if runs("through") {
        through_post_office(&home, state.path());
    }
    if runs("late") {
        record_to_delivered(&home, &runtime, &late);
    }
    if runs("thousand") {
        a_thousand(&home, &runtime);
    }
    let _ = serve.kill();
    let _ = serve.wait();
}

/// `send --queue` and `list` side by side, then the post office idle with what they left
/// waiting.
fn queue_and_idle(home: &Path, state: &Path, serve: u32) {
    let mut queued = Vec::new();
    let mut listed = Vec::new();
    for round in 0..ROUNDS {
        let mut send = command(home, state);
        let text = format!("message {round}");
        send.args(["send", "--queue", "--message", &text, "reviewer-not-here"]);
        queued.push(timed(send));
        let mut list = command(home, state);
        list.arg("list");
        listed.push(timed(list));
    }
    println!(
        "send --queue until it returns, post office running ({ROUNDS} runs): p50 {:.1} ms; list --json p50 {:.1} ms (target: send --queue p50 within 30 ms)",
        p50(queued).as_secs_f64() * 1e3,
        p50(listed).as_secs_f64() * 1e3,
    );

    // Nothing to do but wait: the 50 messages above wait for a name that never appears.
    std::thread::sleep(Duration::from_secs(1));
    let before = cpu(serve);
    std::thread::sleep(IDLE_FOR);
    let used = cpu(serve).saturating_sub(before);
    println!(
        "a post office with {ROUNDS} waiting messages and nothing to do, over {} s: CPU {} ms ({:.3}% of a core), RSS {} KiB (target: at most 0.5% and 32 MiB)",
        IDLE_FOR.as_secs(),
        used.as_millis(),
        used.as_secs_f64() / IDLE_FOR.as_secs_f64() * 100.0,
        rss_kib(serve),
    );
}

/// `send` to an idle accepting receiver through the running post office's warm sender,
/// interleaved with a bare `claude -p` sending a message of the same length. Each text is
/// new: Claude Code drops a message identical to the one before from the same sender.
fn through_post_office(home: &Arc<tempfile::TempDir>, state: &Path) {
    let receiver = Receiver::start_in(home, "idle", &[]);
    let work = tempfile::tempdir().unwrap();
    let claude = claude();
    let (model, bare_home) = bare_sender(work.path(), receiver.socket.clone());
    let send = |text: &str| {
        let mut send = command(home.path(), state);
        send.args([
            "send",
            &receiver.session_id,
            "--from",
            "harness",
            "--message",
            text,
            "--claude",
        ])
        .arg(&claude);
        send
    };
    // The first send starts the warm sender.
    timed(send("warm"));
    let (mut through, mut bare) = (Vec::new(), Vec::new());
    for round in 0..SEND_ROUNDS {
        through.push(timed(send(&format!("bnch{round}"))));
        let mut bare_send = bare_command(&claude, &bare_home, &model, work.path());
        bare_send.stdout(Stdio::null()).stdin(Stdio::null());
        bare.push(timed(bare_send));
    }
    let (through, bare) = (p50(through), p50(bare));
    println!(
        "send to an idle accepting receiver through the running post office ({SEND_ROUNDS} interleaved rounds, medians): {:.1} ms; bare `claude -p` {:.1} ms: {:.2}x (target: at most 0.3x)",
        through.as_secs_f64() * 1e3,
        bare.as_secs_f64() * 1e3,
        through.as_secs_f64() / bare.as_secs_f64(),
    );
}

/// A message waiting for a directory's session, from that session's registry record
/// appearing to `delivered`, with the post office's sender warm.
fn record_to_delivered(home: &Arc<tempfile::TempDir>, runtime: &Path, late: &[String]) {
    let mut latencies = Vec::new();
    for cwd in late {
        let dir = home.path().join(cwd);
        let posted = post_to(runtime, &dir, &format!("waiting for {cwd}"));
        let sessions = home.path().join("sessions");
        let watched = dir.clone();
        // The moment a record naming the directory appears, seen every 2 ms.
        let seen = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                let found = std::fs::read_dir(&sessions)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|entry| {
                        std::fs::read(entry.path())
                            .ok()
                            .and_then(|bytes| {
                                serde_json::from_slice::<serde_json::Value>(&bytes).ok()
                            })
                            .is_some_and(|record| record["cwd"].as_str() == watched.to_str())
                    });
                if found {
                    return Some(now_ms());
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            None
        });
        let receiver = Receiver::start_in(home, cwd, &[]);
        let get = Request::Get {
            id: posted.id.clone(),
        };
        let delivered = wait_for(Duration::from_secs(60), || {
            ask(runtime, &get).as_ref().and_then(delivered_at)
        })
        .expect("delivered");
        let seen = seen.join().unwrap().expect("the record appeared");
        latencies.push(Duration::from_millis(delivered.saturating_sub(seen)));
        drop(receiver);
    }
    println!(
        "a waiting message, from its receiver's registry record appearing to delivered ({LATE_ROUNDS} receivers, warm sender): p50 {:.0} ms, each {:?} (target: p50 at most 1.0 s)",
        p50(latencies.clone()).as_secs_f64() * 1e3,
        latencies
            .iter()
            .map(Duration::as_millis)
            .collect::<Vec<_>>(),
    );
}

/// How many messages a receiver takes from one sender at once (Claude Code 2.1.332).
const RECEIVER_BURST: usize = 30;

/// 1,000 messages queued at once to 4 idle receivers, delivered through one sender.
fn a_thousand(home: &Arc<tempfile::TempDir>, runtime: &Path) {
    let fleet: Vec<Receiver> = FLEET
        .iter()
        .map(|cwd| Receiver::start_in(home, cwd, &[]))
        .collect();
    let dirs: Vec<PathBuf> = fleet.iter().map(|r| r.cwd.clone()).collect();
    let started = now_ms();
    let ids: Vec<String> = (0..QUEUE)
        .map(|i| {
            post_to(
                runtime,
                &dirs[i % FLEET.len()],
                &format!("one of a thousand: {i}"),
            )
            .id
        })
        .collect();
    let posted = now_ms();
    let open = || {
        let mut client = Client::connect(runtime).unwrap();
        let mut open = 0;
        client.request(&Request::Outbox, |_| open += 1).unwrap();
        open
    };
    wait_for(Duration::from_secs(900), || (open() == 0).then_some(())).expect("all delivered");
    let mut times: Vec<u64> = ids
        .iter()
        .filter_map(|id| delivered_at(&ask(runtime, &Request::Get { id: id.clone() })?))
        .collect();
    times.sort_unstable();
    let secs = |from: u64, to: u64| Duration::from_millis(to.saturating_sub(from)).as_secs_f64();
    let last = *times.last().unwrap();
    // Each receiver takes a burst of RECEIVER_BURST from one sender, then one every 2 s:
    // the burst shows the sender's own rate, the rest the receivers' pace.
    let burst = (RECEIVER_BURST * FLEET.len()).min(times.len());
    let burst_end = times[burst - 1];
    println!(
        "{QUEUE} queued messages to {} idle receivers through one sender: posted in {} ms, all delivered {:.1} s after the first was posted: {:.1} per second (target: at least 5); the first {burst} (the receivers' bursts) at {:.1} per second, the other {} at {:.1} per second (the receivers' pace: one every 2 s each, {:.1} per second in all)",
        FLEET.len(),
        posted - started,
        secs(started, last),
        f64::from(u32::try_from(QUEUE).unwrap()) / secs(started, last),
        f64::from(u32::try_from(burst).unwrap()) / secs(started, burst_end),
        times.len() - burst,
        f64::from(u32::try_from(times.len() - burst).unwrap()) / secs(burst_end, last),
        f64::from(u32::try_from(FLEET.len()).unwrap())
            / claude_peer_sender::RECEIVER_PACE.as_secs_f64(),
    );
    drop(fleet);
}
