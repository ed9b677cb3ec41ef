//! The post office as whole processes: `send --queue` until it returns with a post
//! office running, side by side with `list --json` (the same binary doing the least a
//! command does), and a post office with nothing to do: its CPU and memory.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/it/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claude_peer_post::Client;
use claude_peer_post::protocol::Request;

use receiver::{claude, wait_for};

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

fn main() {
    let home = tempfile::tempdir().unwrap();
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

    let mut queued = Vec::new();
    let mut listed = Vec::new();
    for round in 0..ROUNDS {
        let mut send = command(home.path(), state.path());
        let text = format!("message {round}");
        send.args(["send", "--queue", "--message", &text, "reviewer-not-here"]);
        queued.push(timed(send));
        let mut list = command(home.path(), state.path());
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
    let before = cpu(serve.id());
    std::thread::sleep(IDLE_FOR);
    let used = cpu(serve.id()).saturating_sub(before);
    println!(
        "a post office with {ROUNDS} waiting messages and nothing to do, over {} s: CPU {} ms ({:.3}% of a core), RSS {} KiB (target: at most 0.5% and 32 MiB)",
        IDLE_FOR.as_secs(),
        used.as_millis(),
        used.as_secs_f64() / IDLE_FOR.as_secs_f64() * 100.0,
        rss_kib(serve.id()),
    );
    let _ = serve.kill();
    let _ = serve.wait();
}
