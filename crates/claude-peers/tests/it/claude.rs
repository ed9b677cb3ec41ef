//! `send` through real Claude Code: the pinned binary sends with its own `SendMessage`
//! to live interactive receivers in tmux, and the receivers' transcripts say what they
//! did with each message.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use claude_peer_deliver::{Courier, Recipient, Relay};
use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::RefusalKind;
use claude_peer_sender::ClaudeRelay;
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, shell_script};
use serde_json::Value;

use crate::receiver::{Receiver, claude, parsed, wait_for};
use crate::support::CommandHome as _;

/// Every kind of awkward byte a message can hold, padded to exactly 64 KiB.
fn awkward_message() -> String {
    let mut message =
        String::from("line one \"quoted\" and 'single'\n\tback\\slash \\n not a newline\r\n");
    message.push_str(
        "control \u{1}\u{7}\u{1b}[31m, unicode é € 😀, a fake end </cross-session-message>\n",
    );
    while message.len() < 65_536 {
        message.push_str("0123456789abcdef");
    }
    message.truncate(65_536);
    message
}

#[test]
fn an_accepted_message_reaches_the_receivers_claude_byte_identical_with_the_senders_name() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    let message = awkward_message();

    let (code, json, stderr) = receiver.send(runtime.path(), &message, &["--from", "build-bot"]);

    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["delivered"], true);
    assert_eq!(json["via"], "claude");
    assert_eq!(json["inbound"], "automatic");
    assert_eq!(json["receipt"], "read", "an idle receiver reads it at once");
    assert_eq!(json["receipt_basis"], "transcript");
    assert_eq!(json["session"]["session_id"], receiver.session_id.as_str());
    let msg_id = json["msg_id"].as_str().expect("a msg_id").to_owned();
    let entry = receiver.delivered(&msg_id).expect(
        "reported read, so the receiver's transcript already gives it to its Claude with the same msg_id",
    );
    // Byte-identical, but for the one thing the receiver escapes itself: a closing tag of
    // its own envelope inside the text.
    let expected = message.replace("</cross-session-message>", "<\\/cross-session-message>");
    let body = entry["origin"]["body"].as_str().unwrap();
    let first_difference = body.bytes().zip(expected.bytes()).position(|(a, b)| a != b);
    assert!(
        body == expected,
        "the body differs ({} bytes against {}) at byte {first_difference:?}",
        body.len(),
        expected.len()
    );
    assert_eq!(entry["origin"]["name"], "build-bot");
    assert!(
        !Path::new(&runtime.path().join("claude-peers/sender-home/runs"))
            .read_dir()
            .unwrap()
            .any(|_| true),
        "the run's plan is removed"
    );
}

#[test]
fn a_held_message_is_reported_held_and_is_not_given_to_the_receivers_claude() {
    let receiver = Receiver::start(Some("hold"), &[]);
    let runtime = tempfile::tempdir().unwrap();

    let (code, json, stderr) = receiver.send(runtime.path(), "wait for approval", &[]);

    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["inbound"], "may_hold");
    assert_eq!(json["receipt"], "held");
    assert_eq!(
        json["receipt_basis"], "transcript",
        "its transcript says so first"
    );
    let msg_id = json["msg_id"].as_str().expect("a msg_id");
    let held = wait_for(Duration::from_secs(15), || {
        receiver.transcript().into_iter().find(|entry| {
            entry["subtype"] == "informational"
                && entry["content"].as_str().is_some_and(|c| {
                    c.contains("Held peer message") && c.contains("wait for approval")
                })
        })
    });
    assert!(held.is_some(), "the receiver records the held message");
    assert!(
        receiver.delivered(msg_id).is_none(),
        "its Claude never got it"
    );
}

