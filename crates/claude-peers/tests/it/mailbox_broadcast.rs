//! `claude-peers mailbox` requests with `session_ids`: each session sent to once through
//! the mailbox's one sender, in pid order, each target answered by its own event.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mailbox::{MailboxProcess, is};
use crate::receiver::{Receiver, prepare_home, wait_for};

/// Whether `event` answers request `id`.
fn answers(event: &Value, id: &str) -> bool {
    event["id"] == id
        && ["sent", "refused", "error", "cancelled"]
            .iter()
            .any(|e| is(event, e))
}

#[test]
fn session_ids_sends_each_session_once_in_pid_order_and_answers_every_target() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["a", "b"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let (a, b) = (
        Receiver::start_in(&home, "a", &[]),
        Receiver::start_in(&home, "b", &[]),
    );
    let mut mailbox = MailboxProcess::start(home.path());
    let dead = "00000000-0000-4000-8000-000000000000";

    // Both or neither of `session_id` and `session_ids`: an error naming the problem.
    for (id, send) in [
        (
            "both",
            json!({"session_id": a.session_id, "session_ids": [b.session_id], "message": "x"}),
        ),
        ("neither", json!({"message": "x"})),
        ("empty", json!({"session_ids": [], "message": "x"})),
    ] {
        mailbox.request(&json!({"id": id, "send": send}).to_string());
        let error = mailbox.until(Duration::from_secs(30), |e| answers(e, id));
        let error = error.last().unwrap();
        assert!(is(error, "error"), "{error}");
        assert!(
            error["message"].as_str().unwrap().contains("session_ids"),
            "{error}"
        );
        assert!(error.get("target").is_none(), "{error}");
    }
    // A single send's answer has no `target`.
    mailbox
        .request(&json!({"id": "one", "send": {"session_id": dead, "message": "x"}}).to_string());
    let single = mailbox.until(Duration::from_secs(30), |e| answers(e, "one"));
    let single = single.last().unwrap();
    assert_eq!(single["refusal"], "not_live", "{single}");
    assert!(single.get("target").is_none(), "{single}");

    let text = "to both of you, once";
    let targets = [&a.session_id, dead, &b.session_id, &a.session_id];
    mailbox.request(
        &json!({"id": "many", "send": {"session_ids": targets, "message": text}}).to_string(),
    );
    let mut events = Vec::new();
    while events.iter().filter(|e| answers(e, "many")).count() < 4 {
        events.extend(mailbox.until(Duration::from_secs(60), |e| answers(e, "many")));
    }
    let answered: Vec<&Value> = events.iter().filter(|e| answers(e, "many")).collect();
    let of = |target: &str| -> Vec<&Value> {
        answered
            .iter()
            .copied()
            .filter(|e| e["target"] == target)
            .collect()
    };
    assert_eq!(
        answered[0]["target"], dead,
        "refused at once: {answered:#?}"
    );
    assert_eq!(
        (
            answered[0]["event"].as_str(),
            answered[0]["refusal"].as_str()
        ),
        (Some("refused"), Some("not_live")),
        "{answered:#?}"
    );
    let for_a = of(&a.session_id);
    assert_eq!(for_a.len(), 2, "{answered:#?}");
    assert_eq!(for_a[0], for_a[1], "the repeat answered as its first");
    for (receiver, sent) in [(&a, for_a[0]), (&b, of(&b.session_id)[0])] {
        assert!(is(sent, "sent"), "{sent}");
        assert_eq!(sent["session"]["session_id"], receiver.session_id.as_str());
    }
    let sent_order: Vec<&str> = answered
        .iter()
        .filter(|e| is(e, "sent"))
        .map(|e| e["target"].as_str().unwrap())
        .collect();
    let mut by_pid = [&a, &b];
    by_pid.sort_by_key(|r| r.pid);
    assert_eq!(
        sent_order.first().copied(),
        Some(by_pid[0].session_id.as_str()),
        "sent in pid order: {answered:#?}"
    );

    // Closing waits out the receipt windows: every send is known by then.
    mailbox.stdin.take();
    let closed = mailbox.until(Duration::from_secs(30), |e| is(e, "closed"));
    assert_eq!(closed.last().unwrap()["unknown"], json!([]));
    for receiver in [&a, &b] {
        let read = wait_for(Duration::from_secs(30), || {
            (receiver.times_read(text) > 0).then_some(())
        });
        assert!(read.is_some(), "it read the message: {}", receiver.screen());
        assert_eq!(receiver.times_read(text), 1, "read exactly once");
    }
}
