//! What reaches the user's terminal: fields that come from files (names, working
//! directories, tmux panes) are escaped in text output and exact in JSON, and the
//! commands that read one session warn of a registry directory others may write.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, shell_script};
use serde_json::Value;

use crate::support::CommandHome as _;

/// A cwd that would clear the screen and retitle the window, and a name that would
/// forge a line and turn the rest of it around.
const CWD: &str = "/work/\u{1b}[2J\u{1b}]0;owned\u{7}project\u{9b}31m";
const NAME: &str = "reviewer\nFAKE LINE\u{202e}txt.exe";

/// A live session whose record carries [`CWD`], [`NAME`] and a tmux pane like them.
fn hostile_home() -> (TempHome, Sleeper) {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-x", "reviewer", "idle", true);
    let path = home.record_path(child.pid());
    let mut record: Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    record["cwd"] = CWD.into();
    record["name"] = NAME.into();
    record["tmux"] = "%1\u{1b}[5m".into();
    fs::write(&path, record.to_string()).unwrap();
    (home, child)
}

/// Neither raw escape-starting bytes (ESC, the C1 CSI) nor the bidi override reach the
/// output, and the forged line is not a line of its own.
fn assert_escaped(what: &str, text: &str) {
    assert!(
        !text.contains(['\u{1b}', '\u{9b}', '\u{7}', '\u{202e}']),
        "{what} printed raw control characters: {text:?}"
    );
    assert!(
        !text.lines().any(|line| line.starts_with("FAKE LINE")),
        "{what} let a name forge a line: {text}"
    );
}

#[test]
fn control_characters_from_records_are_escaped_in_text_and_exact_in_json() {
    let (home, child) = hostile_home();
    for args in [
        &["list"][..],
        &["list", "--all"],
        &["show", "s-x"],
        &["resolve", "s-x"],
    ] {
        let out = home.run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_escaped(&format!("{args:?}"), &stdout);
        assert_escaped(
            &format!("{args:?} stderr"),
            &String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            stdout.contains("\\u{a}FAKE LINE\\u{202e}"),
            "{args:?} shows what is there: {stdout}"
        );
        if args[0] != "resolve" {
            assert!(stdout.contains("\\u{1b}[2J"), "{args:?}: {stdout}");
        }
    }
    let (_, json, _) = home.json(&["show", "s-x"]);
    assert_eq!(json["cwd"], CWD, "JSON keeps the bytes exact");
    assert_eq!(json["name"], NAME);

    // A send's sentence names the session too.
    let scripts = tempfile::tempdir().unwrap();
    let relay = shell_script(
        scripts.path().join("ok.sh"),
        r#"cat >/dev/null; echo '{"sent":true}'"#,
    )
    .unwrap();
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"accept"}"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args(["send", "s-x", "--message", "hi", "--managed-settings"])
        .arg(scripts.path().join("none.json"))
        .arg("--")
        .arg(&relay)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_escaped("send", &String::from_utf8(out.stdout).unwrap());
    drop(child);
}

#[test]
fn send_and_resolve_warn_of_a_registry_others_may_write() {
    let (home, _child) = hostile_home();
    fs::set_permissions(home.sessions(), fs::Permissions::from_mode(0o777)).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let relay = shell_script(
        scripts.path().join("ok.sh"),
        r#"cat >/dev/null; echo '{"sent":true}'"#,
    )
    .unwrap();
    let resolve = home.run(&["resolve", "s-x"]);
    let send = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(home.root())
        .args([
            "--json",
            "send",
            "s-x",
            "--message",
            "hi",
            "--managed-settings",
        ])
        .arg(scripts.path().join("none.json"))
        .arg("--")
        .arg(&relay)
        .output()
        .unwrap();
    let list = home.run(&["list"]);
    for (what, out) in [("resolve", resolve), ("send", send), ("list", list)] {
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(
            stderr.contains("warning:") && stderr.contains("writable"),
            "{what} warns as list does: {stderr}"
        );
    }
}
