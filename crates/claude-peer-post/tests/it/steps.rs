//! A message's one state machine as the store keeps it: posting, steps, keys, claims,
//! expiry, and the lists.

use std::ops::ControlFlow;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Barrier};

use claude_peer_deliver::{Basis, Outcome, Receipt};
use claude_peer_post::{Attempt, LogFilter, Message, NewMessage, State, Step, Store};
use proptest::prelude::*;

use crate::{DAY, NOW, message};

fn store() -> (tempfile::TempDir, PathBuf, Store) {
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = base.path().join("post.db");
    let store = Store::open(&path).unwrap();
    (base, path, store)
}

const READ: Receipt = Receipt {
    outcome: Outcome::Read,
    basis: Basis::Transcript,
};
const QUEUED: Receipt = Receipt {
    outcome: Outcome::Queued,
    basis: Basis::Transcript,
};
const REFUSED: Receipt = Receipt {
    outcome: Outcome::Refused,
    basis: Basis::Notice,
};

fn outbox(store: &Store) -> Vec<Message> {
    let mut all = Vec::new();
    store
        .outbox(|m| {
            all.push(m);
            ControlFlow::Continue(())
        })
        .unwrap();
    all
}

#[test]
fn a_delivered_message_has_its_session_msg_id_receipt_and_every_change_in_its_timeline() {
    let (_base, _path, mut store) = store();
    let id = store
        .post(&message("reviewer", "hi"), NOW)
        .unwrap()
        .message
        .id;
    assert_eq!(id.len(), 16);
    store
        .step(
            &id,
            &Step::Wait("no live session is named reviewer".into()),
            NOW + 1,
        )
        .unwrap();
    // The same reason again is not a change.
    store
        .step(
            &id,
            &Step::Wait("no live session is named reviewer".into()),
            NOW + 2,
        )
        .unwrap();
    store
        .step(&id, &Step::Send(Attempt::to("cb09cfd6")), NOW + 3)
        .unwrap();
    let deliver = Step::Deliver {
        session_id: "cb09cfd6".into(),
        session_name: Some("reviewer".into()),
        msg_id: Some("msg_1".into()),
        receipt: Some(QUEUED),
    };
    store.step(&id, &deliver, NOW + 4).unwrap();
    store.step(&id, &Step::Receipt(READ), NOW + 5).unwrap();
    let done = store.step(&id, &Step::Receipt(READ), NOW + 6).unwrap();
    assert_eq!(done.state, State::Delivered);
    assert_eq!(
        (
            done.session_id.as_deref(),
            done.msg_id.as_deref(),
            done.receipt,
            done.attempts
        ),
        (Some("cb09cfd6"), Some("msg_1"), Some(READ), 1)
    );
    assert_eq!(done.reason, None);
    let timeline: Vec<(State, u64, Option<Receipt>, Option<&str>)> = done
        .timeline
        .iter()
        .map(|c| (c.state, c.at_ms - NOW, c.receipt, c.detail.as_deref()))
        .collect();
    assert_eq!(
        timeline,
        [
            (State::Waiting, 0, None, Some("posted")),
            (
                State::Waiting,
                1,
                None,
                Some("no live session is named reviewer")
            ),
            (
                State::Sending,
                3,
                None,
                Some("attempt 1 to session cb09cfd6")
            ),
            (
                State::Delivered,
                4,
                Some(QUEUED),
                Some("to session cb09cfd6")
            ),
            (State::Delivered, 5, Some(READ), None),
        ]
    );
    // Final: nothing but a receipt applies, and what does not is refused by name.
    let err = store
        .step(&id, &Step::Send(Attempt::to("s")), NOW + 7)
        .unwrap_err();
    assert_eq!(err.as_str(), "not_now");
    assert_eq!(
        err.to_string(),
        format!("message {id} is delivered: it cannot send now")
    );
    assert!(outbox(&store).is_empty());
}

#[test]
fn the_same_key_from_the_same_sender_is_one_message_and_another_text_under_it_is_refused() {
    let (_base, _path, mut store) = store();
    let keyed = NewMessage {
        key: Some("build-1234".into()),
        ..message("reviewer", "the build is green")
    };
    let first = store.post(&keyed, NOW).unwrap();
    let again = store.post(&keyed, NOW + 1000).unwrap();
    assert!(first.fresh && !again.fresh);
    assert_eq!(again.message, first.message);
    let other = NewMessage {
        text: "the build is red".into(),
        ..keyed.clone()
    };
    let err = store.post(&other, NOW).unwrap_err();
    assert_eq!(err.as_str(), "key_in_use");
    assert!(err.to_string().contains(&first.message.id), "{err}");
    // Another sender's same key is its own message.
    let theirs = NewMessage {
        from: "deploy-bot".into(),
        ..keyed
    };
    assert!(store.post(&theirs, NOW).unwrap().fresh);
    assert_eq!(outbox(&store).len(), 2);
}

