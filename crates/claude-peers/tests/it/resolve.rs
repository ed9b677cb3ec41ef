//! `resolve`: success and every refusal, with exit codes.

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::Sleeper;

use crate::support::{CommandHome as _, redact_json};

#[test]
fn a_live_addressable_session_resolves_with_exit_0_and_the_session_object() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-live", "reviewer", "idle", true);
    let (code, mut json, _) = home.json(&["resolve", "s-live"]);
    assert_eq!(code, 0);
    assert_eq!(json["addressable"], true);
    redact_json(&mut json, home.root(), &[child.pid()]);
    insta::assert_json_snapshot!("resolve_ok", json);
    let out = home.run(&["resolve", "s-live"]);
    assert_eq!(out.status.code(), Some(0));
    insta::assert_snapshot!(home.redact(&String::from_utf8(out.stdout).unwrap(), &[child.pid()]), @"s-live is live and addressable: pid [PID0], name reviewer, socket [HOME]/socks/[PID0].sock.");
}

#[test]
fn every_refusal_exits_3_with_its_stable_name() {
    let mut home = TempHome::new().unwrap();
    let (twin_a, twin_b, mute) = (
        Sleeper::spawn().unwrap(),
        Sleeper::spawn().unwrap(),
        Sleeper::spawn().unwrap(),
    );
    let mut crashed = Sleeper::spawn().unwrap();
    home.live_record(&twin_a, "s-a", "twin", "idle", true);
    home.live_record(&twin_b, "s-b", "twin", "busy", true);
    home.live_record(&mute, "s-mute", "mute", "idle", false);
    home.live_record(&crashed, "s-crashed", "gone-soon", "idle", true);
    crashed.crash().unwrap();
    let pids = [twin_a.pid(), twin_b.pid(), mute.pid(), crashed.pid()];
    let cases = [
        ("s-crashed", "not_live"),
        ("never-existed", "not_live"),
        ("s-a", "identity_mismatch"),
        ("s-mute", "not_addressable"),
    ];
    for (session, refusal) in cases {
        let (code, mut json, stderr) = home.json(&["resolve", session]);
        assert_eq!(code, 3, "{session}: {stderr}");
        assert_eq!(json["refusal"], refusal, "{session}");
        assert_eq!(
            json.as_object().unwrap().len(),
            2,
            "exactly refusal and message"
        );
        redact_json(&mut json, home.root(), &pids);
        insta::assert_json_snapshot!(format!("refusal_{session}"), json);
    }
}

#[test]
fn a_refusal_of_hostile_text_is_valid_json_and_one_escaped_line_in_words() {
    let mut home = TempHome::new().unwrap();
    let twin = (Sleeper::spawn().unwrap(), Sleeper::spawn().unwrap());
    let name = "x\u{202e}\u{7f}\u{85}\nclaude-peers: delivered";
    home.live_record(&twin.0, "s-1", name, "idle", true);
    home.live_record(&twin.1, "s-2", name, "idle", true);
    for target in ["x\u{202e}\u{7f}\u{85}", name] {
        for command in ["show", "resolve"] {
            // `json` fails the test unless stdout is one JSON value.
            let (code, json, stderr) = home.json(&[command, target]);
            assert_ne!(code, 0, "{json}");
            assert!(json["message"].as_str().is_some(), "{json}");
            assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");
            for hostile in ['\u{202e}', '\u{7f}', '\u{85}', '\n'] {
                assert!(!stderr.trim_end().contains(hostile), "{stderr:?}");
            }
        }
    }
    let refused = home.run(&["resolve", name]);
    let words = String::from_utf8(refused.stderr).unwrap();
    assert_eq!(refused.status.code(), Some(3), "{words}");
    assert!(words.contains(r"\u{a}claude-peers: delivered"), "{words}");
}
