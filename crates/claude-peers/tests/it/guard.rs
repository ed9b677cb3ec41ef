//! The sender fails closed: nothing is sent unless its guard hooks run, its private home
//! is refused on a way someone else could change, and strangers connecting to its model
//! do not stop it. Real receivers, the real sender.

use std::ffi::OsString;
use std::fs;
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use claude_peer_deliver::Courier;
use claude_peer_registry::ClaudeHome;
use claude_peer_sender::{ClaudeRelay, Idle, Mailbox};
use serde_json::Value;

use crate::receiver::{Receiver, claude, parsed, wait_for};

/// Whether the receiver's transcript holds `text` anywhere (after a moment for a
/// message in flight to land).
fn received(receiver: &Receiver, text: &str) -> bool {
    std::thread::sleep(Duration::from_secs(1));
    serde_json::to_string(&receiver.transcript())
        .unwrap()
        .contains(text)
}

fn message_of(json: &Value) -> &str {
    json["message"].as_str().unwrap_or_default()
}

#[test]
fn managed_settings_that_switch_hooks_off_refuse_the_send_before_a_sender_starts() {
    let receiver = Receiver::start(Some("accept"), &[]);
    for setting in ["disableAllHooks", "allowManagedHooksOnly"] {
        let cache = tempfile::tempdir().unwrap();
        // The file `Receiver::send` names with --managed-settings.
        let managed = cache.path().join("no-managed-settings.json");
        fs::write(&managed, format!(r#"{{"{setting}":true}}"#)).unwrap();

        let (code, json, stderr) = receiver.send(cache.path(), "never guarded", &[]);

        assert_eq!(code, 1, "{json} {stderr}");
        assert_eq!(json["error"], "hooks_disabled", "{json}");
        assert!(
            message_of(&json).contains(setting)
                && message_of(&json).contains(managed.to_str().unwrap()),
            "{json}"
        );
        assert!(
            !cache.path().join("claude-peers").exists(),
            "no sender was prepared"
        );
    }
    assert!(!received(&receiver, "never guarded"));
}

#[test]
fn a_guard_whose_program_vanished_blocks_and_nothing_is_delivered() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    // A copy of claude-peers, removed once started: its hooks name a program that is gone.
    let bin = tempfile::tempdir().unwrap();
    let program = bin.path().join("claude-peers");
    fs::copy(env!("CARGO_BIN_EXE_claude-peers"), &program).unwrap();
    let child = receiver
        .send_command(Command::new(&program), cache.path(), "sent unguarded")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    fs::remove_file(&program).unwrap();

    let (code, json, stderr) = parsed(&child.wait_with_output().unwrap());

    assert_eq!(code, 3, "{json} {stderr}");
    assert_eq!(json["refusal"], "delivery_failed", "{json}");
    assert!(message_of(&json).contains("hook"), "{json}");
    assert!(!received(&receiver, "sent unguarded"));
}

/// `claude-peers` run in a private mount namespace whose `/etc` shows the files of `etc`
/// over the machine's: Claude Code reads managed settings from `/etc/claude-code`, and
/// a test must not change the machine's own.
fn with_etc(etc: &Path) -> Command {
    let mut unshare = Command::new("unshare");
    unshare
        .args(["--mount", "--propagation", "private", "--", "sh", "-c"])
        .arg(format!(
            "mount -t overlay overlay -o lowerdir='{}':/etc /etc && exec \"$@\"",
            etc.display()
        ))
        .args(["sh", env!("CARGO_BIN_EXE_claude-peers")]);
    unshare
}

fn assert_mounted(stderr: &str) {
    assert!(
        !stderr.contains("unshare:") && !stderr.contains("mount:"),
        "this test needs root to mount managed settings in a private namespace: {stderr}"
    );
}

#[test]
fn a_machine_with_enterprise_mcp_servers_still_sends() {
    // Claude Code refuses --strict-mcp-config beside a managed-mcp.json; the sender then
    // runs without it (the enterprise servers are then the only ones, by Claude Code's
    // own rule), and the message arrives.
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    let etc = tempfile::tempdir().unwrap();
    let policy = etc.path().join("claude-code");
    fs::create_dir(&policy).unwrap();
    fs::write(
        policy.join("managed-mcp.json"),
        r#"{"mcpServers":{"idle":{"type":"stdio","command":"/bin/sh","args":["-c","sleep 5"]}}}"#,
    )
    .unwrap();
    let output = receiver
        .send_command(with_etc(etc.path()), cache.path(), "beside enterprise MCP")
        .arg("--managed-settings")
        .arg(policy.join("managed-settings.json"))
        .output()
        .unwrap();
    let (code, json, stderr) = parsed(&output);
    assert_mounted(&stderr);
    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["receipt"], "read", "{json}");
}