#[test]
fn two_stores_on_one_file_never_claim_one_message_twice() {
    let (_base, path, mut store) = store();
    let ids: Vec<String> = (0..100)
        .map(|n| {
            store
                .post(&message("r", &format!("m{n}")), NOW)
                .unwrap()
                .message
                .id
        })
        .collect();
    let start = Arc::new(Barrier::new(2));
    let claimers: Vec<_> = (0..2)
        .map(|_| {
            let (path, ids, start) = (path.clone(), ids.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                start.wait();
                ids.iter()
                    .filter(|id| {
                        store
                            .step(id, &Step::Send(Attempt::to("s")), NOW + 1)
                            .is_ok()
                    })
                    .count()
            })
        })
        .collect();
    let claimed: usize = claimers.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(claimed, ids.len(), "each message claimed exactly once");
    for id in &ids {
        assert_eq!(store.get(id).unwrap().unwrap().attempts, 1);
    }
}

#[test]
fn only_waiting_messages_past_their_expiry_expire() {
    let (_base, _path, mut store) = store();
    let soon = NewMessage {
        expires_at_ms: NOW + 3000,
        ..message("reviewer", "soon")
    };
    let due = store.post(&soon, NOW).unwrap().message.id;
    let sending = store.post(&soon, NOW).unwrap().message.id;
    store
        .step(&sending, &Step::Send(Attempt::to("s")), NOW + 1)
        .unwrap();
    let later = store
        .post(&message("reviewer", "later"), NOW)
        .unwrap()
        .message
        .id;
    assert_eq!(store.expire_due(NOW + 2999).unwrap(), Vec::<String>::new());
    assert_eq!(store.expire_due(NOW + 3000).unwrap(), vec![due.clone()]);
    let expired = store.get(&due).unwrap().unwrap();
    assert_eq!(expired.state, State::Expired);
    assert_eq!(
        expired.reason.as_deref(),
        Some("not delivered before its expiry")
    );
    assert_eq!(store.get(&sending).unwrap().unwrap().state, State::Sending);
    assert_eq!(store.get(&later).unwrap().unwrap().state, State::Waiting);
}

#[test]
fn the_outbox_lists_open_messages_oldest_first_and_the_log_filters_newest_first() {
    let (_base, _path, mut store) = store();
    let mut ids = Vec::new();
    for (n, to) in ["ada", "bob", "ada", "cy"].into_iter().enumerate() {
        let at = NOW + n as u64 * 1000;
        ids.push(
            store
                .post(&message(to, &format!("m{n}")), at)
                .unwrap()
                .message
                .id,
        );
    }
    store.step(&ids[1], &Step::Cancel, NOW + 5000).unwrap();
    store
        .step(&ids[3], &Step::Send(Attempt::to("s")), NOW + 5000)
        .unwrap();
    let open: Vec<String> = outbox(&store).into_iter().map(|m| m.id).collect();
    assert_eq!(open, [ids[0].clone(), ids[2].clone(), ids[3].clone()]);

    let log = |filter: LogFilter| {
        let mut texts = Vec::new();
        store
            .log(&filter, |m| {
                texts.push(m.message.text);
                ControlFlow::Continue(())
            })
            .unwrap();
        texts
    };
    assert_eq!(log(LogFilter::default()), ["m3", "m2", "m1", "m0"]);
    let to_ada = LogFilter {
        to: Some("ada".into()),
        ..LogFilter::default()
    };
    assert_eq!(log(to_ada), ["m2", "m0"]);
    let cancelled = LogFilter {
        state: Some(State::Cancelled),
        ..LogFilter::default()
    };
    assert_eq!(log(cancelled), ["m1"]);
    let recent = LogFilter {
        since_ms: Some(NOW + 2000),
        limit: Some(1),
        ..LogFilter::default()
    };
    assert_eq!(log(recent), ["m3"]);
}

