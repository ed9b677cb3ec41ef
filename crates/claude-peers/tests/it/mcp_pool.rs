//! `claude-peers mcp` with many `send_message` calls at once, on the wire, to a live
//! interactive receiver through the pinned Claude Code: one sender serves them all in
//! arrival order, every call is answered, a call cancelled while it waits is not sent,
//! and SIGTERM or a client that leaves closes the sender cleanly. The server's `claude`
//! is a wrapper that logs each sender it starts and ends.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_testkit::process::shell_script;
use serde_json::{Value, json};

use crate::receiver::{Receiver, claude, wait_for};

/// A hang guard for an answer, not a timing claim: a send ends within its 60 s timeout.
const ANSWER_LIMIT: Duration = Duration::from_secs(600);

/// The server's `claude`: logs `start PID`; while the file `block` exists, waits for
/// the file `go`; then runs the real Claude Code and logs `end PID` when it exits.
fn wrapper(dir: &Path) -> PathBuf {
    let body = format!(
        r#"dir='{dir}'
echo "start $$" >> "$dir/log"
if [ -e "$dir/block" ]; then
  while [ ! -e "$dir/go" ]; do sleep 0.1; done
fi
'{claude}' "$@"
status=$?
echo "end $$" >> "$dir/log"
exit $status"#,
        dir = dir.display(),
        claude = claude().display(),
    );
    shell_script(dir.join("claude-wrapper"), &body).unwrap()
}

/// The pids of the senders the wrapper started.
fn starts(dir: &Path) -> Vec<u32> {
    fs::read_to_string(dir.join("log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("start ")?.parse().ok())
        .collect()
}

/// `claude-peers mcp` on the receiver's home, spoken to line by line.
struct Wire {
    server: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    answers: HashMap<i64, Value>,
}

impl Wire {
    fn start(receiver: &Receiver, claude: &Path, cache: &Path) -> Self {
        let mut server = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(receiver.home.path())
            .args(["mcp", "--claude"])
            .arg(claude)
            .arg("--managed-settings")
            .arg(cache.join("no-managed-settings.json"))
            // Sender and receiver share the default runtime directory (see `Receiver::send`).
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("XDG_CACHE_HOME", cache)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(server.stdout.take().unwrap());
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                let answer = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout holds only JSON-RPC ({e}): {line:?}"));
                let _ = tx.send(answer);
            }
        });
        let mut wire = Self {
            stdin: server.stdin.take(),
            server,
            lines,
            answers: HashMap::new(),
        };
        wire.write(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "pool", "version": "1"},
            }}),
        );
        wire.answer(0);
        wire.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        wire
    }

    fn write(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn call(&mut self, id: i64, tool: &str, arguments: &Value) {
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}));
    }

    fn send(&mut self, id: i64, receiver: &Receiver, message: &str) {
        let arguments =
            json!({"session_id": receiver.session_id, "message": message, "from": "caller"});
        self.call(id, "send_message", &arguments);
    }

    fn send_as(&mut self, id: i64, receiver: &Receiver, from: &str) {
        let arguments = json!({"session_id": receiver.session_id, "message": "x", "from": from});
        self.call(id, "send_message", &arguments);
    }

    fn cancel(&mut self, id: i64) {
        self.write(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the test cancels it"}}),
        );
    }

    /// The answer to the request `id`, waiting for it.
    fn answer(&mut self, id: i64) -> Value {
        let deadline = Instant::now() + ANSWER_LIMIT;
        while !self.answers.contains_key(&id) {
            let left = deadline.saturating_duration_since(Instant::now());
            let answer = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("no answer to request {id} ({e})"));
            if let Some(n) = answer["id"].as_i64() {
                self.answers.insert(n, answer);
            }
        }
        self.answers[&id].clone()
    }

    /// The answer to the tool call `id`: a tool result, a success or a tool error.
    fn result(&mut self, id: i64) -> Value {
        let answer = self.answer(id);
        let result = &answer["result"]["structuredContent"];
        assert!(
            result["delivered"].is_boolean()
                || result["refusal"].is_string()
                || result["error"].is_string(),
            "call {id} is answered with a tool result: {answer}"
        );
        result.clone()
    }

    /// Closes stdin and gives every answer the server wrote before it ended.
    fn finish(mut self) -> HashMap<i64, Value> {
        drop(self.stdin.take());
        let status = self.server.wait().unwrap();
        assert!(status.success(), "a closed stdin ends the server: {status}");
        for answer in &self.lines {
            if let Some(n) = answer["id"].as_i64() {
                self.answers.insert(n, answer);
            }
        }
        std::mem::take(&mut self.answers)
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let _ = self.server.wait();
    }
}

/// Whether the receiver's transcript holds `text` anywhere.
fn received(receiver: &Receiver, text: &str) -> bool {
    receiver
        .transcript()
        .iter()
        .any(|entry| entry.to_string().contains(text))
}

/// Whether the receiver comes to read `text`: its transcript holds the message as read,
/// not only as queued (what is asserted next is waited for here, so a loaded machine
/// does not fail it).
fn comes(receiver: &Receiver, text: &str) -> bool {
    wait_for(Duration::from_secs(30), || {
        (receiver.times_read(text) > 0).then_some(())
    })
    .is_some()
}