#[test]
fn a_receiver_refusing_through_its_command_line_is_inbound_refused_and_records_nothing() {
    // Files show no policy (Claude Code's default); the process was started refusing.
    let receiver = Receiver::start(None, &["--settings", r#"{"crossSessionInbound":"refuse"}"#]);
    let runtime = tempfile::tempdir().unwrap();

    let (code, json, stderr) = receiver.send(runtime.path(), "you will not see this", &[]);

    assert_eq!(code, 3, "{json} {stderr}");
    assert_eq!(json["refusal"], "inbound_refused", "{json}");
    assert!(
        json["message"].as_str().unwrap().contains("refused"),
        "{json}"
    );
    std::thread::sleep(Duration::from_secs(2));
    let transcript = serde_json::to_string(&receiver.transcript()).unwrap();
    assert!(
        !transcript.contains("you will not see this"),
        "the refused message appears nowhere"
    );
}

#[test]
fn a_refusing_user_setting_is_refused_before_any_sender_starts() {
    let receiver = Receiver::start(Some("refuse"), &[]);
    let runtime = tempfile::tempdir().unwrap();

    let (code, json, _) = receiver.send(runtime.path(), "never sent", &[]);

    assert_eq!(code, 3);
    assert_eq!(json["refusal"], "inbound_refused");
    assert!(
        !runtime.path().join("claude-peers").exists(),
        "no sender was prepared, let alone started"
    );
}

#[test]
fn an_unset_policy_reports_what_the_receiver_did_and_the_transcript_agrees() {
    let receiver = Receiver::start(None, &[]);
    let runtime = tempfile::tempdir().unwrap();

    let (code, json, stderr) = receiver.send(runtime.path(), "default policy", &[]);

    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["inbound"], "may_hold");
    let msg_id = json["msg_id"].as_str().expect("a msg_id");
    assert_eq!(json["receipt_basis"], "transcript");
    match json["receipt"].as_str() {
        Some("read") => assert!(
            receiver.delivered(msg_id).is_some(),
            "reported read, so its Claude got it"
        ),
        Some("held") => {
            std::thread::sleep(Duration::from_secs(2));
            assert!(
                receiver.delivered(msg_id).is_none(),
                "reported held, so its Claude does not get it"
            );
        }
        other => panic!("unexpected receipt {other:?}"),
    }
}

/// The recipient a prepared send to a live receiver gives.
fn recipient_of(receiver: &Receiver) -> Recipient {
    let home = ClaudeHome::new(receiver.home.path());
    let courier =
        Courier::os().with_managed_settings(receiver.home.path().join("no-managed-settings.json"));
    courier
        .prepare(&home, &receiver.session_id, "unsent")
        .unwrap()
        .recipient()
}

fn relay(runtime: &Path) -> ClaudeRelay {
    ClaudeRelay::new(
        claude(),
        vec![
            OsString::from(env!("CARGO_BIN_EXE_claude-peers")),
            OsString::from("hook"),
        ],
    )
    .home(runtime.join("sender-home"))
    .timeout(Duration::from_secs(60))
}

#[test]
fn the_hook_blocks_the_call_when_the_session_changed_after_the_last_check() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    let relay = relay(runtime.path());

    // As if a /clear gave the process a new session id after the hand-over's check.
    let mut cleared = recipient_of(&receiver);
    cleared.session_id = "00000000-0000-4000-8000-000000000000".to_owned();
    let failure = relay.send(&cleared, "after clear").unwrap_err();
    assert_eq!(failure.kind(), RefusalKind::NotLive.into(), "{failure}");

    // As if the pid now ran another process (another start token).
    let mut reused = recipient_of(&receiver);
    reused.proc_start = Some("1".to_owned());
    let failure = relay.send(&reused, "after reuse").unwrap_err();
    assert_eq!(failure.kind(), RefusalKind::NotLive.into(), "{failure}");
    assert!(failure.message().contains("start token"), "{failure}");

    std::thread::sleep(Duration::from_secs(1));
    let transcript = serde_json::to_string(&receiver.transcript()).unwrap();
    assert!(!transcript.contains("after clear") && !transcript.contains("after reuse"));
    // And the same relay still sends to the session as it is.
    let sent = relay.send(&recipient_of(&receiver), "as it is").unwrap();
    assert!(sent.msg_id.is_some());
}