#[test]
fn an_unknown_message_is_never_sent_again_until_asked() {
    let (_base, _path, mut store) = store();
    let id = store
        .post(&message("reviewer", "hi"), NOW)
        .unwrap()
        .message
        .id;
    store
        .step(&id, &Step::Send(Attempt::to("s")), NOW + 1)
        .unwrap();
    let unknown = store
        .step(
            &id,
            &Step::Unknown("the receiver's transcript cannot be read".into()),
            NOW + 2,
        )
        .unwrap();
    assert_eq!(unknown.state, State::Unknown);
    assert_eq!(
        store
            .step(&id, &Step::Send(Attempt::to("s")), NOW + 3)
            .unwrap_err()
            .as_str(),
        "not_now"
    );
    assert_eq!(
        store.step(&id, &Step::Retry, NOW + 4).unwrap().state,
        State::Waiting
    );
    assert_eq!(
        store
            .step(&id, &Step::Send(Attempt::to("s")), NOW + 5)
            .unwrap()
            .attempts,
        2
    );
}

/// Any step, for the property below.
fn any_step() -> impl Strategy<Value = Step> {
    let receipt = prop_oneof![Just(READ), Just(QUEUED)];
    prop_oneof![
        prop_oneof![Just("a"), Just("b")].prop_map(|r| Step::Wait(r.to_owned())),
        Just(Step::Send(Attempt::to("s"))),
        prop::option::of(receipt.clone()).prop_map(|receipt| Step::Deliver {
            session_id: "s".into(),
            session_name: None,
            msg_id: None,
            receipt
        }),
        (0..10_000_u64).prop_map(|retry_at_ms| Step::Fail {
            reason: "relay failed".into(),
            retry_at_ms
        }),
        prop_oneof![Just(READ), Just(QUEUED), Just(REFUSED)].prop_map(Step::Receipt),
        Just(Step::Refuse("refuses".into())),
        Just(Step::Expire),
        Just(Step::Cancel),
        Just(Step::Unknown("cannot tell".into())),
        Just(Step::Retry),
        Just(Step::Note("idle".into())),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The store follows the state machine exactly: a step applies when `Step::from`
    /// says so and is refused otherwise, the timeline grows by one for each change that
    /// records something new, and attempts count the claims.
    #[test]
    fn the_store_follows_the_one_state_machine(steps in prop::collection::vec(any_step(), 1..24)) {
        let (_base, _path, mut store) = store();
        let id = store.post(&message("reviewer", "hi"), NOW).unwrap().message.id;
        let mut state = State::Waiting;
        let mut reason = Some("posted".to_owned());
        let mut receipt = None;
        let mut changes = 1;
        let mut attempts = 0;
        let mut not_before = 0;
        for (at, step) in (1..).zip(&steps) {
            let answer = store.step(&id, step, NOW + at);
            let Some(next) = step.from(state) else {
                prop_assert_eq!(answer.unwrap_err().as_str(), "not_now");
                continue;
            };
            let message = answer.unwrap();
            let same = match step {
                Step::Wait(r) => state == State::Waiting && reason.as_deref() == Some(r),
                Step::Receipt(r) => receipt == Some(*r),
                _ => false,
            };
            if !same {
                changes += 1;
            }
            match step {
                Step::Send(_) => { attempts += 1; reason = None; }
                Step::Wait(r) | Step::Refuse(r) | Step::Unknown(r) => reason = Some(r.clone()),
                Step::Fail { reason: r, retry_at_ms } => {
                    reason = Some(r.clone());
                    not_before = *retry_at_ms;
                }
                Step::Deliver { receipt: r, .. } => { receipt = *r; reason = None; }
                Step::Receipt(r) => {
                    receipt = Some(*r);
                    if r.outcome == Outcome::Refused {
                        reason = Some("its receiver refused it on arrival".into());
                    }
                }
                Step::Expire => reason = Some("not delivered before its expiry".into()),
                Step::Retry => reason = Some("asked to retry".into()),
                Step::Cancel => reason = None,
                Step::Note(_) => {}
            }
            state = next;
            prop_assert_eq!(message.state, state);
            prop_assert_eq!(&message.reason, &reason);
            prop_assert_eq!(message.receipt, receipt);
            prop_assert_eq!(message.attempts, attempts);
            prop_assert_eq!(message.not_before_ms, not_before);
            prop_assert_eq!(message.timeline.len(), changes);
        }
        let open = !state.is_final();
        prop_assert_eq!(outbox(&store).len(), usize::from(open));
        prop_assert!(store.get(&id).unwrap().unwrap().expires_at_ms == NOW + DAY);
    }
}
