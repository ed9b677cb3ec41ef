//! `claude-peers list --json` against the library scan it is built on, side by side;
//! then the time and peak memory of `list --all --json` over big registries of leftovers.
//!
//! A 10,000-record registry with 1% live (real child processes). The command pays for
//! a process start, the scan, and writing JSON for each live session; the library scan
//! is measured in-process with a fresh `Discovery`, as the command builds one. Target:
//! the same ballpark.
//!
//! `list --all --json` prints every record as it is judged, so its memory must not grow
//! with the registry: peak RSS at most 32 MiB over 100,000 leftovers. Each run is a
//! fresh process; its peak is GNU time's maximum resident set size (`%M`).
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_peer_resolve::{Discovery, Scope};
use claude_peer_testkit::registry::{Children, Machine, Registry};

const RECORDS: usize = 10_000;
const LIVE: usize = 100;
const ROUNDS: usize = 15;
/// Leftover counts for `list --all --json`.
const ALL_SIZES: [usize; 2] = [10_000, 100_000];
const ALL_ROUNDS: usize = 5;
/// The most a `list --all --json` may hold resident, whatever the registry's size.
const PEAK_TARGET_KB: u64 = 32 * 1024;
/// Where GNU time usually is; without it the peak is not measured.
const GNU_TIME: &str = "/usr/bin/time";

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
    drop(registry);
    drop(children);
    list_all(&machine);
}

/// Time and peak memory of `list --all --json` over registries of leftovers only.
fn list_all(machine: &Machine) {
    let gnu_time = Path::new(GNU_TIME).is_file();
    println!(
        "\nlist --all --json over leftovers: median of {ALL_ROUNDS} fresh processes each; peak = max RSS (GNU time %M)"
    );
    println!(
        "{:<10} {:>10} {:>12} {:>10}  target: peak <= {} MiB",
        "records",
        "time",
        "peak RSS",
        "met",
        PEAK_TARGET_KB / 1024
    );
    for size in ALL_SIZES {
        let registry = Registry::generate(machine, size, &Children::spawn(0).unwrap()).unwrap();
        let args = |command: &mut Command| {
            command
                .arg("--home")
                .arg(registry.home.root())
                .args(["--json", "list", "--all"])
                .stdout(Stdio::piped());
        };
        let run = || {
            let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
            args(&mut command);
            let start = Instant::now();
            let out = command.output().unwrap();
            let elapsed = start.elapsed();
            assert!(out.status.success());
            let sessions: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                sessions.as_array().map(Vec::len),
                Some(size),
                "every record is listed"
            );
            elapsed
        };
        let mut times: Vec<Duration> = (0..ALL_ROUNDS).map(|_| run()).collect();
        let peak = gnu_time.then(|| {
            let mut peaks: Vec<u64> = (0..ALL_ROUNDS)
                .map(|_| {
                    let mut command = Command::new(GNU_TIME);
                    command
                        .args(["-f", "%M"])
                        .arg(env!("CARGO_BIN_EXE_claude-peers"));
                    args(&mut command);
                    let out = command.stderr(Stdio::piped()).output().unwrap();
                    assert!(out.status.success());
                    let stderr = String::from_utf8(out.stderr).unwrap();
                    stderr.lines().last().unwrap().trim().parse().unwrap()
                })
                .collect();
            peaks.sort_unstable();
            peaks[peaks.len() / 2]
        });
        let (peak, met) = peak.map_or_else(
            || (format!("no {GNU_TIME}"), "-"),
            |kb| {
                (
                    format!("{}.{} MiB", kb / 1024, kb % 1024 * 10 / 1024),
                    if kb <= PEAK_TARGET_KB { "yes" } else { "NO" },
                )
            },
        );
        println!(
            "{size:<10} {:>10} {peak:>12} {met:>10}",
            format!("{:.1?}", median(&mut times))
        );
    }
}
