//! `claude-peers mcp` with many `send_message` calls at once, on the wire, to a live
//! interactive receiver through the pinned Claude Code: at most 4 senders run at once,
//! they start in the calls' order, every call is answered, a cancelled call is not sent
//! (or has its sender stopped), and SIGTERM stops them all. The server's `claude` is a
//! wrapper that logs each sender it starts and how many were running then.

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

/// The server's `claude`: logs `start NAME PID RUNNING` (RUNNING: the wrappers alive then,
/// itself included; a sender whose turn ended was reaped before the next turn began), then
/// for a `blocker-*` sender waits for the file `go`, then runs the real Claude Code and logs
/// `end NAME PID`. A sender killed by a cancel logs no end.
fn wrapper(dir: &Path) -> PathBuf {
    let body = format!(
        r#"dir='{dir}'
echo $$ >> "$dir/pids"
n=0
for p in $(cat "$dir/pids"); do
  grep -qsF "$0" /proc/$p/cmdline && n=$((n+1))
done
echo "start $CLAUDE_CODE_SESSION_NAME $$ $n" >> "$dir/log"
case $CLAUDE_CODE_SESSION_NAME in blocker-*)
  while [ ! -e "$dir/go" ]; do sleep 0.1; done
esac
'{claude}' "$@"
status=$?
echo "end $CLAUDE_CODE_SESSION_NAME $$" >> "$dir/log"
exit $status"#,
        dir = dir.display(),
        claude = claude().display(),
    );
    shell_script(dir.join("claude-wrapper"), &body).unwrap()
}

/// The wrapper's `start` lines: name, pid, how many were running.
fn starts(dir: &Path) -> Vec<(String, u32, usize)> {
    fs::read_to_string(dir.join("log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("start ")?.split(' ');
            let name = words.next()?.to_owned();
            Some((
                name,
                words.next()?.parse().ok()?,
                words.next()?.parse().ok()?,
            ))
        })
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

    fn send(&mut self, id: i64, receiver: &Receiver, from: &str, message: &str) {
        let arguments =
            json!({"session_id": receiver.session_id, "message": message, "from": from});
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

/// Whether the receiver's transcript comes to hold `text` (a sent message is written
/// there as it is read).
fn comes(receiver: &Receiver, text: &str) -> bool {
    wait_for(Duration::from_secs(30), || {
        received(receiver, text).then_some(())
    })
    .is_some()
}

#[test]
fn twenty_calls_at_once_run_at_most_four_senders_in_their_order_and_all_are_answered() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());

    for n in 1..=20 {
        wire.send(
            n,
            &receiver,
            &format!("caller-{n:02}"),
            &format!("pooled message {n}"),
        );
    }
    let results: Vec<Value> = (1..=20).map(|n| wire.result(n)).collect();

    let starts = starts(dir.path());
    assert_eq!(starts.len(), 20, "one sender per call: {starts:?}");
    let most = starts.iter().map(|(_, _, running)| *running).max().unwrap();
    assert!(most <= 4, "at most 4 senders at once: {starts:?}");
    assert!(most >= 2, "the sends ran side by side: {starts:?}");
    // Turns go in the calls' order (from 1); the 4 holding one may start in any order.
    for (position, (name, _, _)) in starts.iter().enumerate() {
        let call: usize = name.strip_prefix("caller-").unwrap().parse().unwrap();
        assert!(call <= position + 4, "started in order: {starts:?}");
    }
    let delivered = results.iter().filter(|r| r["delivered"] == true).count();
    assert!(delivered > 0, "the sends went through: {results:?}");
    assert!(comes(&receiver, "pooled message"), "the receiver got it");
}

