//! `doctor`: each check passes on a healthy setup and fails for its real cause.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::process::{Command, Stdio};

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::Sleeper;
use serde_json::{Value, json};

use crate::receiver::{Receiver, claude, old_claude, parsed};
use crate::support::CommandHome as _;

/// Runs `claude-peers --home <home> --json doctor <args>` as a send would run: the
/// receivers' runtime directory (none set), the sender's cache in `cache`.
fn doctor(
    home: &Path,
    cache: &Path,
    args: &[&str],
    adjust: impl FnOnce(&mut Command),
) -> (i32, Value) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(home)
        .args(["--json", "doctor", "--managed-settings"])
        .arg(cache.join("no-managed-settings.json"))
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache)
        .stdin(Stdio::null());
    adjust(&mut command);
    let (code, json, stderr) = parsed(&command.output().unwrap());
    assert!(json.is_object(), "doctor printed no report: {stderr}");
    (code, json)
}

/// The check named `name` of a report.
fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check in {report:#}"))
}

fn failed(report: &Value) -> Vec<&str> {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect()
}

#[test]
fn a_healthy_setup_passes_every_check_and_exits_0() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    let pinned = claude();
    let (code, report) = doctor(
        receiver.home.path(),
        cache.path(),
        &[&receiver.session_id, "--claude", pinned.to_str().unwrap()],
        |_| {},
    );
    assert_eq!((code, &report["ok"]), (0, &json!(true)), "{report:#}");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "claude",
            "messaging",
            "registry",
            "runtime_dir",
            "hooks",
            "endpoint",
            "target",
            "inbound"
        ]
    );
    for check in report["checks"].as_array().unwrap() {
        assert_eq!(
            check["fix"],
            Value::Null,
            "a passing check needs no fix: {check}"
        );
    }
    assert!(
        check(&report, "claude")["detail"]
            .as_str()
            .unwrap()
            .contains("2.1.332")
    );
    assert!(
        check(&report, "inbound")["detail"]
            .as_str()
            .unwrap()
            .contains("accept")
    );
}

#[test]
fn a_claude_too_old_to_message_fails_messaging() {
    let home = tempfile::tempdir().unwrap();
    let old = old_claude();
    let (code, report) = doctor(
        home.path(),
        home.path(),
        &["--claude", old.to_str().unwrap()],
        |_| {},
    );
    assert_eq!(code, 1);
    assert!(
        check(&report, "claude")["detail"]
            .as_str()
            .unwrap()
            .contains("2.1.197"),
        "{report:#}"
    );
    let messaging = check(&report, "messaging");
    assert_eq!(messaging["ok"], false, "{report:#}");
    assert!(messaging["fix"].as_str().unwrap().contains("upgrade"));
}

#[test]
fn a_refusing_receiver_fails_inbound_naming_the_layer() {
    let receiver = Receiver::start(Some("refuse"), &[]);
    let cache = tempfile::tempdir().unwrap();
    let pinned = claude();
    let (code, report) = doctor(
        receiver.home.path(),
        cache.path(),
        &[&receiver.session_id, "--claude", pinned.to_str().unwrap()],
        |_| {},
    );
    assert_eq!((code, failed(&report)), (1, vec!["inbound"]), "{report:#}");
    let detail = check(&report, "inbound")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        detail.contains("refuse") && detail.contains("settings.json"),
        "{detail}"
    );
}

#[test]
fn a_sender_in_another_runtime_directory_fails_runtime_dir() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    let runtime = tempfile::tempdir().unwrap();
    fs::set_permissions(runtime.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let pinned = claude();
    let (code, report) = doctor(
        receiver.home.path(),
        cache.path(),
        &["--claude", pinned.to_str().unwrap()],
        |command| {
            command.env("XDG_RUNTIME_DIR", runtime.path());
        },
    );
    assert_eq!(
        (code, failed(&report)),
        (1, vec!["runtime_dir"]),
        "{report:#}"
    );
    let detail = check(&report, "runtime_dir")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    let theirs = Path::new(&receiver.socket).parent().unwrap();
    assert!(detail.contains(&theirs.display().to_string()), "{detail}");
}

#[test]
fn managed_settings_that_switch_hooks_off_fail_hooks() {
    let home = tempfile::tempdir().unwrap();
    for key in ["disableAllHooks", "allowManagedHooksOnly"] {
        fs::write(
            home.path().join("no-managed-settings.json"),
            json!({ key: true }).to_string(),
        )
        .unwrap();
        let (code, report) = doctor(home.path(), home.path(), &[], |_| {});
        assert_eq!(code, 1);
        let hooks = check(&report, "hooks");
        assert_eq!(hooks["ok"], false, "{key}: {report:#}");
        assert!(hooks["detail"].as_str().unwrap().contains(key));
    }
}

#[test]
fn no_loopback_fails_endpoint() {
    let home = tempfile::tempdir().unwrap();
    // A network namespace of its own, whose loopback is down.
    let mut command = Command::new("unshare");
    command
        .args(["-n", env!("CARGO_BIN_EXE_claude-peers"), "--home"])
        .arg(home.path())
        .args(["--json", "doctor"])
        .env("XDG_CACHE_HOME", home.path());
    let (code, report, stderr) = parsed(&command.output().unwrap());
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(check(&report, "endpoint")["ok"], false, "{report:#}");
}

