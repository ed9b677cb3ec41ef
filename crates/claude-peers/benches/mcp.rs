//! `list_sessions` through `claude-peers mcp` against `claude-peers --json list`, side by
//! side on the same registry.
//!
//! A 10,000-record registry with 1% live (real child processes), as the list bench. The
//! tool call is measured end to end as an MCP client sees it: the request written to a
//! running server, the scan, the JSON back and parsed. A cold call adds the server's
//! start and the MCP handshake, as a client pays once per connection; `list --json`
//! pays a process start on every call.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::time::{Duration, Instant};

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

async fn connect(home: &std::path::Path) -> RunningService<RoleClient, ()> {
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
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
    let client = runtime.block_on(connect(home));
    let warm = || runtime.block_on(list_sessions(&client));
    let cold = || {
        runtime.block_on(async {
            let client = connect(home).await;
            let n = list_sessions(&client).await;
            client.cancel().await.unwrap();
            n
        })
    };
    assert_eq!(command(), LIVE, "the command lists every live child");
    assert_eq!(warm(), LIVE, "the tool lists every live child");
    assert_eq!(cold(), LIVE, "and so does a fresh server");

    let (mut cli, mut tool, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        for (times, run) in [
            (&mut cli, &command as &dyn Fn() -> usize),
            (&mut tool, &warm),
            (&mut fresh, &cold),
        ] {
            let start = Instant::now();
            run();
            times.push(start.elapsed());
        }
    }
    let (cli, tool, fresh) = (median(&mut cli), median(&mut tool), median(&mut fresh));
    println!("{RECORDS} records, {LIVE} live; median of {ROUNDS} interleaved rounds");
    let row = |what: &str, time: Duration| println!("{what:<56} {:>10}", format!("{time:.2?}"));
    row("claude-peers --json list (whole process)", cli);
    row("mcp list_sessions, running server (one tools/call)", tool);
    row(
        "mcp list_sessions, fresh server (start, handshake, call)",
        fresh,
    );
    println!(
        "ratio list_sessions / list --json: {:.2}x",
        tool.as_secs_f64() / cli.as_secs_f64()
    );
}
