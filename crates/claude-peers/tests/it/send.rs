//! `send`: the relay contract end to end, with real relay scripts and live targets.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, shell_script};

use crate::support::{CommandHome as _, redact_json};

/// Writes an executable `#!/bin/sh` script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    shell_script(dir.join(name), body).unwrap()
}

struct Setup {
    home: TempHome,
    child: Sleeper,
    scripts: tempfile::TempDir,
}

fn setup(policy: Option<&str>) -> Setup {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-target", "reviewer", "idle", true);
    if let Some(policy) = policy {
        fs::write(
            home.root().join("settings.json"),
            format!(r#"{{"crossSessionInbound":"{policy}"}}"#),
        )
        .unwrap();
    }
    Setup {
        home,
        child,
        scripts: tempfile::tempdir().unwrap(),
    }
}

impl Setup {
    fn send(
        &self,
        extra: &[&str],
        relay: &Path,
        stdin: Option<&[u8]>,
    ) -> (i32, serde_json::Value, String) {
        let managed = self.scripts.path().join("no-managed-settings.json");
        let mut child = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(self.home.root())
            .args(["--json", "send", "s-target", "--managed-settings"])
            .arg(&managed)
            .args(extra)
            .arg("--")
            .arg(relay)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut input = child.stdin.take().unwrap();
        if let Some(bytes) = stdin {
            input.write_all(bytes).unwrap();
        }
        drop(input);
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let json = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("one JSON value ({e}): {stdout:?}"));
        (
            out.status.code().unwrap(),
            json,
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    fn marker(&self) -> PathBuf {
        self.scripts.path().join("relay-ran")
    }
}

#[test]
fn a_confirmed_send_prints_the_delivery_and_the_relay_gets_message_and_target() {
    let s = setup(Some("accept"));
    let seen = s.scripts.path().join("seen");
    let relay = script(
        s.scripts.path(),
        "ok.sh",
        &format!(
            r#"cat > {seen}.msg; echo "$CLAUDE_PEERS_TARGET_SESSION_ID $CLAUDE_PEERS_TARGET_NAME $CLAUDE_PEERS_TARGET_PID" > {seen}.env; echo '{{"sent":true}}'"#,
            seen = seen.display()
        ),
    );
    let (code, mut json, stderr) = s.send(&["--message", "the build is green"], &relay, None);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["inbound"], "automatic");
    assert_eq!(
        fs::read_to_string(seen.with_extension("msg")).unwrap(),
        "the build is green"
    );
    assert_eq!(
        fs::read_to_string(seen.with_extension("env"))
            .unwrap()
            .trim(),
        format!("s-target reviewer {}", s.child.pid())
    );
    redact_json(&mut json, s.home.root(), &[s.child.pid()]);
    insta::assert_json_snapshot!("send_delivered", json);
}

#[test]
fn the_message_comes_from_stdin_and_hold_or_unset_may_hold_it() {
    for policy in [Some("hold"), None] {
        let s = setup(policy);
        let relay = script(
            s.scripts.path(),
            "ok.sh",
            r#"cat > "$0.msg"; echo '{"sent":true}'"#,
        );
        let (code, json, stderr) = s.send(&[], &relay, Some("from stdin\n".as_bytes()));
        assert_eq!(code, 0, "{stderr}");
        assert_eq!(json["inbound"], "may_hold", "{policy:?}");
        assert_eq!(
            fs::read_to_string(relay.with_extension("sh.msg")).unwrap(),
            "from stdin\n"
        );
    }
}

#[test]
fn refusals_exit_3_and_never_start_the_relay() {
    let s = setup(Some("refuse"));
    let relay = script(
        s.scripts.path(),
        "mark.sh",
        &format!("touch {}; echo '{{\"sent\":true}}'", s.marker().display()),
    );
    let (code, json, _) = s.send(&["--message", "hi"], &relay, None);
    assert_eq!(
        (code, json["refusal"].as_str()),
        (3, Some("inbound_refused"))
    );
    assert!(!s.marker().exists(), "the relay never ran");

    let mut s = setup(Some("accept"));
    let relay = script(
        s.scripts.path(),
        "mark.sh",
        &format!("touch {}; echo '{{\"sent\":true}}'", s.marker().display()),
    );
    s.child.crash().unwrap();
    let (code, json, _) = s.send(&["--message", "hi"], &relay, None);
    assert_eq!((code, json["refusal"].as_str()), (3, Some("not_live")));
    assert!(!s.marker().exists(), "the relay never ran");
}

#[test]
fn a_relay_that_does_not_confirm_is_a_delivery_failure_in_its_own_words() {
    let s = setup(Some("accept"));
    let cases = [
        (
            "fails.sh",
            "cat >/dev/null; echo 'socket is gone' >&2; exit 7",
            "socket is gone",
        ),
        ("garbage.sh", "cat >/dev/null; echo 'hello?'", "hello?"),
        ("hangs.sh", "sleep 30", "killed"),
    ];
    for (name, body, words) in cases {
        let relay = script(s.scripts.path(), name, body);
        let (code, json, _) = s.send(&["--message", "hi", "--timeout", "0.5"], &relay, None);
        assert_eq!(code, 3, "{name}");
        assert_eq!(json["refusal"], "delivery_failed", "{name}");
        assert!(
            json["message"].as_str().unwrap().contains(words),
            "{name}: {json}"
        );
    }
}

/// Arguments, stdin, and the error name expected.
type Case<'a> = (&'a [&'a str], Option<&'a [u8]>, &'a str);

#[test]
fn empty_oversized_and_non_utf8_messages_are_errors_before_anything_is_relayed() {
    let s = setup(Some("accept"));
    let relay = script(
        s.scripts.path(),
        "mark.sh",
        &format!("touch {}; echo '{{\"sent\":true}}'", s.marker().display()),
    );
    let too_big = vec![b'x'; 65_537];
    let cases: [Case<'_>; 4] = [
        (&["--message", ""], None, "empty_message"),
        (&[], Some(b"   \n"), "empty_message"),
        (&[], Some(&too_big), "message_too_large"),
        (&[], Some(b"\xff\xfe"), "message_not_utf8"),
    ];
    for (args, stdin, error) in cases {
        let (code, json, _) = s.send(args, &relay, stdin);
        assert_eq!((code, json["error"].as_str()), (1, Some(error)));
    }
    assert!(!s.marker().exists(), "the relay never ran");
}
