//! The history at 1,000,000 messages, as whole processes: importing them (`log
//! --import`), the store's size against the bytes of the texts, `log --limit 50`, `log
//! --with` one session and `log --search` one word side by side with `list --json` (the
//! same binary doing the least a command does), and a post office pruning half of them
//! (its time and its memory while it does).
//!
//! `cargo bench --bench history [-- N]` (N messages, default 1,000,000).
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;

const ROUNDS: usize = 21;
const PEERS: usize = 200;
const WORDS: [&str; 16] = [
    "build", "green", "review", "merge", "tests", "deploy", "branch", "rebase", "lint", "flaky",
    "release", "docs", "bench", "fix", "ready", "blocked",
];

fn command(home: &Path, state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--json")
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_STATE_HOME", state.join("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    command
}

fn timed(mut command: Command) -> Duration {
    let started = Instant::now();
    let status = command.status().unwrap();
    let took = started.elapsed();
    assert!(status.success(), "{command:?}");
    took
}

fn median(home: &Path, state: &Path, args: &[&str]) -> Duration {
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| timed(command(home, state, args)))
        .collect();
    times.sort_unstable();
    times[ROUNDS / 2]
}

/// `n` as a float, exactly (a count or size of this benchmark is far below 2^32).
fn float(n: u64) -> f64 {
    f64::from(u32::try_from(n).unwrap())
}

