//! `claude-peers mcp` hosts a mailbox: replies to `send_message` reach the calling
//! client through `wait_for_messages`, with a live interactive receiver whose model
//! replies through the pinned Claude Code.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use claude_peer_testkit::home::TempHome;
#[allow(
    deprecated,
    reason = "notifications/message is what the server announces with"
)]
use rmcp::model::{CallToolRequestParams, LoggingMessageNotificationParam};
use rmcp::service::NotificationContext;
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::mailbox::record_name;
use crate::mcp::Mcp;
use crate::receiver::{Receiver, claude, wait_for};

/// A server on `receiver`'s home sending with the pinned Claude Code, its private home
/// in `cache`; sender and receiver share the default runtime directory (see
/// `Receiver::send`).
fn sending_server(receiver: &Receiver, cache: &Path) -> Mcp {
    let args: [OsString; 2] = ["--claude".into(), claude().into()];
    Mcp::start_with(receiver.home.path(), &args, |command| {
        command
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", cache)
            .env("XDG_STATE_HOME", cache.join("state"));
    })
}

#[test]
fn a_reply_to_send_message_comes_back_once_through_wait_for_messages() {
    let reply = "a reply for the MCP client";
    let receiver = Receiver::replying(reply);
    let cache = tempfile::tempdir().unwrap();
    let mcp = sending_server(&receiver, cache.path());

    let sent = mcp.ok(
        "send_message",
        json!({"session_id": receiver.session_id, "message": "please reply", "from": "agent"}),
    );
    assert_eq!(sent["delivered"], true, "{sent}");
    assert!(sent["msg_id"].is_string(), "{sent}");

    let mut events: Vec<Value> = Vec::new();
    let message = wait_for(Duration::from_secs(120), || {
        let got = mcp.ok("wait_for_messages", json!({"timeout_s": 5}));
        events.extend(got["events"].as_array().unwrap().iter().cloned());
        events.iter().find(|e| e["event"] == "message").cloned()
    });
    let message = message.unwrap_or_else(|| {
        panic!(
            "no reply: {events:?}; the receiver's screen:\n{}",
            receiver.screen()
        )
    });
    assert_eq!(message["text"], reply, "{message}");
    assert_eq!(message["session_id"], receiver.session_id.as_str());
    assert_eq!(message["from"], format!("uds:{}", receiver.socket));

    // Each event is returned once: the reply is not returned again.
    for _ in 0..2 {
        let again = mcp.ok("wait_for_messages", json!({"timeout_s": 1}));
        for event in again["events"].as_array().unwrap() {
            assert_ne!(event["event"], "message", "{again}");
            assert!(!events.contains(event), "returned twice: {event}");
        }
    }

    // The history has both, the reply linked to what it answers, as the event said.
    let history = mcp.ok("history", json!({"with": receiver.session_id}));
    let chat = history["messages"].as_array().unwrap();
    let texts: Vec<&str> = chat.iter().map(|r| r["text"].as_str().unwrap()).collect();
    assert_eq!(texts, ["please reply", reply], "{history}");
    assert_eq!(
        (&message["id"], &message["in_reply_to"]),
        (&chat[1]["id"], &chat[0]["id"])
    );
    assert_eq!(chat[1]["inferred"], true);
    // `reply` answers it through the same sender, linked.
    let answered = mcp.ok("reply", json!({"id": message["id"], "message": "thanks"}));
    assert_eq!(answered["delivered"], true, "{answered}");
    let thread = mcp.ok("history", json!({"thread": chat[0]["id"]}));
    let thread = thread["messages"].as_array().unwrap();
    assert_eq!(thread.len(), 3, "{thread:?}");
    assert_eq!(thread[2]["in_reply_to"], message["id"]);
    // A search the index cannot run is a malformed call.
    let (code, words) = mcp.rpc_error("history", json!({"search": "thanks AND"}));
    assert_eq!(code, -32602, "{words}");
    assert!(words.contains("a word is still expected"), "{words}");
}

#[test]
fn a_cancelled_wait_for_messages_takes_nothing_and_the_next_call_gets_the_reply() {
    let reply = "a reply after a cancelled wait";
    let receiver = Receiver::replying(reply);
    let cache = tempfile::tempdir().unwrap();
    let mcp = sending_server(&receiver, cache.path());
    // The client gives up after 2 s on a call that would wait 120.
    let gave_up = mcp.call_within(
        "wait_for_messages",
        json!({"timeout_s": 120}),
        Duration::from_secs(2),
    );
    assert!(
        matches!(gave_up, Err(rmcp::ServiceError::Timeout { .. })),
        "{gave_up:?}"
    );
    let sent = mcp.ok(
        "send_message",
        json!({"session_id": receiver.session_id, "message": "please reply"}),
    );
    assert_eq!(sent["delivered"], true, "{sent}");
    let mut events: Vec<Value> = Vec::new();
    let message = wait_for(Duration::from_secs(60), || {
        let got = mcp.ok("wait_for_messages", json!({"timeout_s": 5}));
        events.extend(got["events"].as_array().unwrap().iter().cloned());
        events.iter().find(|e| e["event"] == "message").cloned()
    });
    let message = message.unwrap_or_else(|| panic!("the reply was lost: {events:?}"));
    assert_eq!(message["text"], reply, "{message}");
}