#[test]
fn twenty_calls_at_once_go_through_one_sender_and_are_all_answered_delivered() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());

    for n in 1..=20 {
        wire.send(n, &receiver, &format!("pooled message {n}"));
    }
    let results: Vec<Value> = (1..=20).map(|n| wire.result(n)).collect();

    for (n, result) in (1..).zip(&results) {
        assert_eq!(result["delivered"], true, "call {n}: {result}");
        assert!(result["msg_id"].is_string(), "call {n}: {result}");
        assert_eq!(
            result["session"]["session_id"],
            receiver.session_id.as_str()
        );
    }
    let mut msg_ids: Vec<&str> = results
        .iter()
        .filter_map(|r| r["msg_id"].as_str())
        .collect();
    msg_ids.sort_unstable();
    msg_ids.dedup();
    assert_eq!(msg_ids.len(), 20, "one message each: {results:?}");
    assert_eq!(starts(dir.path()).len(), 1, "one sender served every call");
    let bodies = |receiver: &Receiver| -> Vec<String> {
        let transcript = receiver.transcript();
        let body = |entry: &Value| entry.pointer("/origin/body")?.as_str().map(str::to_owned);
        transcript.iter().filter_map(body).collect()
    };
    let all = wait_for(Duration::from_secs(60), || {
        let bodies = bodies(&receiver);
        (1..=20)
            .all(|n| bodies.contains(&format!("pooled message {n}")))
            .then_some(())
    });
    assert!(
        all.is_some(),
        "the receiver read every message: {:?}",
        bodies(&receiver)
    );
}

#[test]
fn a_call_cancelled_while_it_waits_is_never_sent_and_the_others_are() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    fs::write(dir.path().join("block"), "").unwrap();
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());

    // The first call starts the sender, held by the wrapper: the others wait behind it.
    wire.send(1, &receiver, "blocking message 1");
    let started = wait_for(Duration::from_secs(60), || {
        (!starts(dir.path()).is_empty()).then_some(())
    });
    assert!(started.is_some(), "the sender started");
    for n in 2..=4 {
        wire.send(n, &receiver, &format!("blocking message {n}"));
    }
    wire.send(5, &receiver, "cancelled while waiting");
    wire.cancel(5);
    wire.send(6, &receiver, "sent after the cancel");

    // The sender is busy, yet the server answers: a bad name, another name, a listing.
    wire.send_as(7, &receiver, "x\" from=\"uds:/other.sock");
    assert_eq!(wire.answer(7)["error"]["code"], -32602, "a JSON-RPC error");
    wire.send_as(8, &receiver, "someone-else");
    assert_eq!(
        wire.answer(8)["error"]["code"],
        -32602,
        "one sender, one name"
    );
    wire.call(9, "list_sessions", &json!({}));
    assert_eq!(
        wire.answer(9)["result"]["structuredContent"]["sessions"][0]["session_id"],
        receiver.session_id.as_str()
    );

    fs::write(dir.path().join("go"), "").unwrap();
    for n in [1, 2, 3, 4, 6] {
        let sent = wire.result(n);
        assert_eq!(sent["delivered"], true, "call {n}: {sent}");
    }
    // As MCP has it, a cancelled call is not answered.
    let answers = wire.finish();
    assert!(!answers.contains_key(&5), "{answers:?}");
    assert!(
        comes(&receiver, "sent after the cancel"),
        "the receiver got it"
    );
    assert!(!received(&receiver, "cancelled while waiting"));
    assert_eq!(starts(dir.path()).len(), 1, "one sender");
}

#[test]
fn sigterm_closes_the_sender_cleanly_and_exits_143() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());
    wire.send(1, &receiver, "before the signal");
    assert_eq!(wire.result(1)["delivered"], true);
    let [sender] = starts(dir.path())[..] else {
        panic!("one sender: {:?}", starts(dir.path()))
    };

    let server = wire.server.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &server])
        .status()
        .unwrap();
    assert!(status.success());
    let status = wire.server.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status}");
    let log = fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(
        log.contains(&format!("end {sender}")),
        "its Claude Code ended by itself, its stdin closed: {log}"
    );
    assert!(
        !Path::new(&format!("/proc/{sender}")).exists(),
        "and was reaped"
    );
}

#[test]
fn a_client_that_leaves_mid_send_has_that_send_finished_whole_and_the_sender_closed() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // The sender waits in the wrapper until `go`: the send is under way meanwhile.
    fs::write(dir.path().join("block"), "").unwrap();
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());
    wire.send(1, &receiver, "sent as the client leaves");
    let sender = wait_for(Duration::from_secs(30), || {
        starts(dir.path()).first().copied()
    })
    .expect("the mailbox takes the call and starts its sender");

    // The client leaves; then the sender may go on.
    drop(wire.stdin.take());
    thread::sleep(Duration::from_millis(500));
    fs::write(dir.path().join("go"), "").unwrap();
    let status = wire.server.wait().unwrap();
    assert!(status.success(), "the server ends cleanly: {status}");

    assert!(
        comes(&receiver, "sent as the client leaves"),
        "the send under way is finished"
    );
    assert_eq!(receiver.times_read("sent as the client leaves"), 1);
    let log = fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(
        log.contains(&format!("end {sender}")),
        "its Claude Code ended by itself, its stdin closed: {log}"
    );
    assert_eq!(starts(dir.path()), [sender], "one sender: {log}");
    assert!(
        !Path::new(&format!("/proc/{sender}")).exists(),
        "and was reaped"
    );
}