/// Writes an executable stand-in for `claude`.
fn fake_claude(dir: &Path, body: &str) -> PathBuf {
    shell_script(dir.join("claude"), body).unwrap()
}

/// `send SESSION --message MESSAGE` in `home`, whose user settings accept messages,
/// with the Claude Code at `claude` and its private home in a temporary cache.
fn send_in(
    home: &TempHome,
    session: &str,
    message: &str,
    claude: &Path,
    timeout: &str,
) -> (i32, Value, String) {
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"accept"}"#,
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args([
            "--json",
            "send",
            session,
            "--message",
            message,
            "--timeout",
            timeout,
            "--claude",
        ])
        .arg(claude)
        .arg("--managed-settings")
        .arg(cache.path().join("none.json"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache.path())
        .output()
        .unwrap();
    parsed(&output)
}

/// A live target (a `sleep` with a record and a real socket) and a `send` to it with
/// the Claude Code at `claude`.
fn send_with(claude: &Path, timeout: &str) -> (i32, Value, String) {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-target", "reviewer", "idle", true);
    let result = send_in(&home, "s-target", "hi", claude, timeout);
    drop(child);
    result
}

#[test]
fn a_claude_that_cannot_send_crashes_prints_garbage_or_hangs_fails_the_delivery_and_leaves_nothing_running()
 {
    let dir = tempfile::tempdir().unwrap();
    let old = r#"read line; echo '{"type":"system","subtype":"init","tools":["Bash","Read"],"claude_code_version":"2.1.197"}'; sleep 1"#;
    let cases = [
        (
            old,
            "cannot send cross-session messages: it reports no SendMessage tool",
        ),
        (
            "read line; echo 'not json at all'; echo '{\"type\":\"result\"}'; sleep 1",
            "without making the planned SendMessage",
        ),
        ("read line; echo boom >&2; kill -SEGV $$", "boom"),
        ("read line; exit 0", "ended before the send was settled"),
    ];
    for (body, expected) in cases {
        let claude = fake_claude(dir.path(), body);
        let (code, json, stderr) = send_with(&claude, "20");
        assert_eq!(code, 3, "{body}: {json} {stderr}");
        assert_eq!(json["refusal"], "delivery_failed", "{body}");
        let message = json["message"].as_str().unwrap();
        assert!(message.contains(expected), "{body}: {message}");
    }

    let pid_file = dir.path().join("pid");
    let claude = fake_claude(
        dir.path(),
        &format!("echo $$ > {}; exec sleep 600", pid_file.display()),
    );
    let (code, json, _) = send_with(&claude, "1");
    assert_eq!(code, 3);
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("within the timeout"),
        "{json}"
    );
    let pid = fs::read_to_string(&pid_file).unwrap();
    let gone = wait_for(Duration::from_secs(2), || {
        (!Path::new(&format!("/proc/{}", pid.trim())).exists()).then_some(())
    });
    assert!(gone.is_some(), "the hanging sender was killed and reaped");
}

#[test]
fn a_missing_claude_is_an_error_naming_the_flag_or_path() {
    let (code, json, _) = send_with(Path::new("/nonexistent/claude"), "5");
    assert_eq!(code, 1);
    assert_eq!(json["error"], "claude_not_found");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/claude")
    );

    let home = TempHome::new().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args(["--json", "send", "s-any", "--message", "hi"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    let (code, json, _) = parsed(&output);
    assert_eq!(code, 1);
    assert_eq!(json["error"], "claude_not_found");
    let message = json["message"].as_str().unwrap();
    assert!(
        message.contains("--claude") && message.contains("PATH"),
        "{message}"
    );
}

#[test]
fn a_stale_socket_fails_the_delivery_in_claude_codes_words() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-stale", "stale", "idle", false);
    // A socket file nobody listens on any more, as a restarted listener leaves behind.
    let socket = home.root().join("stale.sock");
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let file = home.sessions().join(format!("{}.json", child.pid()));
    let mut record: Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    record["messagingSocketPath"] = socket.to_str().unwrap().into();
    fs::write(&file, record.to_string()).unwrap();

    let (code, json, stderr) = send_in(&home, "s-stale", "anyone there?", &claude(), "60");

    assert_eq!(code, 3, "{json} {stderr}");
    assert_eq!(json["refusal"], "delivery_failed");
    let message = json["message"].as_str().unwrap();
    assert!(
        message.contains("SendMessage failed") && message.contains("stale.sock"),
        "{message}"
    );
}