fn mib(bytes: u64) -> f64 {
    float(bytes / 1024) / 1024.0
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// Writes `n` records as `log --export` writes them, over the last 80 days, a third of
/// them replies to the message before; the bytes of their texts.
fn write_records(path: &Path, n: usize) -> u64 {
    let mut out = BufWriter::new(std::fs::File::create(path).unwrap());
    let start = now_ms() - 80 * 86_400_000;
    let step = (80 * 86_400_000) / n as u64;
    let mut text_bytes = 0;
    let mut text = String::new();
    for i in 0..n {
        let peer = i % PEERS;
        let incoming = i % 3 == 2;
        text.clear();
        let _ = write!(text, "message {i}:");
        for w in 0..(8 + i % 8) {
            let word = WORDS[(i * 7 + w * 3) % WORDS.len()];
            let _ = write!(text, " {word}");
        }
        text_bytes += text.len() as u64;
        let at = start + i as u64 * step;
        let (direction, from, to, state) = if incoming {
            (
                "in",
                format!("peer-{peer:03}"),
                "harness".to_owned(),
                "received",
            )
        } else {
            (
                "out",
                "harness".to_owned(),
                format!("peer-{peer:03}"),
                "delivered",
            )
        };
        let record = json!({
            "id": format!("{i:016x}"), "direction": direction, "from": from, "key": null,
            "to": to, "to_kind": "name", "text": text, "state": state, "reason": null,
            "receipt": if incoming { None } else { Some("read") },
            "receipt_basis": if incoming { None } else { Some("transcript") },
            "msg_id": null, "session_id": format!("8668bde0-50ff-4b1e-a7dc-{peer:012}"),
            "session_name": format!("peer-{peer:03}"),
            "in_reply_to": incoming.then(|| format!("{:016x}", i - 1)),
            "inferred": incoming, "attempts": u32::from(!incoming), "created_at_ms": at,
            "expires_at_ms": at + 86_400_000,
            "timeline": timeline(incoming, at, &format!("8668bde0-50ff-4b1e-a7dc-{peer:012}")),
        });
        serde_json::to_writer(&mut out, &record).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    text_bytes
}

/// A timeline as the store writes one: posted, sent and delivered (read) for a message
/// out; received for one in.
fn timeline(incoming: bool, at: u64, session: &str) -> serde_json::Value {
    if incoming {
        return json!([{"state": "received", "at_ms": at, "receipt": null,
                       "receipt_basis": null, "detail": "from uds:/tmp/cc-socks/4242.sock"}]);
    }
    json!([
        {"state": "waiting", "at_ms": at, "receipt": null, "receipt_basis": null, "detail": "posted"},
        {"state": "sending", "at_ms": at + 5, "receipt": null, "receipt_basis": null,
         "detail": format!("attempt 1 to session {session}")},
        {"state": "delivered", "at_ms": at + 200, "receipt": "read", "receipt_basis": "transcript",
         "detail": format!("to session {session}")},
    ])
}

/// The store's bytes on disk: its file and what its write-ahead log still holds.
fn store_bytes(state: &Path) -> u64 {
    ["post.db", "post.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(state.join("state/claude-peers").join(f)).ok())
        .map(|m| m.len())
        .sum()
}

/// The resident memory of `pid`, in KiB (0 once it is gone).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmRSS:"))?.to_owned();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let (home, state) = (dir.path().join("home"), dir.path().join("state"));
    std::fs::create_dir_all(home.join(".claude/sessions")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let file = dir.path().join("history.jsonl");
    let text_bytes = write_records(&file, n);
    let import = timed(command(
        &home,
        &state,
        &["log", "--import", file.to_str().unwrap()],
    ));
    println!(
        "import {n} records: {:.1} s (target 60 s)",
        import.as_secs_f64()
    );
    // The write-ahead log folded into the file, as any later writer does.
    timed(command(&home, &state, &["log", "--limit", "1"]));
    let bytes = store_bytes(&state);
    let allowed = 2 * text_bytes + 300 * n as u64;
    println!(
        "store: {:.1} MiB for {:.1} MiB of text = {:.0} bytes a message beyond the text; allowed 2 x text + 300 a message = {:.1} MiB",
        mib(bytes),
        mib(text_bytes),
        float(bytes.saturating_sub(text_bytes)) / float(n as u64),
        mib(allowed),
    );
    let base = median(&home, &state, &["list"]);
    println!(
        "list --json: {:.1} ms (the baseline)",
        base.as_secs_f64() * 1e3
    );
    for (what, args, target) in [
        ("log --limit 50", vec!["log", "--limit", "50"], 50.0),
        (
            "log --with peer-007 --limit 50",
            vec!["log", "--with", "peer-007", "--limit", "50"],
            50.0,
        ),
        (
            "log --search flaky --limit 50",
            vec!["log", "--search", "flaky", "--limit", "50"],
            150.0,
        ),
        (
            "log --search \"flaky release\" --limit 50",
            vec!["log", "--search", "\"flaky release\"", "--limit", "50"],
            150.0,
        ),
    ] {
        let took = median(&home, &state, &args);
        println!(
            "{what}: {:.1} ms = {:.2}x list (target {target} ms)",
            took.as_secs_f64() * 1e3,
            took.as_secs_f64() / base.as_secs_f64()
        );
    }
    // A post office keeping half: it prunes at its start, then idles out.
    let keep = (n / 2).to_string();
    let mut serve = command(
        &home,
        &state,
        &[
            "serve",
            "--keep",
            &keep,
            "--idle-exit",
            "1",
            "--claude",
            "/bin/true",
        ],
    )
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let started = Instant::now();
    let mut peak = 0;
    loop {
        peak = peak.max(rss_kib(serve.id()));
        if serve.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(serve.wait().unwrap().success());
    let after = store_bytes(&state);
    let kept = command(&home, &state, &["log", "--export"])
        .stdout(Stdio::piped())
        .output()
        .unwrap();
    let kept = String::from_utf8(kept.stdout).unwrap().lines().count();
    assert_eq!(kept, n / 2, "the post office kept what --keep says");
    println!(
        "post office pruning {} of {n}: done and idled out in {:.1} s (1 s of it idle), peak RSS {:.1} MiB; store then {:.1} MiB",
        n - n / 2,
        started.elapsed().as_secs_f64(),
        float(peak) / 1024.0,
        mib(after),
    );
}
