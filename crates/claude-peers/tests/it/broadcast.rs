//! `send` to several sessions: each target's own outcome, one sender for all, the
//! sessions `--all-live` and `--cwd` choose, and targets waited for with `--wait-live`.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, shell_script};
use serde_json::{Value, json};

use crate::receiver::{Receiver, claude, counting_claude, parsed, prepare_home, wait_for};
use crate::support::CommandHome as _;

/// `claude-peers --home HOME --json send …` as a user runs it, its sender's private home
/// under `cache`, sharing the receivers' runtime directory.
fn peers(home: &Path, cache: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(home)
        .args(["--json", "send", "--managed-settings"])
        .arg(cache.join("no-managed-settings.json"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache)
        .stdin(Stdio::null());
    command
}

fn result_of<'a>(json: &'a Value, target: &str) -> &'a Value {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["target"] == target)
        .unwrap_or_else(|| panic!("no result for {target}: {json}"))
}

#[test]
fn a_broadcast_reports_each_target_and_one_sender_serves_it_all() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["a", "b", "held", "refusing"],
        &json!({"crossSessionInbound": "accept"}),
    );
    // Project settings can only make a session stricter.
    for (cwd, policy) in [("held", "hold"), ("refusing", "refuse")] {
        let dir = home.path().join(cwd).join(".claude");
        fs::create_dir_all(&dir).unwrap();
        fs::write(
            dir.join("settings.json"),
            format!(r#"{{"crossSessionInbound":"{policy}"}}"#),
        )
        .unwrap();
    }
    let receivers: Vec<Receiver> = ["a", "b", "held", "refusing"]
        .iter()
        .map(|cwd| Receiver::start_in(&home, cwd, &[]))
        .collect();
    let cache = tempfile::tempdir().unwrap();
    // The Claude Code that sends, counting its starts.
    let (counting, starts) = counting_claude(cache.path());
    let dead = "00000000-0000-4000-8000-000000000000";
    let text = "stop what you are doing";

    let output = peers(home.path(), cache.path())
        .args(receivers.iter().map(|r| r.session_id.as_str()))
        .arg(dead)
        .args(["--message", text, "--claude"])
        .arg(&counting)
        .output()
        .unwrap();
    let (code, json, stderr) = parsed(&output);

    assert_eq!(code, 3, "{json} {stderr}");
    assert_eq!(
        (json["delivered"].clone(), json["failed"].clone()),
        (json!(3), json!(2)),
        "{json}"
    );
    for accepting in &receivers[..2] {
        let result = result_of(&json, &accepting.session_id);
        assert_eq!(result["receipt"], "read", "{result}");
        assert_eq!(
            accepting.times_read(text),
            1,
            "each accepting session reads it once"
        );
    }
    assert_eq!(
        result_of(&json, &receivers[2].session_id)["receipt"],
        "held"
    );
    assert_eq!(receivers[2].times_read(text), 0);
    assert_eq!(
        result_of(&json, &receivers[3].session_id)["refusal"],
        "inbound_refused"
    );
    assert_eq!(result_of(&json, dead)["refusal"], "not_live");
    assert_eq!(
        fs::read_to_string(&starts).unwrap().lines().count(),
        1,
        "one sender served the whole broadcast"
    );
}

#[test]
fn wait_live_delivers_to_a_session_that_starts_later() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["late"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let cache = tempfile::tempdir().unwrap();
    let session_id = "6a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d";
    let send = peers(home.path(), cache.path())
        .args([
            session_id,
            "--wait-live",
            "20",
            "--message",
            "welcome aboard",
            "--claude",
        ])
        .arg(claude())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let late = Receiver::start_in(&home, "late", &["--session-id", session_id]);

    let (code, json, stderr) = parsed(&send.wait_with_output().unwrap());

    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["session"]["session_id"], session_id, "{json}");
    assert_eq!(late.times_read("welcome aboard"), 1);
}

#[test]
fn wait_live_sends_to_a_live_target_at_once_and_to_the_other_when_it_starts() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["now", "late"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let now = Receiver::start_in(&home, "now", &[]);
    let cache = tempfile::tempdir().unwrap();
    let late_id = "7b2c3d4e-5f6a-4b7c-8d9e-1f2a3b4c5d6e";
    let text = "first come, first told";
    let send = peers(home.path(), cache.path())
        .args([
            &now.session_id,
            late_id,
            "--wait-live",
            "20s",
            "--message",
            text,
        ])
        .arg("--claude")
        .arg(claude())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read_first = wait_for(Duration::from_secs(15), || {
        (now.times_read(text) == 1).then_some(())
    });
    assert!(
        read_first.is_some(),
        "the live one is not sent to before the other starts"
    );
    let late = Receiver::start_in(&home, "late", &["--session-id", late_id]);
    let (code, json, stderr) = parsed(&send.wait_with_output().unwrap());
    assert_eq!(
        (code, &json["delivered"]),
        (0, &json!(2)),
        "{json} {stderr}"
    );
    assert_eq!(late.times_read(text), 1);
    assert_eq!(now.times_read(text), 1, "once");
}

