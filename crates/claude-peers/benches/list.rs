//! `claude-peers list --json` against the library scan it is built on and against the
//! MCP server's `list_sessions`, side by side; then the time and peak memory of
//! `list --all --json` over big registries of leftovers.
//!
//! A 10,000-record registry with 1% live (real child processes). The command pays for
//! a process start, the scan, and writing JSON for each live session; the library scan
//! is measured in-process with a fresh `Discovery`, as the command builds one. The tool
//! call is measured end to end as an MCP client sees it (rmcp's client): the request to
//! a running `claude-peers mcp`, the scan, the JSON back and parsed; a fresh server adds
//! its start and the MCP handshake, which a client pays once per connection. Target:
//! the same ballpark.
//!
//! Whole processes against a naive reader written here (list the directory, read and
//! parse each `*.json` by its absolute path, `kill(pid, 0)`: this binary run again with
//! `--naive-reader`), the comparison point of the scan's speed targets: `claude-peers
//! --json list` at most 0.12x the naive reader's time on 10,000 records with 1% live,
//! at most 2.0x on 500 records all live. Fresh processes, interleaved, median of many.
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
use claude_peer_testkit::process::Children;
use claude_peer_testkit::registry::{Machine, Registry};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};

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

async fn connect(home: &Path) -> RunningService<RoleClient, ()> {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command.arg("--home").arg(home).arg("mcp");
    ().serve(TokioChildProcess::new(command).unwrap())
        .await
        .unwrap()
}

async fn list_sessions(client: &RunningService<RoleClient, ()>) -> usize {
    let result = client
        .call_tool(CallToolRequestParams::new("list_sessions"))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false));
    let structured = result.structured_content.unwrap();
    structured["sessions"].as_array().map_or(0, Vec::len)
}

/// The argument that makes this binary the naive reader of the registry that follows.
const NAIVE: &str = "--naive-reader";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    if let Some(at) = args.iter().position(|a| a == NAIVE) {
        naive_reader(Path::new(&args[at + 1]));
        return;
    }
    // `LIST_BENCH_ONLY=naive` runs only the comparison with the naive reader.
    if std::env::var("LIST_BENCH_ONLY").is_ok_and(|only| only == "naive") {
        against_naive(&Machine::learn());
        return;
    }
    let machine = Machine::learn();
    let children = Children::spawn(LIVE).unwrap();
    let registry = Registry::generate(&machine, RECORDS - LIVE, &children).unwrap();
    let home = registry.home.root();
    let command = || {
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(home)
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
            .entries
            .len()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = runtime.block_on(connect(home));
    let tool = || runtime.block_on(list_sessions(&client));
    let fresh_tool = || {
        runtime.block_on(async {
            let client = connect(home).await;
            let sessions = list_sessions(&client).await;
            client.cancel().await.unwrap();
            sessions
        })
    };
    let rows: [(&str, &dyn Fn() -> usize); 4] = [
        ("library scan (Scope::Live, fresh Discovery)", &library),
        ("claude-peers --json list (whole process)", &command),
        ("mcp list_sessions, running server (one call)", &tool),
        (
            "mcp list_sessions, fresh server (start, handshake, call)",
            &fresh_tool,
        ),
    ];
    for (what, run) in rows {
        assert_eq!(run(), LIVE, "{what} finds every live child");
    }

    let mut times = vec![Vec::new(); rows.len()];
    for _ in 0..ROUNDS {
        for ((_, run), times) in rows.iter().zip(&mut times) {
            let start = Instant::now();
            run();
            times.push(start.elapsed());
        }
    }
    let medians: Vec<Duration> = times.iter_mut().map(|t| median(t)).collect();
    println!("{RECORDS} records, {LIVE} live; median of {ROUNDS} interleaved rounds");
    for ((what, _), time) in rows.iter().zip(&medians) {
        println!("{what:<56} {:>10}", format!("{time:.2?}"));
    }
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!(
        "ratio command / library: {:.2}x; list_sessions / command: {:.2}x",
        ratio(medians[1], medians[0]),
        ratio(medians[2], medians[1])
    );
    drop(registry);
    drop(children);
    against_naive(&machine);
    list_all(&machine);
}

/// The naive reader: prints the pids of the `*.json` records that parse and whose pid
/// answers `kill(pid, 0)`, as a JSON array.
fn naive_reader(sessions: &Path) {
    let mut alive = Vec::new();
    for entry in std::fs::read_dir(sessions).unwrap() {
        let entry = entry.unwrap();
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(bytes) = std::fs::read(entry.path()) else {
            continue;
        };
        if serde_json::from_slice::<serde_json::Value>(&bytes).is_err() {
            continue;
        }
        let Some(target) = rustix::process::Pid::from_raw(pid) else {
            continue;
        };
        if rustix::process::test_kill_process(target).is_ok() {
            alive.push(pid);
        }
    }
    println!("{}", serde_json::to_string(&alive).unwrap());
}

/// `claude-peers --json list` against the naive reader, whole processes, side by side.
fn against_naive(machine: &Machine) {
    // (records, live, rounds, the most ours / naive may be)
    let cases: [(usize, usize, usize, Option<f64>); 3] = [
        (10_000, 100, 31, Some(0.12)),
        (500, 500, 61, Some(2.0)),
        (2050, 50, 41, None),
    ];
    println!(
        "\nclaude-peers --json list against a naive reader (list, read + parse each json, kill(pid, 0)); fresh processes, interleaved, median"
    );
    println!(
        "{:<28} {:>12} {:>12} {:>8}  {:<10} met",
        "registry", "claude-peers", "naive", "ratio", "target"
    );
    for (records, live, rounds, target) in cases {
        let children = Children::spawn(live).unwrap();
        let registry = Registry::generate(machine, records - live, &children).unwrap();
        let run = |command: &mut Command| {
            let start = Instant::now();
            let out = command.stderr(Stdio::inherit()).output().unwrap();
            let elapsed = start.elapsed();
            assert!(out.status.success());
            let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(
                listed.as_array().map(Vec::len),
                Some(live),
                "both find every live child"
            );
            elapsed
        };
        let ours = || {
            run(Command::new(env!("CARGO_BIN_EXE_claude-peers"))
                .arg("--home")
                .arg(registry.home.root())
                .args(["--json", "list"]))
        };
        let naive = || {
            run(Command::new(std::env::current_exe().unwrap())
                .arg(NAIVE)
                .arg(&registry.sessions))
        };
        ours();
        naive();
        let (mut our_times, mut naive_times) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            our_times.push(ours());
            naive_times.push(naive());
        }
        let (ours, naive) = (median(&mut our_times), median(&mut naive_times));
        let ratio = ours.as_secs_f64() / naive.as_secs_f64();
        let (target, met) = target.map_or(("(report)".to_owned(), "-"), |most| {
            (
                format!("<= {most:.2}x"),
                if ratio <= most { "yes" } else { "NO" },
            )
        });
        println!(
            "{:<28} {:>12} {:>12} {:>7.2}x  {target:<10} {met}",
            format!("{records} records, {live} live"),
            format!("{ours:.2?}"),
            format!("{naive:.2?}"),
            ratio
        );
    }
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
