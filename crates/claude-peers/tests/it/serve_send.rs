//! `send` without `--queue`: through a running post office's warm sender, with the
//! same answer as without one, and in the log either way.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::receiver::{Receiver, claude, parsed, prepare_home, wait_for};

/// `claude-peers --json ARGS` for `home`, its places under `state`.
pub(crate) fn cli(home: &Path, state: &Path, args: &[&str]) -> (i32, Value, String) {
    parsed(&run(home, state, &[&["--json"], args].concat()))
}

/// `claude-peers ARGS` for `home`, with its cache and history under `state`.
pub(crate) fn run(home: &Path, state: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_STATE_HOME", state.join("state"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

pub(crate) fn private() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

/// The senders' addresses of the messages of `texts` in the receiver's transcript.
fn senders(receiver: &Receiver, texts: &[&str]) -> Vec<String> {
    receiver
        .transcript()
        .iter()
        .filter(|e| e["type"] == "queue-operation" && e["operation"] == "enqueue")
        .filter_map(|e| e["content"].as_str())
        .filter(|content| {
            texts
                .iter()
                .any(|t| content.ends_with(&format!("\n{t}\n</cross-session-message>")))
        })
        .filter_map(|content| {
            let from = content.split("from=\"").nth(1)?;
            Some(from.split('"').next()?.to_owned())
        })
        .collect()
}

#[test]
fn a_send_goes_through_a_running_post_office_and_every_send_is_in_the_log() {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["project"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = private();
    let receiver = Receiver::start_in(&home, "project", &[]);
    let claude = claude();
    let claude = claude.to_str().unwrap();
    let send = |text: &str| {
        cli(
            home.path(),
            state.path(),
            &[
                "send",
                &receiver.session_id,
                "--claude",
                claude,
                "--from",
                "harness",
                "--message",
                text,
            ],
        )
    };

    // No post office: sent as always, and recorded.
    let (code, direct, stderr) = send("sent directly");
    assert_eq!(code, 0, "{direct} {stderr}");
    let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();

    // A post office started (by `outbox`): the next sends go through its one sender.
    let (code, _, stderr) = cli(home.path(), state.path(), &["outbox", "--claude", claude]);
    assert_eq!(code, 0, "{stderr}");
    let (code, first, stderr) = send("through the post office 1");
    assert_eq!(code, 0, "{first} {stderr}");
    let (_, second, _) = send("through the post office 2");
    assert_eq!(
        keys(&first),
        keys(&direct),
        "the same answer: {first} / {direct}"
    );
    for answer in [&first, &second] {
        assert_eq!(answer["delivered"], true, "{answer}");
        assert_eq!(answer["receipt"], "read", "{answer}");
        assert_eq!(
            answer["session"]["session_id"],
            receiver.session_id.as_str()
        );
        assert!(answer["msg_id"].is_string(), "{answer}");
    }
    let via = senders(
        &receiver,
        &["through the post office 1", "through the post office 2"],
    );
    assert_eq!(via.len(), 2, "each arrived once");
    assert_eq!(via[0], via[1], "one warm sender carried both");
    let direct_from = senders(&receiver, &["sent directly"]);
    assert_eq!(direct_from.len(), 1);
    assert_ne!(
        direct_from[0], via[0],
        "the direct one came from a sender of its own"
    );

    // A refused send is answered as before, and is in the log too.
    let (code, refused, _) = send_to(home.path(), state.path(), claude, "nobody-by-this-name");
    assert_eq!(
        (code, &refused["refusal"]),
        (3, &json!("not_live")),
        "{refused}"
    );

    let log = wait_for(Duration::from_secs(10), || {
        let (_, log, _) = cli(home.path(), state.path(), &["log"]);
        (log.as_array()?.len() == 4).then_some(log)
    })
    .expect("four sends in the log");
    let states: Vec<(&str, &str)> = log
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["text"].as_str().unwrap(), r["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("to nobody", "refused"),
            ("through the post office 2", "delivered"),
            ("through the post office 1", "delivered"),
            ("sent directly", "delivered"),
        ]
    );
    let through = &log[1];
    assert_eq!(through["msg_id"], second["msg_id"]);
    assert_eq!(through["receipt"], "read");
    kill_post_office(state.path());
}

fn send_to(home: &Path, state: &Path, claude: &str, target: &str) -> (i32, Value, String) {
    cli(
        home,
        state,
        &[
            "send",
            target,
            "--claude",
            claude,
            "--from",
            "harness",
            "--message",
            "to nobody",
        ],
    )
}

pub(crate) fn kill_post_office(state: &Path) {
    if let Ok(pid) = std::fs::read_to_string(state.join("cache/claude-peers/post.lock")) {
        let _ = Command::new("kill").arg("-9").arg(pid.trim()).status();
    }
}

#[test]
fn a_mailbox_request_with_queue_is_handed_to_the_post_office_once_per_key() {
    use std::io::Write as _;
    let home = private();
    let state = private();
    let mut mailbox = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.path())
        .args(["mailbox", "--from", "harness", "--claude"])
        .arg(claude())
        .arg("--managed-settings")
        .arg(state.path().join("none.json"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.path().join("cache"))
        .env("XDG_STATE_HOME", state.path().join("state"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = claude_peer_testkit::lines::Lines::stdout(&mut mailbox).unwrap();
    let mut stdin = mailbox.stdin.take().unwrap();
    let queue = json!({"id": "q1", "send": {"session_id": "reviewer-later", "message": "when you start", "queue": true, "expire_s": 600, "id": "k1"}});
    let wrong = json!({"id": "q3", "send": {"session_id": "reviewer-later", "message": "x", "expire_s": 5}});
    for request in [&queue, &queue, &wrong] {
        writeln!(stdin, "{request}").unwrap();
    }
    stdin.flush().unwrap();
    let next = || lines.next_json(Duration::from_secs(20)).unwrap();
    let (first, again, refused) = (next(), next(), next());
    assert_eq!(first["event"], "queued", "{first}");
    assert_eq!(
        (first["id"].clone(), first["state"].clone()),
        (json!("q1"), json!("waiting"))
    );
    let expires = first["expires_at_ms"].as_u64().unwrap();
    assert!(expires > 0, "{first}");
    assert_eq!(
        again["post_id"], first["post_id"],
        "the same key is the same message"
    );
    assert_eq!(refused["event"], "error", "{refused}");
    assert!(
        refused["message"].as_str().unwrap().contains("queue"),
        "{refused}"
    );
    // It is in the post office's outbox.
    let (_, outbox, _) = cli(
        home.path(),
        state.path(),
        &["outbox", "--claude", claude().to_str().unwrap()],
    );
    let ids: Vec<&str> = outbox
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["id"].as_str())
        .collect();
    assert_eq!(ids, [first["post_id"].as_str().unwrap()]);
    drop(stdin);
    let _ = mailbox.wait();
    kill_post_office(state.path());
}