#[test]
fn a_registry_others_may_write_and_a_dead_target_fail() {
    let home = tempfile::tempdir().unwrap();
    let sessions = home.path().join("sessions");
    fs::create_dir(&sessions).unwrap();
    fs::set_permissions(&sessions, fs::Permissions::from_mode(0o777)).unwrap();
    let (code, report) = doctor(home.path(), home.path(), &["no-such-session"], |_| {});
    assert_eq!(code, 1);
    assert_eq!(check(&report, "registry")["ok"], false, "{report:#}");
    assert_eq!(check(&report, "target")["ok"], false, "{report:#}");
    assert_eq!(check(&report, "inbound")["ok"], false, "{report:#}");
}

#[test]
fn a_claude_only_in_local_bin_is_found_by_doctor_and_by_send() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let user = tempfile::tempdir().unwrap();
    let bin = user.path().join(".local/bin");
    fs::create_dir_all(&bin).unwrap();
    symlink(claude(), bin.join("claude")).unwrap();
    let no_claude_on_path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

    let (_, report) = doctor(receiver.home.path(), user.path(), &[], |command| {
        command
            .env("HOME", user.path())
            .env("PATH", no_claude_on_path);
    });
    let found = check(&report, "claude");
    assert_eq!(found["ok"], true, "{report:#}");
    assert!(
        found["detail"].as_str().unwrap().contains(".local/bin"),
        "{found}"
    );

    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(receiver.home.path())
        .args([
            "--json",
            "send",
            &receiver.session_id,
            "--message",
            "found it",
            "--managed-settings",
        ])
        .arg(user.path().join("none.json"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", user.path())
        .env("HOME", user.path())
        .env("PATH", no_claude_on_path)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (code, json, stderr) = parsed(&output);
    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["receipt"], "read");

    // Nowhere at all: the error names where it looked.
    let (_, report) = doctor(receiver.home.path(), user.path(), &[], |command| {
        command
            .env("HOME", "/nonexistent-home")
            .env("PATH", no_claude_on_path);
    });
    let missing = check(&report, "claude")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        missing.contains("/nonexistent-home/.local/bin/claude")
            && missing.contains("/nonexistent-home/.claude/local/claude"),
        "{missing}"
    );
}

#[test]
fn a_claude_in_the_working_directory_is_never_run_through_an_empty_or_relative_path() {
    let cwd = tempfile::tempdir().unwrap();
    let ran = cwd.path().join("ran");
    let planted = cwd.path().join("claude");
    fs::write(&planted, format!("#!/bin/sh\ntouch {}\n", ran.display())).unwrap();
    fs::set_permissions(
        &planted,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    fs::create_dir(cwd.path().join("bin")).unwrap();
    symlink(&planted, cwd.path().join("bin/claude")).unwrap();
    for path in ["", ":", ".", "bin", "/nonexistent:"] {
        for args in [&["doctor"][..], &["send", "anyone", "--message", "hi"]] {
            let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
                .arg("--home")
                .arg(cwd.path())
                .arg("--json")
                .args(args)
                .current_dir(cwd.path())
                .env("HOME", "/nonexistent-home")
                .env("PATH", path)
                .stdin(Stdio::null())
                .output()
                .unwrap();
            let (_, json, _) = parsed(&output);
            let said = if args[0] == "doctor" {
                check(&json, "claude")["detail"].clone()
            } else {
                json["error"].clone()
            };
            assert!(
                said == "claude_not_found"
                    || said.as_str().is_some_and(|d| d.contains("no Claude Code")),
                "PATH={path:?} {args:?}: {json}"
            );
        }
    }
    assert!(!ran.exists(), "a planted ./claude ran");
}

#[test]
fn the_man_page_names_every_subcommand() {
    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("man")
        .output()
        .unwrap();
    assert!(output.status.success());
    let page = String::from_utf8(output.stdout).unwrap();
    assert!(
        page.starts_with(".ie") || page.contains(".TH"),
        "roff: {}",
        &page[..page.len().min(200)]
    );
    for sub in [
        "list",
        "show",
        "resolve",
        "settings",
        "send",
        "mailbox",
        "watch",
        "mcp",
        "doctor",
        "completions",
        "man",
    ] {
        assert!(page.contains(sub), "the page names `{sub}`");
    }
}

#[test]
fn a_live_session_that_cannot_be_messaged_fails_target_saying_why_by_id_and_by_name() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let id = "0f4c2a9e-2d8b-4c1e-9a57-3b6d1e8f0a21";
    // Live, but its record names no messaging socket.
    home.live_record(&child, id, "mute", "idle", false);
    let cache = tempfile::tempdir().unwrap();
    let no_claude = cache.path().join("no-claude");
    for target in [id, "mute"] {
        let (code, report) = doctor(
            home.root(),
            cache.path(),
            &[target, "--claude", no_claude.to_str().unwrap()],
            |_| {},
        );
        assert_eq!(code, 1, "{report:#}");
        let found = check(&report, "target");
        assert_eq!(found["ok"], false, "{found}");
        assert_eq!(
            found["detail"],
            format!(
                "not_addressable: session {id} is live but cannot be messaged: its record names no messaging socket (Claude Code before peer messaging)"
            ),
            "why it cannot be messaged, for {target}"
        );
        assert!(
            found["fix"].as_str().unwrap().contains("claude-peers list"),
            "{found}"
        );
        assert_eq!(check(&report, "inbound")["ok"], false);
    }
    // An id that nothing runs is not live, in the words a send gives.
    let gone = "5d1e7c3b-8a2f-4e6d-b9c0-1a2b3c4d5e6f";
    let (_, report) = doctor(
        home.root(),
        cache.path(),
        &[gone, "--claude", no_claude.to_str().unwrap()],
        |_| {},
    );
    assert_eq!(
        check(&report, "target")["detail"],
        format!("not_live: no live process runs session {gone}, and no record names it")
    );
}
