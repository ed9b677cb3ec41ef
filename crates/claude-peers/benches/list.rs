//! `claude-peers list --json` against the library scan it is built on and against the
//! MCP server's `list_sessions`, side by side.
//!
//! A 10,000-record registry with 1% live (real child processes). The command pays for
//! a process start, the scan, and writing JSON for each live session; the library scan
//! is measured in-process with a fresh `Discovery`, as the command builds one. The tool
//! call is measured end to end as an MCP client sees it (rmcp's client): the request to
//! a running `claude-peers mcp`, the scan, the JSON back and parsed; a fresh server adds
//! its start and the MCP handshake, which a client pays once per connection. Target:
//! the same ballpark.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use claude_peer_resolve::{Discovery, Scope};
use claude_peer_testkit::registry::{Children, Machine, Registry};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};

const RECORDS: usize = 10_000;
const LIVE: usize = 100;
const ROUNDS: usize = 15;

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

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
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
            .sessions
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
}
