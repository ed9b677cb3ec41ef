//! `claude-peers send` through Claude Code as a whole process, side by side with a bare
//! `claude -p` run of the same sender, and with the checks alone (a relay program that
//! confirms at once): where the time of a send goes.
//!
//! Receivers are real interactive Claude Code sessions in tmux (accept and hold), their
//! model a local fake; the sender is the pinned Claude Code `cargo xtask bench` installs.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/bare.rs"]
mod bare;
#[path = "../tests/it/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_peer_testkit::process::shell_script;
use serde_json::json;

use bare::{bare_command, bare_sender};
use receiver::{Receiver, claude, prepare_home};

const ROUNDS: usize = 7;

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn timed(mut command: Command) -> Duration {
    let started = Instant::now();
    let out = command.stdin(Stdio::null()).output().unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    took
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    let accepting = Receiver::start(Some("accept"), &[]);
    let holding = Receiver::start(Some("hold"), &[]);
    let work = tempfile::tempdir().unwrap();
    let claude = claude();
    let relay = shell_script(
        work.path().join("relay.sh"),
        "cat >/dev/null\necho '{\"sent\":true}'",
    )
    .unwrap();

    let send = |receiver: &Receiver, extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
        command
            .arg("--home")
            .arg(receiver.home.path())
            .args(["--json", "send", &receiver.session_id, "--message", "bench"])
            .arg("--managed-settings")
            .arg(work.path().join("none.json"))
            .args(extra)
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", work.path())
            .env("XDG_STATE_HOME", work.path());
        command
    };
    // Three idle sessions of one home, for a broadcast beside a single send.
    let fleet_home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        fleet_home.path(),
        &["a", "b", "c"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let fleet: Vec<Receiver> = ["a", "b", "c"]
        .iter()
        .map(|cwd| Receiver::start_in(&fleet_home, cwd, &[]))
        .collect();
    let to_fleet = |targets: &[&Receiver]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
        command
            .arg("--home")
            .arg(fleet_home.path())
            .args(["--json", "send", "--message", "bench", "--claude"])
            .arg(&claude)
            .args(targets.iter().map(|r| r.session_id.as_str()))
            .arg("--managed-settings")
            .arg(work.path().join("none.json"))
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", work.path())
            .env("XDG_STATE_HOME", work.path());
        command
    };
    let (model, bare_home) = bare_sender(work.path(), accepting.socket.clone());
    let bare = || bare_command(&claude, &bare_home, &model, work.path());

    let claude_flag = ["--claude", claude.to_str().unwrap()];
    let relay_args = ["--", relay.to_str().unwrap()];
    let mut checks = Vec::new();
    let mut bares = Vec::new();
    let mut held = Vec::new();
    let mut accepted = Vec::new();
    let mut singles = Vec::new();
    let mut broadcasts = Vec::new();
    for round in 0..ROUNDS {
        checks.push(timed(send(&accepting, &relay_args)));
        bares.push(timed(bare()));
        held.push(timed(send(&holding, &claude_flag)));
        accepted.push(timed(send(&accepting, &claude_flag)));
        singles.push(timed(to_fleet(&[&fleet[round % 3]])));
        broadcasts.push(timed(to_fleet(&fleet.iter().collect::<Vec<_>>())));
    }
    let [checks, bare, held, accepted, single, broadcast] = [
        &mut checks,
        &mut bares,
        &mut held,
        &mut accepted,
        &mut singles,
        &mut broadcasts,
    ]
    .map(|times| median(times));
    println!("send, {ROUNDS} interleaved rounds, whole processes (medians):");
    println!("  checks alone (resolve, policy, confirm; relay program)  {checks:>10.1?}");
    println!("  bare `claude -p` sending the same message               {bare:>10.1?}");
    println!(
        "  claude-peers send, receiver holds (`held`)              {held:>10.1?}  ({:.2}x bare; target 1.3x)",
        held.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "  claude-peers send, idle receiver accepts (`read`)       {accepted:>10.1?}  ({:.2}x bare; target 1.3x)",
        accepted.as_secs_f64() / bare.as_secs_f64()
    );
    println!(
        "  claude-peers send to 3 idle sessions (one sender)       {broadcast:>10.1?}  ({:.2}x one send of {single:.1?}; target 2x)",
        broadcast.as_secs_f64() / single.as_secs_f64()
    );
    println!(
        "  where the time goes: held - bare = {:.1?}, read - bare = {:.1?} (resolution, hooks, and the receiver writing its transcript)",
        held.saturating_sub(bare),
        accepted.saturating_sub(bare),
    );
}
