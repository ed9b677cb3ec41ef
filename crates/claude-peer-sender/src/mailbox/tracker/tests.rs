use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Outcome};
use claude_peer_transcript::Fact;

use super::Tracker;
use crate::decider::Waits;

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|&n| n.to_owned()).collect()
}

fn waits(window: Duration) -> Waits {
    Waits {
        window,
        read: Duration::from_secs(60),
    }
}

fn later() -> Instant {
    Instant::now() + Duration::from_millis(1)
}

#[test]
fn quiet_windows_accept_one_receipt_a_receiver_and_notices_settle_what_they_name() {
    let mut tracker = Tracker::new(waits(Duration::ZERO));
    tracker.sent("a", "uds:/r.sock", "s", "text");
    tracker.sent("b", "uds:/r.sock", "s", "text");
    tracker.sent("c", "uds:/s.sock", "s", "text");
    let held = tracker
        .notice(Outcome::Held, "uds:/r.sock", &ids(&["a"]))
        .unwrap();
    assert_eq!(held.msg_ids, ids(&["a"]));
    let accepted = tracker.due(later());
    assert_eq!(accepted.len(), 2, "{accepted:?}");
    assert!(
        accepted
            .iter()
            .any(|r| r.recipient == "uds:/r.sock" && r.msg_ids == ids(&["b"]))
    );
    assert!(tracker.due(later()).is_empty(), "accepted once");
    assert_eq!(
        tracker.unknown(),
        ids(&["a"]),
        "a held message has no final outcome yet"
    );
    let released = tracker
        .notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]))
        .unwrap();
    assert_eq!((released.msg_ids, released.count), (ids(&["a"]), 1));
    assert!(tracker.unknown().is_empty());
}

#[test]
fn a_coalesced_notice_attributes_the_unnamed_only_when_the_count_leaves_no_doubt() {
    let mut tracker = Tracker::new(waits(Duration::from_secs(60)));
    for id in ["a", "b", "c", "d", "e", "f", "g"] {
        tracker.sent(id, "uds:/r.sock", "s", "text");
    }
    tracker.counted("uds:/r.sock", Outcome::Held, 7);
    let all = tracker
        .notice(
            Outcome::Held,
            "uds:/r.sock",
            &ids(&["a", "b", "c", "d", "e"]),
        )
        .unwrap();
    assert_eq!(
        (all.count, all.msg_ids.len()),
        (7, 7),
        "the two unnamed are the two waiting"
    );

    tracker.counted("uds:/r.sock", Outcome::Released, 3);
    let some = tracker
        .notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]))
        .unwrap();
    assert_eq!(
        (some.count, some.msg_ids),
        (3, ids(&["a"])),
        "six wait, three released: which is unknown"
    );
    assert_eq!(tracker.unknown().len(), 6);
}

fn queued(from: &str, text: &str) -> Fact {
    Fact::Queued {
        from: from.to_owned(),
        from_name: None,
        text: text.to_owned(),
    }
}

#[test]
fn transcript_lines_tell_our_messages_by_msg_id_or_by_sender_and_text() {
    let mut tracker = Tracker::new(waits(Duration::ZERO));
    let us = "uds:/me.sock";
    tracker.sent("a", "uds:/r.sock", "s-r", "same words");
    tracker.sent("b", "uds:/r.sock", "s-r", "same words");
    tracker.sent("c", "uds:/r.sock", "s-r", "other words");
    assert_eq!(
        tracker.transcript("s-r", &queued("uds:/someone-else.sock", "same words"), us),
        None,
        "another sender's message with the same text is not ours"
    );
    assert_eq!(
        tracker.transcript("s-other", &queued(us, "same words"), us),
        None
    );
    let first = tracker
        .transcript("s-r", &queued(us, "same words"), us)
        .unwrap();
    let second = tracker
        .transcript("s-r", &queued(us, "same words"), us)
        .unwrap();
    assert_eq!(
        (first.msg_ids, second.msg_ids, first.basis),
        (ids(&["a"]), ids(&["b"]), Basis::Transcript),
        "equal texts are queued in the order they were sent"
    );
    let read = Fact::Read {
        msg_id: "b".to_owned(),
        from: None,
    };
    let read = tracker.transcript("s-r", &read, us).unwrap();
    assert_eq!((read.outcome, read.msg_ids), (Outcome::Read, ids(&["b"])));
    let held = Fact::Held {
        from: us.to_owned(),
        preview: "other wo…".to_owned(),
    };
    let held = tracker.transcript("s-r", &held, us).unwrap();
    assert_eq!(
        (held.outcome, held.basis, held.msg_ids),
        (Outcome::Held, Basis::Transcript, ids(&["c"])),
        "held as its receiver's transcript shows it"
    );
    assert!(
        tracker.due(later()).is_empty(),
        "nothing the transcript told is accepted on silence"
    );
    assert_eq!(
        tracker.unknown(),
        ids(&["c"]),
        "queued is decided, held is not"
    );
    tracker.counted("uds:/r.sock", Outcome::Held, 1);
    assert_eq!(
        tracker.notice(Outcome::Held, "uds:/r.sock", &[]),
        None,
        "its notice is not told again"
    );
    let read_after_release = Fact::Read {
        msg_id: "c".to_owned(),
        from: None,
    };
    assert!(tracker.transcript("s-r", &read_after_release, us).is_some());
    assert!(tracker.unknown().is_empty(), "read is decided");
    let released = tracker
        .notice(Outcome::Released, "uds:/r.sock", &ids(&["c"]))
        .unwrap();
    assert_eq!(
        released.msg_ids,
        ids(&["c"]),
        "a release told after the read"
    );
}