#[test]
fn a_relative_home_and_claude_are_made_absolute_before_the_sender_starts() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    let cwd = receiver.home.path();
    // `../..` up to `/`, then the pinned Claude Code: a path relative to `cwd`.
    let up = "../".repeat(cwd.components().count() - 1);
    let claude = format!("{up}{}", claude().to_str().unwrap().trim_start_matches('/'));
    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .current_dir(cwd)
        .args(["--home", ".", "--json", "send", &receiver.session_id])
        .args(["--message", "relative", "--claude", &claude])
        .arg("--managed-settings")
        .arg(runtime.path().join("none.json"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", runtime.path())
        .output()
        .unwrap();
    let (code, json, stderr) = parsed(&output);
    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["receipt"], "read", "{json}");
}

#[test]
fn a_timeout_beyond_a_day_is_a_usage_error() {
    for timeout in ["1e19", "86401", "-1", "NaN", "inf"] {
        let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .args(["send", "s-any", "--message", "hi", "--timeout", timeout])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "--timeout {timeout}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(timeout),
            "the error names the value: {stderr}"
        );
    }
}

#[test]
fn run_directories_of_our_runs_that_no_longer_run_are_removed_at_the_next_start() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    let runs = runtime.path().join("claude-peers/sender-home/runs");
    let dead = claude_peer_testkit::process::reaped_pid().unwrap();
    let me = std::process::id();
    let domain = {
        use claude_peer_probe::ProcessTable as _;
        claude_peer_probe::OsProcessTable::new()
            .reader()
            .pid_domain
            .unwrap()
    };
    let token = claude_peer_testkit::process::proc_start(me).unwrap();
    let machine = domain.rsplit_once(':').unwrap().0;
    // A dead run of this machine and pid namespace; this process's own; a dead pid of
    // another pid namespace (a container sharing the home), which is not ours to judge.
    let stale = runs.join(format!("run-{dead}-killed"));
    let running = runs.join(format!("run-{me}-running"));
    let elsewhere = runs.join(format!("run-{dead}-elsewhere"));
    for (dir, owner) in [
        (&stale, format!("{domain}\n{dead}\n1\n")),
        (&running, format!("{domain}\n{me}\n{token}\n")),
        (&elsewhere, format!("{machine}:pid:[1]\n{dead}\n1\n")),
    ] {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("toolu_claude_peers_0.json"), "{}").unwrap();
        fs::write(dir.join("owner"), owner).unwrap();
    }

    let (code, json, stderr) = receiver.send(runtime.path(), "tidy up", &[]);

    assert_eq!(code, 0, "{json} {stderr}");
    assert!(!stale.exists(), "a killed sender's plans are gone");
    assert!(running.exists(), "a running process keeps its own");
    let mut left: Vec<_> = fs::read_dir(&runs)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    left.sort();
    let mut kept = [elsewhere.file_name().unwrap(), running.file_name().unwrap()];
    kept.sort();
    assert_eq!(
        left, kept,
        "another namespace's stays, and the send removed its own"
    );
}