#[test]
fn real_claude_code_skips_hooks_under_managed_switches_and_the_canary_stops_the_send() {
    // The machine's own managed settings, seen only by Claude Code: claude-peers is
    // pointed at another (missing) file, so only the canary can tell.
    let receiver = Receiver::start(Some("accept"), &[]);
    for setting in ["disableAllHooks", "allowManagedHooksOnly"] {
        let cache = tempfile::tempdir().unwrap();
        let etc = tempfile::tempdir().unwrap();
        fs::create_dir(etc.path().join("claude-code")).unwrap();
        fs::write(
            etc.path().join("claude-code/managed-settings.json"),
            format!(r#"{{"{setting}":true}}"#),
        )
        .unwrap();
        let output = receiver
            .send_command(with_etc(etc.path()), cache.path(), "made without its guard")
            .arg("--managed-settings")
            .arg(cache.path().join("no-managed-settings.json"))
            .output()
            .unwrap();
        let (code, json, stderr) = parsed(&output);

        assert_mounted(&stderr);
        assert_eq!(code, 3, "{setting}: {json} {stderr}");
        assert_eq!(json["refusal"], "delivery_failed", "{json}");
        // Claude Code ran the check call with no hook at all (what it does under these
        // settings), and the send stopped there.
        assert!(
            message_of(&json).contains("guard hook did not run")
                && !message_of(&json).contains("hook error"),
            "{setting}: {json}"
        );
    }
    assert!(!received(&receiver, "made without its guard"));
}

#[test]
fn a_sender_home_on_a_way_others_may_write_is_refused_by_name_and_nothing_is_created() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let cache = open.join("cache");

    let (code, json, stderr) = receiver.send(&cache, "into a shared folder", &[]);

    assert_ne!(code, 0, "{json} {stderr}");
    assert!(
        message_of(&json).contains(&format!("`{}`", open.display()))
            && message_of(&json).contains("other users"),
        "{json}"
    );
    assert_eq!(
        fs::read_dir(&open).unwrap().count(),
        0,
        "nothing created in it"
    );
    assert!(!received(&receiver, "into a shared folder"));
}

#[test]
fn six_hundred_idle_connections_to_the_senders_model_do_not_stop_a_send() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let work = tempfile::tempdir().unwrap();
    let hook = vec![
        OsString::from(env!("CARGO_BIN_EXE_claude-peers")),
        OsString::from("hook"),
    ];
    let relay = ClaudeRelay::new(claude(), hook).home(work.path().join("sender-home"));
    let courier = Courier::os().with_managed_settings(work.path().join("none.json"));
    let home = ClaudeHome::new(receiver.home.path());
    let mut mailbox = Mailbox::with_courier(courier, home, &relay).unwrap();
    // The sender's model endpoint, as the sender's environment names it (once it has
    // exec'd Claude Code: until then it has ours); anyone on the machine can connect to it.
    let address = wait_for(Duration::from_secs(10), || {
        let environ = fs::read(format!("/proc/{}/environ", mailbox.pid())).ok()?;
        environ
            .split(|&b| b == 0)
            .find_map(|var| var.strip_prefix(b"ANTHROPIC_BASE_URL=http://"))
            .map(|addr| String::from_utf8(addr.to_vec()).unwrap())
    })
    .expect("the sender's model address");
    let idle: Vec<TcpStream> = (0..600)
        .map(|_| TcpStream::connect(&address).unwrap())
        .collect();

    let sent = mailbox
        .send(&receiver.session_id, "through the crowd", Idle::Ignore)
        .unwrap();

    let msg_id = sent.msg_id.expect("Claude Code sent it");
    assert!(
        wait_for(Duration::from_secs(15), || receiver.delivered(&msg_id)).is_some(),
        "the receiver's Claude got it"
    );
    drop(idle);
    drop(mailbox.close());
}
