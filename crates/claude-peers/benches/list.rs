//! `claude-peers list --json` against the library scan it is built on, side by side.
//!
//! A 10,000-record registry with 1% live (real child processes). The command pays for
//! a process start, the scan, and writing JSON for each live session; the library scan
//! is measured in-process with a fresh `Discovery`, as the command builds one. Target:
//! the same ballpark.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

use claude_peer_resolve::{Discovery, Scope};
use claude_peer_testkit::registry::{Children, Machine, Registry};

const RECORDS: usize = 10_000;
const LIVE: usize = 100;
const ROUNDS: usize = 15;

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    let machine = Machine::learn();
    let children = Children::spawn(LIVE).unwrap();
    let registry = Registry::generate(&machine, RECORDS - LIVE, &children).unwrap();
    let command = || {
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(registry.home.root())
            .args(["--json", "list"])
            .output()
            .unwrap();
        assert!(out.status.success());
        let sessions: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        sessions.as_array().map_or(0, Vec::len)
    };
    let library = || {
        Discovery::os()
            .scan(&registry.home, Scope::Live)
            .unwrap()
            .sessions
            .len()
    };
    assert_eq!(command(), LIVE, "the command lists every live child");
    assert_eq!(library(), LIVE, "the library finds every live child");

    let (mut cli, mut lib) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let start = Instant::now();
        command();
        cli.push(start.elapsed());
        let start = Instant::now();
        library();
        lib.push(start.elapsed());
    }
    let (cli, lib) = (median(&mut cli), median(&mut lib));
    println!("{RECORDS} records, {LIVE} live; median of {ROUNDS} interleaved rounds");
    println!(
        "{:<42} {:>10}",
        "library scan (Scope::Live, fresh Discovery)",
        format!("{lib:.2?}")
    );
    println!(
        "{:<42} {:>10}",
        "claude-peers --json list (whole process)",
        format!("{cli:.2?}")
    );
    println!(
        "ratio command / library: {:.2}x",
        cli.as_secs_f64() / lib.as_secs_f64()
    );
}