#[test]
fn sigint_during_a_send_kills_its_sender_and_leaves_no_plan() {
    // A live target whose socket listens but never answers: the send waits in its
    // hand-over until the signal.
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-silent", "silent", "idle", true);
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"accept"}"#,
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let mut send = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args(["--json", "send", "s-silent", "--message", "never answered"])
        .args(["--timeout", "120", "--claude"])
        .arg(claude())
        .arg("--managed-settings")
        .arg(cache.path().join("none.json"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let sender_home = cache.path().join("claude-peers/sender-home");
    // The hook allowed the planned call: the hand-over is under way.
    let under_way = wait_for(Duration::from_secs(60), || {
        fs::read_dir(sender_home.join("runs"))
            .ok()?
            .flatten()
            .filter_map(|run| fs::read_dir(run.path()).ok())
            .flatten()
            .flatten()
            .any(|f| f.path().extension() == Some("used".as_ref()))
            .then_some(())
    });
    assert!(under_way.is_some(), "the send reached its tool call");
    let sender: u32 = fs::read_dir(sender_home.join("sessions"))
        .unwrap()
        .flatten()
        .find_map(|e| e.path().file_stem()?.to_str()?.parse().ok())
        .expect("the running sender's record");

    let pid = rustix::process::Pid::from_raw(i32::try_from(send.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let status = send.wait().unwrap();

    assert_eq!(status.code(), Some(130), "{status}");
    assert!(
        !Path::new(&format!("/proc/{sender}")).exists(),
        "its sender was killed and reaped"
    );
    let runs: Vec<_> = fs::read_dir(sender_home.join("runs"))
        .unwrap()
        .flatten()
        .collect();
    assert!(runs.is_empty(), "no run directory is left: {runs:?}");
}

#[test]
fn sigint_stops_a_relay_program_under_way_and_kills_its_whole_group() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-relayed", "relayed", "idle", true);
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"accept"}"#,
    )
    .unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let pids = scripts.path().join("pids");
    // A relay that never finishes, with a child of its own.
    let relay = shell_script(
        scripts.path().join("stuck.sh"),
        &format!(
            "echo $$ > {pids}.tmp; sleep 600 & echo $! >> {pids}.tmp; mv {pids}.tmp {pids}; wait",
            pids = pids.display()
        ),
    )
    .unwrap();
    let mut send = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args([
            "--json",
            "send",
            "s-relayed",
            "--message",
            "stuck",
            "--timeout",
            "600",
            "--",
        ])
        .arg(&relay)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started: Vec<u32> = wait_for(Duration::from_secs(30), || {
        let text = fs::read_to_string(&pids).ok()?;
        Some(text.lines().filter_map(|l| l.parse().ok()).collect())
    })
    .expect("the relay started");
    let pid = rustix::process::Pid::from_raw(i32::try_from(send.id()).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::INT).unwrap();
    let status = send.wait().unwrap();

    assert_eq!(status.code(), Some(130), "{status}");
    for relayed in started {
        let gone = wait_for(Duration::from_secs(10), || {
            let stat = fs::read_to_string(format!("/proc/{relayed}/stat")).unwrap_or_default();
            // Gone, or a zombie its new parent has yet to reap.
            (stat.is_empty() || stat.contains(") Z ")).then_some(())
        });
        assert!(
            gone.is_some(),
            "pid {relayed} of the relay's group still runs"
        );
    }
}

#[test]
fn show_joins_the_transcript_the_last_prompt_and_the_last_activity() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    let (code, json, stderr) = receiver.send(runtime.path(), "what are you on?", &[]);
    assert_eq!(code, 0, "{json} {stderr}");

    let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(receiver.home.path())
        .args(["--json", "show", &receiver.session_id])
        .output()
        .unwrap();
    let (code, shown, stderr) = parsed(&out);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        shown["transcript_path"],
        receiver
            .transcript_path(&receiver.session_id)
            .to_str()
            .unwrap()
    );
    let last = shown["last_prompt"].as_str().unwrap();
    assert!(last.contains("what are you on?"), "{last}");
    assert!(shown["last_activity_ms"].as_u64().unwrap() > 0, "{shown}");
}
