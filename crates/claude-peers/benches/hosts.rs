//! Other machines over loopback sshd servers (`testkit::sshd`), side by side in one run:
//!
//! 1. `list` of this machine (the baseline), a warm `list --host H` (its ssh connection
//!    reused) for each of 4 hosts, and `list` over all 4 at once. Targets: the 4 hosts
//!    at most 1.3x the slowest single host (asked in parallel, not one after another);
//!    a warm single host at most 3x the local `list`.
//! 2. `watch --host H`: a record rewritten on the host, timed until its `changed` event
//!    arrives here. Target: p99 within 150 ms.
//!
//! Each host's registry holds 8 live sessions (sleeping children).
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_testkit::lines::Lines;
use claude_peer_testkit::process::{Children, proc_start};
use claude_peer_testkit::sshd::{Machines, Programs};

const HOSTS: [&str; 4] = ["h1", "h2", "h3", "h4"];
const SESSIONS: usize = 8;
const RUNS: usize = 40;
const CHANGES: usize = 100;

fn body(pid: u32, token: &str, status: &str, n: usize) -> String {
    serde_json::json!({
        "pid": pid, "sessionId": format!("bench-{pid}"), "cwd": "/tmp/bench", "procStart": token,
        "name": format!("bench-{pid}"), "status": status, "statusUpdatedAt": n, "updatedAt": n,
    })
    .to_string()
}

/// A Claude home with `SESSIONS` live sessions of `children`.
fn home(dir: &Path, children: &Children) -> PathBuf {
    let sessions = dir.join("sessions");
    fs::create_dir_all(&sessions).unwrap();
    for pid in children.pids() {
        let token = proc_start(pid).unwrap();
        fs::write(
            sessions.join(format!("{pid}.json")),
            body(pid, &token, "idle", 1),
        )
        .unwrap();
    }
    dir.to_owned()
}

fn peers(ssh: &Path, local: &Path, state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(local)
        .args(args)
        .env("CLAUDE_PEERS_SSH", ssh)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The median of `RUNS` runs of `args`, each checked to list `expect` sessions.
fn median(ssh: &Path, local: &Path, state: &Path, args: &[&str], expect: usize) -> Duration {
    let mut times: Vec<Duration> = (0..RUNS)
        .map(|_| {
            let started = Instant::now();
            let out = peers(ssh, local, state, args).output().unwrap();
            let took = started.elapsed();
            assert!(
                out.status.success(),
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(listed.as_array().unwrap().len(), expect, "{args:?}");
            took
        })
        .collect();
    times.sort_unstable();
    times[RUNS / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<Children> = HOSTS
        .iter()
        .map(|_| Children::spawn(SESSIONS).unwrap())
        .collect();
    let homes: Vec<PathBuf> = HOSTS
        .iter()
        .zip(&children)
        .map(|(name, children)| home(&dir.path().join(name), children))
        .collect();
    let local_children = Children::spawn(SESSIONS).unwrap();
    let local = home(&dir.path().join("local"), &local_children);
    let state = dir.path().join("state");
    let named: Vec<(&str, &Path)> = HOSTS
        .iter()
        .copied()
        .zip(homes.iter().map(PathBuf::as_path))
        .collect();
    let machines = Machines::start(
        &named,
        &Programs {
            claude_peers: Some(PathBuf::from(env!("CARGO_BIN_EXE_claude-peers"))),
            claude: PathBuf::from("/bin/false"),
        },
    )
    .unwrap();
    let ssh = machines.ssh();

    let base = median(&ssh, &local, &state, &["--json", "list"], SESSIONS);
    println!("list (this machine): {:.1} ms (the baseline)", ms(base));
    let (mut slowest, mut serial) = (Duration::ZERO, Duration::ZERO);
    for host in HOSTS {
        let args = ["--json", "--host", host, "list"];
        // The first run opens the host's connection; the median is of warm runs.
        let _ = peers(&ssh, &local, &state, &args).output().unwrap();
        let warm = median(&ssh, &local, &state, &args, SESSIONS);
        slowest = slowest.max(warm);
        serial += warm;
        println!(
            "list --host {host} (warm): {:.1} ms = {:.2}x the local list (target 3x)",
            ms(warm),
            warm.as_secs_f64() / base.as_secs_f64()
        );
    }
    let mut all = vec!["--json"];
    for host in HOSTS {
        all.extend(["--host", host]);
    }
    all.push("list");
    let four = median(&ssh, &local, &state, &all, SESSIONS * HOSTS.len());
    println!(
        "list over {} hosts: {:.1} ms = {:.2}x the slowest single host (target 1.3x); one after another they take {:.1} ms",
        HOSTS.len(),
        ms(four),
        four.as_secs_f64() / slowest.as_secs_f64(),
        ms(serial)
    );

    let latencies = watch_latencies(&ssh, &local, &state, &homes[0], &children[0]);
    // The q-th of 100 quantiles.
    let p = |q: usize| ms(latencies[(latencies.len() * q / 100).min(latencies.len() - 1)]);
    println!(
        "watch --host {}: record rewritten there -> event here: p50 {:.1} ms, p99 {:.1} ms (target p99 150 ms)",
        HOSTS[0],
        p(50),
        p(99)
    );
}

/// Rewrites one of `home`'s records `CHANGES` times and times each until `watch --host`
/// reports it.
fn watch_latencies(
    ssh: &Path,
    local: &Path,
    state: &Path,
    home: &Path,
    children: &Children,
) -> Vec<Duration> {
    let mut watch = peers(ssh, local, state, &["--json", "--host", HOSTS[0], "watch"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = Lines::stdout(&mut watch).unwrap();
    let pid = children.pids()[0];
    let token = proc_start(pid).unwrap();
    let file = home.join("sessions").join(format!("{pid}.json"));
    let wait_for = |n: usize| loop {
        let (at, line) = lines
            .next_timed(Duration::from_secs(20))
            .expect("watch answers");
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        if event["session"]["pid"] == pid && event["session"]["status_updated_at_ms"] == n {
            return at;
        }
    };
    wait_for(1);
    let mut latencies = Vec::with_capacity(CHANGES);
    for n in 2..CHANGES + 2 {
        thread::sleep(Duration::from_millis(20));
        let status = if n % 2 == 0 { "busy" } else { "idle" };
        let written = Instant::now();
        fs::write(&file, body(pid, &token, status, n)).unwrap();
        latencies.push(wait_for(n).saturating_duration_since(written));
    }
    let _ = watch.kill();
    let _ = watch.wait();
    latencies.sort_unstable();
    latencies
}
