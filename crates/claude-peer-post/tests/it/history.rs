//! The history as the store keeps it: messages in linked to what they answer, the
//! conversation, search, threads, retention, and export and import.

use std::ops::ControlFlow;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use claude_peer_deliver::{Basis, Outcome, Receipt};
use claude_peer_post::protocol::Record;
use claude_peer_post::{
    Attempt, Direction, Inbound, LogFilter, MARK_END, MARK_START, Order, Retention, State, Step,
    Store,
};

use crate::{DAY, NOW, message};

fn store() -> (tempfile::TempDir, Store) {
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let store = Store::open(&base.path().join("post.db")).unwrap();
    (base, store)
}

/// Posts `text` to `name` and delivers it to `session`, at `at`: its post id.
fn delivered(store: &mut Store, name: &str, session: &str, text: &str, at: u64) -> String {
    let id = store.post(&message(name, text), at).unwrap().message.id;
    store
        .step(&id, &Step::Send(Attempt::to(session)), at)
        .unwrap();
    let deliver = Step::Deliver {
        session_id: session.to_owned(),
        session_name: Some(name.to_owned()),
        msg_id: None,
        receipt: Some(Receipt {
            outcome: Outcome::Read,
            basis: Basis::Transcript,
        }),
    };
    store.step(&id, &deliver, at).unwrap();
    id
}

fn reply(session: Option<&str>, name: &str, text: &str) -> Inbound {
    Inbound {
        to: "build-bot".to_owned(),
        from_name: Some(name.to_owned()),
        from_address: "uds:/tmp/cc-socks/1.sock".to_owned(),
        session_id: session.map(str::to_owned),
        text: text.to_owned(),
    }
}

fn texts(store: &Store, filter: &LogFilter) -> Vec<String> {
    let mut texts = Vec::new();
    store
        .log(filter, |logged| {
            texts.push(logged.message.text);
            ControlFlow::Continue(())
        })
        .unwrap();
    texts
}

fn records(store: &Store) -> Vec<Record> {
    let mut all = Vec::new();
    let filter = LogFilter {
        order: Order::OldestFirst,
        ..LogFilter::default()
    };
    store
        .log(&filter, |logged| {
            all.push(Record::from(&logged.message));
            ControlFlow::Continue(())
        })
        .unwrap();
    all
}

#[test]
fn a_reply_answers_the_latest_message_its_sender_delivered_to_that_session() {
    let (_base, mut store) = store();
    let first = delivered(&mut store, "reviewer", "s-rev", "review PR 12", NOW);
    let second = delivered(&mut store, "reviewer", "s-rev", "and PR 13", NOW + 10);
    delivered(&mut store, "tester", "s-test", "run the suite", NOW + 20);
    let answer = store
        .receive(
            &reply(Some("s-rev"), "reviewer", "PR 13 looks good"),
            NOW + 30,
        )
        .unwrap();
    assert_eq!(
        (answer.direction, answer.state, answer.from.as_str()),
        (Direction::In, State::Received, "reviewer")
    );
    assert_eq!(answer.in_reply_to.as_deref(), Some(second.as_str()));
    assert!(answer.inferred);
    assert_eq!(answer.session_id.as_deref(), Some("s-rev"));
    assert_eq!(answer.to.value(), "build-bot");
    // From a session nobody sent to, or one that cannot be told: answers nothing.
    let stray = store
        .receive(&reply(Some("s-other"), "other", "hello"), NOW + 40)
        .unwrap();
    assert_eq!((stray.in_reply_to, stray.inferred), (None, false));
    let unknown = store
        .receive(&reply(None, "ghost", "boo"), NOW + 50)
        .unwrap();
    assert_eq!(unknown.in_reply_to, None);

    // The conversation with the reviewer, by name or by id, both ways, as a chat reads.
    let chat = |with: &str, limit| LogFilter {
        with: Some(with.to_owned()),
        order: Order::OldestFirst,
        limit,
        ..LogFilter::default()
    };
    let expected = ["review PR 12", "and PR 13", "PR 13 looks good"];
    assert_eq!(texts(&store, &chat("reviewer", None)), expected);
    assert_eq!(texts(&store, &chat("s-rev", None)), expected);
    assert_eq!(texts(&store, &chat("s-rev", Some(2))), expected[1..]);
    let replies = LogFilter {
        direction: Some(Direction::In),
        ..LogFilter::default()
    };
    assert_eq!(
        texts(&store, &replies),
        ["boo", "hello", "PR 13 looks good"]
    );

    // The thread of the second message: it and its reply; the first stands alone.
    let thread = |id: &str| LogFilter {
        thread: Some(id.to_owned()),
        order: Order::OldestFirst,
        ..LogFilter::default()
    };
    assert_eq!(
        texts(&store, &thread(&second)),
        ["and PR 13", "PR 13 looks good"]
    );
    assert_eq!(texts(&store, &thread(&first)), ["review PR 12"]);
}