#[test]
fn wait_for_messages_takes_0_to_300_seconds_and_before_any_send_returns_no_event() {
    let home = TempHome::new().unwrap();
    let mcp = Mcp::start(home.root(), &[]);

    for bad in [json!(-1), json!(301), json!("x")] {
        let (code, message) = mcp.rpc_error("wait_for_messages", json!({"timeout_s": bad}));
        assert_eq!(code, -32602, "{bad}: {message}");
        assert!(message.contains("timeout_s"), "{message}");
    }
    for timeout in [json!(0), json!(0.5)] {
        let waited = mcp.ok("wait_for_messages", json!({"timeout_s": timeout}));
        assert_eq!(waited, json!({"events": []}), "{timeout}");
    }
}

/// A client that hands the test each `notifications/message`, as JSON.
#[derive(Debug, Clone)]
struct Announced(mpsc::UnboundedSender<Value>);

#[allow(
    deprecated,
    reason = "notifications/message is what the server announces with"
)]
impl ClientHandler for Announced {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.0.send(serde_json::to_value(&params).unwrap());
    }
}

#[test]
#[allow(
    deprecated,
    reason = "the logging capability is what the server announces with"
)]
fn a_reply_is_announced_as_a_log_message_once_a_tool_was_called() {
    let reply = "an announced reply";
    let receiver = Receiver::replying(reply);
    let cache = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(receiver.home.path())
        .args(["mcp", "--claude"])
        .arg(claude())
        .arg("--managed-settings")
        .arg(cache.path().join("none.json"))
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache.path());
    let (announced, mut announcements) = mpsc::unbounded_channel();
    let client = runtime.block_on(async {
        Announced(announced)
            .serve(TokioChildProcess::new(command).unwrap())
            .await
            .unwrap()
    });
    let info = client.peer_info().expect("the server introduced itself");
    assert!(
        info.capabilities.logging.is_some(),
        "it announces by logging"
    );

    let arguments = json!({"session_id": receiver.session_id, "message": "please reply"});
    let Value::Object(arguments) = arguments else {
        unreachable!()
    };
    let params = CallToolRequestParams::new("send_message").with_arguments(arguments);
    let sent = runtime.block_on(client.call_tool(params)).unwrap();
    assert_eq!(sent.is_error, Some(false), "{sent:?}");

    let heard = runtime.block_on(async {
        let reply = async {
            while let Some(announcement) = announcements.recv().await {
                if announcement["data"]["event"] == "message" {
                    return Some(announcement);
                }
            }
            None
        };
        tokio::time::timeout(Duration::from_secs(120), reply).await
    });
    let message = heard.ok().flatten().unwrap_or_else(|| {
        panic!(
            "no reply announced; the receiver's screen:\n{}",
            receiver.screen()
        )
    });
    assert_eq!(message["level"], "info", "{message}");
    assert_eq!(message["logger"], "claude-peers", "{message}");
    assert_eq!(message["data"]["text"], reply, "{message}");
    assert_eq!(message["data"]["session_id"], receiver.session_id.as_str());
    runtime.block_on(client.cancel()).unwrap();
}

#[test]
fn notify_when_idle_brings_the_receivers_idle_moment_to_wait_for_messages() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    let mcp = sending_server(&receiver, cache.path());

    let sent = mcp.ok(
        "send_message",
        json!({"session_id": receiver.session_id, "message": "tell me when you are done", "notify_when_idle": true}),
    );
    assert_eq!(sent["delivered"], true, "{sent}");

    let mut events: Vec<Value> = Vec::new();
    let idle = wait_for(Duration::from_secs(60), || {
        let got = mcp.ok("wait_for_messages", json!({"timeout_s": 5}));
        events.extend(got["events"].as_array().unwrap().iter().cloned());
        events.iter().find(|e| e["event"] == "idle").cloned()
    });
    let idle = idle.unwrap_or_else(|| panic!("no idle notice: {events:?}"));
    assert_eq!(idle["session_id"], receiver.session_id.as_str(), "{idle}");
}

#[test]
fn send_message_takes_the_name_of_one_live_session_as_its_session_id() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let name = record_name(&receiver);
    let cache = tempfile::tempdir().unwrap();
    let mcp = sending_server(&receiver, cache.path());
    let sent = mcp.ok(
        "send_message",
        json!({"session_id": name, "message": "sent by name"}),
    );
    assert_eq!(sent["delivered"], true, "{sent}");
    assert_eq!(sent["session"]["session_id"], receiver.session_id.as_str());
    let msg_id = sent["msg_id"].as_str().unwrap().to_owned();
    assert!(
        wait_for(Duration::from_secs(30), || receiver.delivered(&msg_id)).is_some(),
        "the session of that name got it"
    );
}
