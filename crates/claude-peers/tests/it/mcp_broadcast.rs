//! `send_message` with `session_ids`, to live interactive receivers through the pinned
//! Claude Code: every target answered in one result, through the server's one sender,
//! which later calls use too.

use std::ffi::OsString;
use std::fs;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use crate::mcp::Mcp;
use crate::receiver::{Receiver, counting_claude, prepare_home, wait_for};

#[test]
fn send_message_with_session_ids_answers_each_target_through_one_sender() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["a", "b"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let receivers = [
        Receiver::start_in(&home, "a", &[]),
        Receiver::start_in(&home, "b", &[]),
    ];
    let cache = tempfile::tempdir().unwrap();
    // The Claude Code that sends, counting its starts.
    let (counting, starts) = counting_claude(cache.path());
    let args: [OsString; 2] = ["--claude".into(), counting.into()];
    // Sender and receivers share the default runtime directory (see `Receiver::send`).
    let mcp = Mcp::start_with(home.path(), &args, |command| {
        command
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", cache.path());
    });
    let dead = "00000000-0000-4000-8000-000000000000";
    let (a, b) = (&receivers[0].session_id, &receivers[1].session_id);

    for arguments in [
        json!({"session_id": a, "session_ids": [b], "message": "x"}),
        json!({"message": "x"}),
        json!({"session_ids": [], "message": "x"}),
    ] {
        let (code, message) = mcp.rpc_error("send_message", arguments);
        assert_eq!(code, -32602, "{message}");
        assert!(message.contains("session_ids"), "{message}");
    }
    assert!(!starts.exists(), "no sender was started for a bad call");

    let text = "one message, two sessions";
    let json = mcp.ok(
        "send_message",
        json!({"session_ids": [a, b, dead], "message": text, "from": "tester"}),
    );

    assert_eq!(
        (json["delivered"].clone(), json["failed"].clone()),
        (json!(2), json!(1)),
        "{json}"
    );
    let results = json["results"].as_array().unwrap();
    let targets: Vec<&str> = results
        .iter()
        .map(|r| r["target"].as_str().unwrap())
        .collect();
    assert_eq!(targets, [a.as_str(), b.as_str(), dead], "as given");
    for (result, receiver) in results.iter().zip(&receivers) {
        assert_eq!(result["delivered"], true, "{result}");
        assert_eq!(result["via"], "claude", "{result}");
        assert_eq!(
            result["session"]["session_id"],
            receiver.session_id.as_str()
        );
    }
    assert_eq!(results[2]["refusal"], "not_live", "{json}");
    for receiver in &receivers {
        let read = wait_for(Duration::from_secs(30), || {
            (receiver.times_read(text) > 0).then_some(())
        });
        assert!(read.is_some(), "it read the message: {}", receiver.screen());
        assert_eq!(receiver.times_read(text), 1, "read exactly once");
    }
    let again = mcp.ok(
        "send_message",
        json!({"session_id": a, "message": "and once more", "from": "tester"}),
    );
    assert_eq!(again["delivered"], true, "{again}");
    assert_eq!(
        fs::read_to_string(&starts).unwrap().lines().count(),
        1,
        "one sender served the whole call, and the next"
    );
}
