//! `claude-peers serve` with real Claude Code: a message posted before its receiver
//! starts is delivered once it starts, once; one post office per user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use claude_peer_endpoint::Reply;
use claude_peer_post::protocol::{Record, Request};
use claude_peer_post::{Client, SOCKET_FILE};
use serde_json::json;

use crate::receiver::{Receiver, claude, prepare_home, wait_for};

/// A running `claude-peers serve` over `home`, its store and runtime directory private
/// to the test; killed when dropped.
struct Serve {
    child: Child,
    runtime: PathBuf,
}

/// A private directory (0700) for a test's state.
fn private() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// `claude-peers serve` over `home`, its places in `state`, leaving after `idle_exit`.
fn serve_command(home: &Path, state: &Path, idle_exit: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(home)
        .args([
            "serve",
            "--from",
            "harness",
            "--idle-exit",
            idle_exit,
            "--claude",
        ])
        .arg(claude())
        .arg("--managed-settings")
        .arg(state.join("none.json"))
        .arg("--store")
        .arg(state.join("state/post.db"))
        .arg("--runtime-dir")
        .arg(state.join("run"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"));
    command
}

impl Serve {
    fn start(home: &Path, state: &Path) -> Self {
        Self::start_with(home, state, "0")
    }

    fn start_with(home: &Path, state: &Path, idle_exit: &str) -> Self {
        let child = serve_command(home, state, idle_exit)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let runtime = state.join("run");
        let answers = wait_for(Duration::from_secs(20), || {
            let mut client = Client::connect(&runtime).ok()?;
            client.request(&Request::Ping, |_| {}).ok()?.pid
        });
        assert_eq!(answers, Some(child.id()), "the post office answers ping");
        Self { child, runtime }
    }

    fn ask(&self, request: &Request) -> Option<Record> {
        let mut client = Client::connect(&self.runtime).unwrap();
        client.request(request, |_| {}).unwrap().record
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_message_posted_to_a_directory_before_its_session_starts_is_read_there_once() {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["project"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = private();
    let serve = Serve::start(home.path(), state.path());
    let cwd = home.path().join("project").to_str().unwrap().to_owned();
    let text = "queued before you started: the build is green";
    let posted = serve
        .ask(&Request::Post {
            from: "harness".to_owned(),
            key: Some("build-7".to_owned()),
            to_kind: "cwd".to_owned(),
            to: cwd.clone(),
            text: text.to_owned(),
            expire_ms: 300_000,
            in_reply_to: None,
        })
        .unwrap();
    assert_eq!(posted.state, "waiting");

    let receiver = Receiver::start_in(&home, "project", &[]);
    let get = Request::Get {
        id: posted.id.clone(),
    };
    let delivered = wait_for(Duration::from_secs(60), || {
        serve.ask(&get).filter(|r| r.state == "delivered")
    })
    .unwrap_or_else(|| panic!("not delivered: {:?}", serve.ask(&get)));
    assert_eq!(
        delivered.session_id.as_deref(),
        Some(receiver.session_id.as_str())
    );
    assert!(delivered.msg_id.is_some(), "{delivered:?}");
    let read = wait_for(Duration::from_secs(30), || {
        (receiver.times_read(text) > 0).then_some(())
    });
    assert!(read.is_some(), "the receiver's Claude was given it");
    // The warm sender heard it read, after the send returned: recorded.
    let receipt = wait_for(Duration::from_secs(30), || {
        serve
            .ask(&get)
            .filter(|r| r.receipt.as_deref() == Some("read"))
    });
    assert!(
        receipt.is_some(),
        "read in the store: {:?}",
        serve.ask(&get)
    );
    // The same key again is the same message: nothing is sent twice.
    let again = serve
        .ask(&Request::Post {
            from: "harness".to_owned(),
            key: Some("build-7".to_owned()),
            to_kind: "cwd".to_owned(),
            to: cwd,
            text: text.to_owned(),
            expire_ms: 300_000,
            in_reply_to: None,
        })
        .unwrap();
    assert_eq!(
        (again.id.as_str(), again.state.as_str()),
        (posted.id.as_str(), "delivered")
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(receiver.times_read(text), 1, "exactly once");
}

#[test]
fn a_second_serve_is_refused_naming_the_first_and_a_killed_ones_place_is_taken_over() {
    let home = private();
    let state = private();
    let mut first = Serve::start(home.path(), state.path());
    let second = serve_command(home.path(), state.path(), "0")
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!(
            "a post office runs already as pid {}",
            first.child.id()
        )),
        "{stderr}"
    );
    // Killed: its lock is released with it, its socket stays behind and is replaced.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(state.path().join("run").join(SOCKET_FILE).exists());
    let third = Serve::start(home.path(), state.path());
    assert_ne!(third.child.id(), first.child.id());
}

/// `claude-peers --json` with the test's private places, as a user's command runs: the
/// command `args[0]` with `--claude`, then the rest.
fn cli(home: &Path, state: &Path, args: &[&str]) -> (i32, serde_json::Value) {
    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--json")
        .arg("--home")
        .arg(home)
        .arg(args[0])
        .args(if args[0] == "log" {
            Vec::new()
        } else {
            vec![std::ffi::OsString::from("--claude"), claude().into()]
        })
        .args(&args[1..])
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_STATE_HOME", state.join("state"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let value = serde_json::from_str(&stdout).unwrap_or_else(|_| {
        panic!(
            "not JSON: {stdout:?}; stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.code().unwrap(), value)
}

/// Kills the post office a command started in `state`'s runtime directory.
struct Started(PathBuf);

impl Drop for Started {
    fn drop(&mut self) {
        let pid = Client::connect(&self.0)
            .and_then(|mut client| client.request(&Request::Ping, |_| {}))
            .ok()
            .and_then(|done| done.pid);
        if let Some(pid) = pid {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
        }
    }
}

#[test]
fn send_queue_outbox_cancel_and_log_go_through_a_post_office_started_on_demand() {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["project"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = private();
    let _started = Started(state.path().join("cache/claude-peers"));
    let project = home.path().join("project");
    let project = project.to_str().unwrap();
    let queue = |text: &str, extra: &[&str]| {
        let mut args = vec!["send", "--queue", "--from", "harness", "--message", text];
        args.extend(extra);
        cli(home.path(), state.path(), &args)
    };
    let (code, first) = queue("first, queued", &["--cwd", project]);
    assert_eq!(code, 0, "{first}");
    assert_eq!(
        (first["queued"].clone(), first["state"].clone()),
        (json!(true), json!("waiting"))
    );
    let (_, never) = queue("to nobody", &["--expire", "2s", "nobody-here"]);
    let (_, cancelled) = queue("cancel me", &["--cwd", project, "--id", "k1"]);
    let id = |v: &serde_json::Value| v["id"].as_str().unwrap().to_owned();
    let (code, answer) = cli(
        home.path(),
        state.path(),
        &["outbox", "cancel", &id(&cancelled)],
    );
    assert_eq!(code, 0, "{answer}");
    assert_eq!(answer[0]["state"], "cancelled");
    let (_, outbox) = cli(home.path(), state.path(), &["outbox"]);
    let open: Vec<String> = outbox.as_array().unwrap().iter().map(id).collect();
    assert_eq!(
        open,
        [id(&first), id(&never)],
        "oldest first, the cancelled one gone"
    );

    let (_, by_name) = queue("to a name, queued", &["reviewer-7"]);
    assert_eq!(by_name["state"], "waiting");

    // A session named reviewer-7 (as `claude --name` or its environment names it).
    let script = Arc::new(|_: &serde_json::Value| Reply::Text("Noted.".to_owned()));
    let receiver = Receiver::launch(
        &home,
        "project",
        &[],
        &["CLAUDE_CODE_SESSION_NAME=reviewer-7"],
        script,
    );
    let delivered = wait_for(Duration::from_secs(60), || {
        let (_, log) = cli(home.path(), state.path(), &["log", "--state", "delivered"]);
        log.as_array().filter(|l| l.len() == 2).cloned()
    })
    .expect("both are delivered, by directory and by name");
    for record in &delivered {
        assert_eq!(
            record["session_id"],
            receiver.session_id.as_str(),
            "{record}"
        );
    }
    let read = wait_for(Duration::from_secs(30), || {
        (receiver.times_read("first, queued") == 1 && receiver.times_read("to a name, queued") == 1)
            .then_some(())
    });
    assert!(read.is_some(), "each read once");
    let expired = wait_for(Duration::from_secs(10), || {
        let (_, log) = cli(home.path(), state.path(), &["log", "--to", "nobody-here"]);
        (log[0]["state"] == "expired").then_some(log)
    });
    assert!(expired.is_some(), "the message to nobody expired");
    assert_eq!(
        receiver.times_read("cancel me"),
        0,
        "a cancelled message never goes"
    );
}

#[test]
fn a_post_office_with_nothing_to_do_leaves_after_its_idle_exit() {
    let home = private();
    let state = private();
    let mut serve = Serve::start_with(home.path(), state.path(), "1s");
    let exited = wait_for(Duration::from_secs(15), || serve.child.try_wait().unwrap());
    assert_eq!(
        exited.map(|status| status.code()),
        Some(Some(0)),
        "it left by itself"
    );
    assert!(
        !state.path().join("run").join(SOCKET_FILE).exists(),
        "and removed its socket"
    );
}

#[test]
fn a_post_office_that_cannot_start_is_reported_with_the_words_of_its_log() {
    let home = private();
    let state = private();
    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--json")
        .arg("--home")
        .arg(home.path())
        .args([
            "send",
            "--claude",
            "/nonexistent/claude",
            "--queue",
            "--message",
            "hi",
            "ada",
        ])
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.path().join("cache"))
        .env("XDG_STATE_HOME", state.path().join("state"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let failure: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(failure["error"], "post_office_start_failed", "{failure}");
    let message = failure["message"].as_str().unwrap();
    assert!(
        message.contains("serve.log") && message.contains("/nonexistent/claude"),
        "the log's words, naming what is missing: {message}"
    );
}

/// How many times the transcript of `receiver` took a message of exactly `text` into its
/// queue (each arrival is one such line, read or not).
fn arrivals(receiver: &Receiver, text: &str) -> usize {
    let body = format!("\n{text}\n</cross-session-message>");
    receiver
        .transcript()
        .iter()
        .filter(|entry| {
            entry["type"] == "queue-operation"
                && entry["operation"] == "enqueue"
                && entry["content"]
                    .as_str()
                    .is_some_and(|c| c.ends_with(&body))
        })
        .count()
}

/// A small xorshift generator: the kill moments differ from run to run, and the seed
/// in a failure message repeats them.
struct Moments(u64);

impl Moments {
    fn next_ms(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

#[test]
fn a_post_office_killed_at_twenty_moments_loses_nothing_and_delivers_nothing_twice() {
    const MESSAGES: usize = 200;
    let home = Arc::new(private());
    let cwds = ["a", "b", "c", "d"];
    prepare_home(
        home.path(),
        &cwds,
        &json!({"crossSessionInbound": "accept"}),
    );
    let receivers: Vec<Receiver> = cwds
        .iter()
        .map(|cwd| Receiver::start_in(&home, cwd, &[]))
        .collect();
    let state = private();
    let mut serve = Serve::start(home.path(), state.path());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut moments = Moments(seed);
    let text = |i: usize| format!("message {i} of {MESSAGES}: kill-test");
    let ids: Vec<(String, usize)> = (0..MESSAGES)
        .map(|i| {
            let to = receivers[i % 4].cwd.to_str().unwrap().to_owned();
            let posted = serve
                .ask(&Request::Post {
                    from: "harness".to_owned(),
                    key: None,
                    to_kind: "cwd".to_owned(),
                    to,
                    text: text(i),
                    expire_ms: 3_600_000,
                    in_reply_to: None,
                })
                .unwrap();
            (posted.id, i)
        })
        .collect();

    // Twenty kills (SIGKILL) at random moments while they go; a new post office each time.
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(200 + moments.next_ms(2_500)));
        serve.child.kill().unwrap();
        serve.child.wait().unwrap();
        serve = Serve::start(home.path(), state.path());
    }
    let outbox = |serve: &Serve| {
        let mut client = Client::connect(&serve.runtime).unwrap();
        let mut open = Vec::new();
        client
            .request(&Request::Outbox, |record| open.push(record))
            .unwrap();
        open
    };
    let settled = wait_for(Duration::from_secs(300), || {
        let open = outbox(&serve);
        open.iter().all(|r| r.state == "unknown").then_some(open)
    });
    let unknown =
        settled.unwrap_or_else(|| panic!("seed {seed}: still open: {:?}", outbox(&serve)));
    // Nothing arrives later than what was delivered.
    std::thread::sleep(Duration::from_secs(3));

    let mut delivered = 0;
    for (id, i) in &ids {
        let record = serve.ask(&Request::Get { id: id.clone() }).unwrap();
        let times = arrivals(&receivers[i % 4], &text(*i));
        assert!(
            times <= 1,
            "seed {seed}: {} arrived {times} times: {record:?}",
            text(*i)
        );
        match record.state.as_str() {
            "delivered" => {
                delivered += 1;
                assert_eq!(times, 1, "seed {seed}: delivered but not there: {record:?}");
            }
            // Listed by outbox, never sent again by itself.
            "unknown" => assert!(unknown.iter().any(|r| r.id == *id), "seed {seed}"),
            _ => panic!("seed {seed}: neither final nor listed: {record:?}"),
        }
    }
    assert!(
        delivered >= MESSAGES - unknown.len(),
        "seed {seed}: {delivered} delivered, {} unknown",
        unknown.len()
    );
    eprintln!(
        "seed {seed}: {delivered} delivered, {} unknown",
        unknown.len()
    );
}

#[test]
fn what_waited_before_a_reboot_is_delivered_by_the_next_post_office() {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["later"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = private();
    let runtime = state.path().join("cache/claude-peers");
    let _started = Started(runtime.clone());
    let later = home.path().join("later");
    let texts = ["waited 1", "waited 2", "waited 3"];
    for text in texts {
        let args = [
            "send",
            "--queue",
            "--from",
            "harness",
            "--message",
            text,
            "--cwd",
        ];
        let mut args = args.to_vec();
        args.push(later.to_str().unwrap());
        let (code, queued) = cli(home.path(), state.path(), &args);
        assert_eq!((code, &queued["state"]), (0, &json!("waiting")), "{queued}");
    }
    // The reboot: every process gone at once, the runtime directory (a tmpfs) emptied.
    drop(Started(runtime.clone()));
    std::fs::remove_dir_all(&runtime).unwrap();

    let receiver = Receiver::start_in(&home, "later", &[]);
    // The next command that needs a post office starts one, which delivers them.
    let (code, outbox) = cli(home.path(), state.path(), &["outbox"]);
    assert_eq!(code, 0, "{outbox}");
    let read = wait_for(Duration::from_secs(60), || {
        texts
            .iter()
            .all(|text| receiver.times_read(text) == 1)
            .then_some(())
    });
    assert!(
        read.is_some(),
        "each read once: {:?}",
        receiver.transcript()
    );
    // Recorded once the sender's tool result came, which may be after the receiver read it.
    let delivered = wait_for(Duration::from_secs(10), || {
        let (_, log) = cli(home.path(), state.path(), &["log", "--state", "delivered"]);
        (log.as_array().map(Vec::len) == Some(3)).then_some(())
    });
    assert!(delivered.is_some(), "all three delivered in the log");
    // In the order they were posted.
    let order: Vec<usize> = receiver
        .transcript()
        .iter()
        .filter_map(|entry| entry.pointer("/origin/body")?.as_str())
        .filter_map(|body| texts.iter().position(|text| *text == body))
        .collect();
    assert_eq!(order, [0, 1, 2]);
}