#[test]
fn a_thread_follows_replies_transitively_and_a_loop_ends() {
    let (_base, mut store) = store();
    let root = delivered(&mut store, "reviewer", "s-rev", "root", NOW);
    let answer = store
        .receive(&reply(Some("s-rev"), "reviewer", "answer"), NOW + 1)
        .unwrap();
    let mut follow = message("reviewer", "follow-up");
    follow.in_reply_to = Some(answer.id.clone());
    let follow = store.post(&follow, NOW + 2).unwrap().message;
    assert_eq!(
        (follow.in_reply_to.as_deref(), follow.inferred),
        (Some(answer.id.as_str()), false)
    );
    let filter = LogFilter {
        thread: Some(root),
        order: Order::OldestFirst,
        ..LogFilter::default()
    };
    assert_eq!(texts(&store, &filter), ["root", "answer", "follow-up"]);
    // A message that answers itself (as an imported file could say) is listed once.
    let mut own = message("reviewer", "own");
    own.in_reply_to = Some("0000000000000000".to_owned());
    store.post(&own, NOW + 3).unwrap();
    let filter = LogFilter {
        thread: Some("0000000000000000".to_owned()),
        ..LogFilter::default()
    };
    assert_eq!(texts(&store, &filter), ["own"]);
}

#[test]
fn search_finds_words_newest_first_marks_them_and_names_a_bad_search() {
    let (_base, mut store) = store();
    delivered(&mut store, "reviewer", "s-rev", "the build is green", NOW);
    delivered(
        &mut store,
        "reviewer",
        "s-rev",
        "the deploy is red",
        NOW + 1,
    );
    store
        .receive(
            &reply(Some("s-rev"), "reviewer", "Green again, after the build"),
            NOW + 2,
        )
        .unwrap();
    let search = |text: &str| LogFilter {
        search: Some(text.to_owned()),
        ..LogFilter::default()
    };
    assert_eq!(
        texts(&store, &search("green")),
        ["Green again, after the build", "the build is green"]
    );
    assert_eq!(texts(&store, &search("\"is red\"")), ["the deploy is red"]);
    assert_eq!(texts(&store, &search("gre*")).len(), 2);
    assert_eq!(
        texts(&store, &search("build NOT green")),
        Vec::<String>::new()
    );
    let mut marked = Vec::new();
    store
        .log(&search("green"), |logged| {
            marked.push(logged.marked.unwrap());
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(
        marked[1],
        format!("the build is {MARK_START}green{MARK_END}")
    );
    for (bad, words) in [
        ("\"unbalanced", "a quote is not closed"),
        ("green AND", "ends where a word is still expected"),
        ("AND green", "need words on both sides"),
        ("( green", "ends where a word is still expected"),
        ("colour:green", "picks a column"),
        ("   ", "the search is empty"),
    ] {
        let err = store
            .log(&search(bad), |_| ControlFlow::Continue(()))
            .unwrap_err();
        assert_eq!(err.as_str(), "bad_search", "{bad}: {err}");
        let text = err.to_string();
        assert!(text.contains(words), "{bad}: {text}");
        assert!(!text.contains("fts5"), "{bad}: no SQLite words: {text}");
    }
}

#[test]
fn retention_prunes_the_oldest_final_messages_and_never_one_still_waiting() {
    let (_base, mut store) = store();
    let waiting = store
        .post(&message("nobody", "still waiting"), NOW)
        .unwrap();
    for i in 0..10 {
        delivered(&mut store, "reviewer", "s-rev", &format!("m{i}"), NOW + i);
    }
    store
        .receive(&reply(Some("s-rev"), "reviewer", "old reply"), NOW + 20)
        .unwrap();
    let keep_four = Retention {
        max_messages: 4,
        max_age: Duration::from_secs(365 * 86_400),
    };
    assert_eq!(store.prune(&keep_four, NOW + DAY).unwrap(), 8);
    let left = texts(&store, &LogFilter::default());
    assert_eq!(left, ["old reply", "m9", "m8", "still waiting"]);
    let search = LogFilter {
        search: Some("m0".to_owned()),
        ..LogFilter::default()
    };
    assert!(
        texts(&store, &search).is_empty(),
        "a pruned text is not found"
    );
    // Older than the age allowed: gone, however few there are.
    let week = Retention {
        max_messages: 1_000_000,
        max_age: Duration::from_secs(7 * 86_400),
    };
    assert_eq!(store.prune(&week, NOW + 8 * DAY).unwrap(), 3);
    let left = texts(&store, &LogFilter::default());
    assert_eq!(left, ["still waiting"]);
    assert_eq!(
        store.get(&waiting.message.id).unwrap().unwrap().state,
        State::Waiting
    );
}

#[test]
fn an_export_imported_into_an_empty_store_is_the_same_log_and_again_skips_all() {
    let (_base, mut store) = store();
    let id = delivered(&mut store, "reviewer", "s-rev", "tab\there \u{1b}[2J", NOW);
    store
        .receive(&reply(Some("s-rev"), "reviewer", "ok"), NOW + 1)
        .unwrap();
    let mut keyed = message("nobody", "keyed");
    keyed.key = Some("k1".to_owned());
    store.post(&keyed, NOW + 2).unwrap();
    store
        .step(
            &id,
            &Step::Note("its receiver finished its turn".to_owned()),
            NOW + 3,
        )
        .unwrap();
    let exported: String = records(&store)
        .iter()
        .map(|r| serde_json::to_string(r).unwrap() + "\n")
        .collect();
    let (_other, mut empty) = self::store();
    let done = empty.import("export.jsonl", exported.as_bytes()).unwrap();
    assert_eq!((done.imported, done.skipped), (3, 0));
    assert_eq!(records(&empty), records(&store));
    let again = empty.import("export.jsonl", exported.as_bytes()).unwrap();
    assert_eq!((again.imported, again.skipped), (0, 3));
    let search = LogFilter {
        search: Some("tab".to_owned()),
        ..LogFilter::default()
    };
    assert_eq!(
        texts(&empty, &search).len(),
        1,
        "imported texts are searchable"
    );
}

#[test]
fn a_bad_line_names_its_number_and_nothing_of_the_file_is_imported() {
    let (_base, mut store) = store();
    delivered(&mut store, "reviewer", "s-rev", "first", NOW);
    let good = serde_json::to_string(&records(&store)[0]).unwrap();
    let (_other, mut target) = self::store();
    let mut fresh: Record = serde_json::from_str(&good).unwrap();
    fresh.id = "00000000000000aa".to_owned();
    let fresh = serde_json::to_string(&fresh).unwrap();
    let with = |field: &str, value: serde_json::Value| {
        let mut record: serde_json::Value = serde_json::from_str(&fresh).unwrap();
        record[field] = value;
        record.to_string()
    };
    let huge = format!("\"{}\"", "x".repeat(claude_peer_post::MAX_IMPORT_LINE));
    let conflict = {
        let mut other: Record = serde_json::from_str(&good).unwrap();
        other.text = "not what the store holds".to_owned();
        serde_json::to_string(&other).unwrap()
    };
    target.import("seed", good.as_bytes()).unwrap();
    let cases = [
        ("{\"id\": \"torn", "not a message record"),
        ("not json at all", "not a message record"),
        (huge.as_str(), "longer than"),
        (
            &with("attempts", serde_json::json!("three")),
            "not a message record",
        ),
        (&with("state", serde_json::json!("teleported")), "no state"),
        (
            &with("direction", serde_json::json!("sideways")),
            "no direction",
        ),
        (&with("id", serde_json::json!("../../etc")), "not a post id"),
        (&with("state", serde_json::json!("sending")), "being sent"),
        (
            &with("receipt_basis", serde_json::Value::Null),
            "needs its basis",
        ),
        (conflict.as_str(), "with other content"),
    ];
    for (bad, words) in cases {
        let file = format!("{fresh}\n\n{bad}\n");
        let err = target.import("backup.jsonl", file.as_bytes()).unwrap_err();
        assert_eq!(err.as_str(), "bad_import");
        let text = err.to_string();
        assert!(text.starts_with("line 3 of backup.jsonl: "), "{text}");
        assert!(text.contains(words), "{words}: {text}");
        assert!(text.ends_with("nothing was imported"), "{text}");
        assert_eq!(
            records(&target).len(),
            1,
            "the good line 1 was not kept: {words}"
        );
    }
}