#[test]
fn an_unattributed_rest_counts_only_messages_not_told_it_yet() {
    let mut tracker = Tracker::new(waits(Duration::from_secs(60)));
    let us = "uds:/me.sock";
    for (id, text) in [("a", "one"), ("b", "two"), ("c", "three")] {
        tracker.sent(id, "uds:/r.sock", "s", text);
    }
    for preview in ["one", "two"] {
        let held = Fact::Held {
            from: us.to_owned(),
            preview: preview.to_owned(),
        };
        assert!(tracker.transcript("s", &held, us).is_some());
    }
    // Two held, one named: the other could be any of two (b told, c not).
    tracker.counted("uds:/r.sock", Outcome::Held, 2);
    let notice = tracker
        .notice(Outcome::Held, "uds:/r.sock", &ids(&["a"]))
        .unwrap();
    assert_eq!(
        (notice.msg_ids, notice.count),
        (Vec::<String>::new(), 1),
        "a was told; the rest is at most the one not told"
    );
}

#[test]
fn an_awaited_message_keeps_its_decision_until_it_is_taken() {
    let mut tracker = Tracker::new(waits(Duration::ZERO));
    tracker.sent("a", "uds:/r.sock", "s", "text");
    tracker.await_decision("a");
    assert!(!tracker.awaited_is_decided());
    let read = Fact::Read {
        msg_id: "a".to_owned(),
        from: None,
    };
    assert!(tracker.transcript("s", &read, "uds:/me.sock").is_some());
    assert!(tracker.awaited_is_decided());
    assert_eq!(
        tracker.take_decision().map(|r| r.outcome),
        Some(Outcome::Read)
    );
    assert_eq!(tracker.take_decision(), None, "taken once");

    tracker.sent("b", "uds:/r.sock", "s", "text");
    tracker.await_decision("b");
    assert_eq!(tracker.due(later()).len(), 1);
    assert_eq!(
        tracker.take_decision().map(|r| (r.outcome, r.basis)),
        Some((Outcome::Accepted, Basis::Silence))
    );
    assert!(tracker.unknown().is_empty());
}

#[test]
fn a_held_message_read_before_its_release_is_told_released_by_a_coalesced_notice() {
    let mut tracker = Tracker::new(waits(Duration::from_secs(60)));
    let us = "uds:/me.sock";
    for (id, text) in [("a", "one"), ("b", "two")] {
        tracker.sent(id, "uds:/r.sock", "s", text);
        let held = Fact::Held {
            from: us.to_owned(),
            preview: text.to_owned(),
        };
        assert!(tracker.transcript("s", &held, us).is_some());
    }
    // The receiver's transcript shows them read, then its notice names one of two.
    for id in ["a", "b"] {
        let read = Fact::Read {
            msg_id: id.to_owned(),
            from: None,
        };
        assert!(tracker.transcript("s", &read, us).is_some());
    }
    tracker.counted("uds:/r.sock", Outcome::Released, 2);
    let released = tracker
        .notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]))
        .unwrap();
    assert_eq!((released.msg_ids, released.count), (ids(&["a", "b"]), 2));
    assert!(tracker.unknown().is_empty());
}
