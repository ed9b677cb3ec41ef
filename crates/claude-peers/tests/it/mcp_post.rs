//! `claude-peers mcp` and the post office: `send_message` with `queue` hands a message
//! over as `send --queue` does, and the `outbox` tool lists and cancels what waits.

use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use claude_peer_endpoint::Reply;
use serde_json::{Value, json};

use crate::mcp::Mcp;
use crate::receiver::{Receiver, claude, prepare_home, wait_for};
use crate::serve_send::{cli, kill_post_office, private};

/// A server on `home` whose post office keeps its places under `state`.
fn server(home: &Path, state: &Path) -> Mcp {
    let args: [OsString; 2] = ["--claude".into(), claude().into()];
    Mcp::start_with(home, &args, |command| {
        command
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", state.join("cache"))
            .env("XDG_STATE_HOME", state.join("state"));
    })
}

/// Kills the post office the server started.
struct Started<'a>(&'a Path);

impl Drop for Started<'_> {
    fn drop(&mut self) {
        kill_post_office(self.0);
    }
}

#[test]
fn malformed_queue_and_outbox_calls_are_json_rpc_errors_and_queue_nothing() {
    let home = private();
    let state = private();
    let _started = Started(state.path());
    let mcp = server(home.path(), state.path());
    // Malformed calls are JSON-RPC errors, and nothing is queued.
    for bad in [
        json!({"session_id": "reviewer-9", "message": "x", "expire_s": 5}),
        json!({"session_id": "reviewer-9", "message": "x", "queue": true, "expire_s": 0}),
        json!({"session_id": "reviewer-9", "message": "x", "queue": true, "expire_s": 2_592_001}),
        json!({"message": "x", "queue": true}),
    ] {
        let (code, message) = mcp.rpc_error("send_message", bad.clone());
        assert_eq!(code, -32602, "{bad}: {message}");
    }
    let (code, message) = mcp.rpc_error("outbox", json!({"limit": 0}));
    assert_eq!(code, -32602, "{message}");

    let listed = mcp.ok("outbox", json!({}));
    assert_eq!(listed["waiting"], 0, "{listed}");
    let (code, message) = mcp.rpc_error("outbox", json!({"cancel": [], "retry": ["x"]}));
    assert_eq!(code, -32602, "{message}");
}

#[test]
fn send_message_with_queue_waits_for_its_receiver_and_outbox_lists_and_cancels() {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["project"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = private();
    let _started = Started(state.path());
    let mcp = server(home.path(), state.path());

    let queue = json!({"session_id": "reviewer-9", "message": "for reviewer 9", "from": "agent", "queue": true, "id": "k1"});
    let first = mcp.ok("send_message", queue.clone());
    assert_eq!(
        (first["queued"].clone(), first["state"].clone()),
        (json!(true), json!("waiting")),
        "{first}"
    );
    let again = mcp.ok("send_message", queue);
    assert_eq!(again["id"], first["id"], "the same key is the same message");
    let cancel = mcp.ok(
        "send_message",
        json!({"session_id": "reviewer-9", "message": "cancel me", "from": "agent", "queue": true}),
    );
    let nobody = mcp.tool_error(
        "send_message",
        json!({"session_id": "reviewer-9", "message": "", "queue": true}),
    );
    assert_eq!(nobody["error"], "empty_message", "{nobody}");

    // Once tried, the first says why it waits (the second waits behind it).
    let mut last = Value::Null;
    let listed = wait_for(Duration::from_secs(20), || {
        let listed = mcp.ok("outbox", json!({}));
        last = listed.clone();
        let tried = listed["messages"][0]["reason"]
            .as_str()
            .is_some_and(|reason| reason.starts_with("not_live") && reason.contains("reviewer-9"));
        tried.then_some(listed)
    })
    .unwrap_or_else(|| panic!("each waits for a session named reviewer-9: {last}"));
    let ids: Vec<&Value> = listed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["id"])
        .collect();
    assert_eq!(ids, [&first["id"], &cancel["id"]], "oldest first: {listed}");
    assert_eq!(listed["waiting"], 2);
    assert_eq!(listed["messages"][0]["to_kind"], "name");
    assert_eq!(listed["messages"][0]["from"], "agent");
    let one = mcp.ok("outbox", json!({"limit": 1}));
    assert_eq!(
        (
            one["messages"].as_array().unwrap().len(),
            one["waiting"].clone()
        ),
        (1, json!(2))
    );

    let cancelled = mcp.ok(
        "outbox",
        json!({"cancel": [cancel["id"], "p-no-such-message"]}),
    );
    assert_eq!(
        cancelled["messages"][0]["state"], "cancelled",
        "{cancelled}"
    );
    assert_eq!(
        cancelled["failed"][0]["id"], "p-no-such-message",
        "{cancelled}"
    );
    assert!(cancelled["failed"][0]["error"].is_string(), "{cancelled}");

    // A session named reviewer-9 starts: the waiting message is delivered, once.
    let script = Arc::new(|_: &Value| Reply::Text("Noted.".to_owned()));
    let receiver = Receiver::launch(
        &home,
        "project",
        &[],
        &["CLAUDE_CODE_SESSION_NAME=reviewer-9"],
        script,
    );
    let emptied = wait_for(Duration::from_secs(60), || {
        let listed = mcp.ok("outbox", json!({}));
        (listed["waiting"] == 0).then_some(())
    });
    assert!(emptied.is_some(), "the outbox empties");
    let read = wait_for(Duration::from_secs(30), || {
        (receiver.times_read("for reviewer 9") == 1).then_some(())
    });
    assert!(read.is_some(), "read once");
    assert_eq!(receiver.times_read("cancel me"), 0, "cancelled, never sent");
    let (_, log, _) = cli(home.path(), state.path(), &["log"]);
    let delivered = log
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == first["id"])
        .unwrap();
    assert_eq!(delivered["state"], "delivered", "{delivered}");
    assert_eq!(delivered["session_id"], receiver.session_id.as_str());
}