#[test]
fn wait_live_gives_up_on_a_name_that_never_appears() {
    let home = TempHome::new().unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let relay = shell_script(
        scripts.path().join("ok.sh"),
        "cat >/dev/null; echo '{\"sent\":true}'",
    )
    .unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args([
            "--json",
            "send",
            "ghost",
            "--wait-live",
            "2",
            "--message",
            "hi",
            "--",
        ])
        .arg(&relay)
        .output()
        .unwrap();
    let (code, json, _) = parsed(&out);
    assert_eq!(code, 3, "{json}");
    assert_eq!(json["refusal"], "not_live", "{json}");
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "it waited the 2 s first"
    );
}

/// Four live sessions under `/w` of a fresh home, accepting, and a relay program that
/// notes the session id of each send.
struct Fleet {
    home: TempHome,
    _children: Vec<Sleeper>,
    scripts: tempfile::TempDir,
    relay: std::path::PathBuf,
}

impl Fleet {
    fn new() -> Self {
        let mut home = TempHome::new().unwrap();
        let mut children = Vec::new();
        for (id, cwd) in [
            ("s-a", "/w/repo/a"),
            ("s-b", "/w/repo/b/deep"),
            ("s-x", "/w/repo-x"),
            ("s-o", "/w/other"),
        ] {
            let child = Sleeper::spawn().unwrap();
            home.live_record(&child, id, &format!("name-{id}"), "idle", true);
            let path = home.record_path(child.pid());
            let mut record: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
            record["cwd"] = cwd.into();
            fs::write(&path, record.to_string()).unwrap();
            children.push(child);
        }
        fs::write(
            home.root().join("settings.json"),
            r#"{"crossSessionInbound":"accept"}"#,
        )
        .unwrap();
        let scripts = tempfile::tempdir().unwrap();
        let relay = shell_script(
            scripts.path().join("relay.sh"),
            &format!(
                "cat >/dev/null; echo \"$CLAUDE_PEERS_TARGET_SESSION_ID\" >> '{}'; echo '{{\"sent\":true}}'",
                scripts.path().join("sent").display()
            ),
        )
        .unwrap();
        Self {
            home,
            _children: children,
            scripts,
            relay,
        }
    }

    /// Sends to what `args` choose; the answer and the session ids sent to, in order.
    fn send(&self, args: &[&str]) -> (i32, Value, Vec<String>) {
        let _ = fs::remove_file(self.scripts.path().join("sent"));
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(self.home.root())
            .args(["--json", "send"])
            .args(args)
            .args(["--message", "hi", "--managed-settings"])
            .arg(self.scripts.path().join("none.json"))
            .arg("--")
            .arg(&self.relay)
            .output()
            .unwrap();
        let (code, json, _) = parsed(&out);
        let sent = fs::read_to_string(self.scripts.path().join("sent"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect();
        (code, json, sent)
    }
}

#[test]
fn all_live_and_cwd_choose_exactly_their_sessions_each_once_in_pid_order() {
    let fleet = Fleet::new();
    let mut by_pid = vec!["s-a", "s-b", "s-x", "s-o"];

    let (code, json, mut sent) = fleet.send(&["--all-live"]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(json["delivered"], 4);
    let sent_order = sent.clone();
    sent.sort();
    by_pid.sort_unstable();
    assert_eq!(sent, by_pid);
    let targets: Vec<&str> = json["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets, sent_order,
        "results of chosen sessions come in the order sent"
    );

    let (code, json, mut sent) = fleet.send(&["--cwd", "/w/repo"]);
    assert_eq!(code, 0, "{json}");
    sent.sort();
    assert_eq!(sent, ["s-a", "s-b"], "below /w/repo, not /w/repo-x: {json}");

    // A session named twice over (by id and by name) is sent to once; each target answers.
    let (code, json, sent) = fleet.send(&["s-a", "name-s-a", "s-a"]);
    assert_eq!(code, 0, "{json}");
    assert_eq!(sent, ["s-a"]);
    assert_eq!(json["results"].as_array().unwrap().len(), 3);
    assert_eq!(json["delivered"], 3);
}