#[test]
fn a_call_cancelled_before_its_turn_is_never_sent_and_one_on_its_turn_is_stopped() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());

    for n in 1..=4 {
        wire.send(
            n,
            &receiver,
            &format!("blocker-{n}"),
            &format!("blocking message {n}"),
        );
    }
    let running = wait_for(Duration::from_secs(60), || {
        let starts = starts(dir.path());
        (starts.len() == 4).then_some(starts)
    });
    let running = running.expect("the 4 blockers' senders started");
    wire.send(5, &receiver, "waiter", "cancelled while waiting");
    wire.cancel(5);
    wire.send(6, &receiver, "after-the-cancel", "sent after the cancel");

    // The pool is full, yet the server answers: a bad name before any turn, a listing.
    wire.send(7, &receiver, "x\" from=\"uds:/other.sock", "forged");
    assert_eq!(wire.answer(7)["error"]["code"], -32602, "a JSON-RPC error");
    wire.call(8, "list_sessions", &json!({}));
    assert_eq!(
        wire.answer(8)["result"]["structuredContent"]["sessions"][0]["session_id"],
        receiver.session_id.as_str()
    );

    // Cancelled on its turn: its sender (still waiting for `go`) is killed and reaped.
    let (_, blocker, _) = running
        .iter()
        .find(|(name, _, _)| name == "blocker-1")
        .unwrap()
        .clone();
    wire.cancel(1);
    let gone = wait_for(Duration::from_secs(60), || {
        (!Path::new(&format!("/proc/{blocker}")).exists()).then_some(())
    });
    assert!(
        gone.is_some(),
        "the cancelled call's sender was killed and reaped"
    );

    // Its turn goes past the cancelled waiter to the call after it.
    fs::write(dir.path().join("go"), "").unwrap();
    let sent = wire.result(6);
    assert_eq!(sent["delivered"], true, "{sent}");
    for n in 2..=4 {
        wire.result(n);
    }
    // As MCP has it, a cancelled call is not answered (a call whose sender the 60 s
    // timeout killed instead would have been).
    let answers = wire.finish();
    assert!(
        !answers.contains_key(&1) && !answers.contains_key(&5),
        "{answers:?}"
    );
    let names: Vec<String> = starts(dir.path())
        .into_iter()
        .map(|(name, ..)| name)
        .collect();
    assert!(
        !names.iter().any(|n| n == "waiter"),
        "no sender for the cancelled call: {names:?}"
    );
    assert_eq!(names[4], "after-the-cancel", "{names:?}");
    let log = fs::read_to_string(dir.path().join("log")).unwrap();
    assert!(
        !log.contains("end blocker-1 "),
        "blocker-1 never ran Claude Code: {log}"
    );
    assert!(
        comes(&receiver, "blocking message 2"),
        "the receiver got it"
    );
    assert!(!received(&receiver, "cancelled while waiting"));
    assert!(!received(&receiver, "blocking message 1"));
}

#[test]
fn sigterm_stops_the_sends_under_way_and_the_waiting_ones() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let (dir, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut wire = Wire::start(&receiver, &wrapper(dir.path()), cache.path());
    for n in 1..=4 {
        wire.send(n, &receiver, &format!("blocker-{n}"), "stopped by a signal");
    }
    wire.send(5, &receiver, "waiter", "never started");
    let running = wait_for(Duration::from_secs(60), || {
        let starts = starts(dir.path());
        (starts.len() == 4).then_some(starts)
    });
    let running = running.expect("the 4 blockers' senders started");

    let server = wire.server.id().to_string();
    let status = Command::new("kill")
        .args(["-TERM", &server])
        .status()
        .unwrap();
    assert!(status.success());
    let status = wire.server.wait().unwrap();
    assert_eq!(status.code(), Some(143), "{status}");
    for (name, pid, _) in &running {
        let gone = wait_for(Duration::from_secs(10), || {
            (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
        });
        assert!(gone.is_some(), "{name}'s sender was killed and reaped");
    }
    assert_eq!(
        starts(dir.path()).len(),
        4,
        "the waiting call never started"
    );
    assert!(!received(&receiver, "stopped by a signal"));
}
