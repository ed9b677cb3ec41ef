//! Receipts a one-shot send reports, held to what the receiver's own transcript shows.

use std::fs;
use std::os::unix::fs::symlink;
use std::time::Duration;

use crate::receiver::{Burners, Receiver, wait_for};

#[test]
fn a_busy_receiver_queues_the_message_and_reads_it_after_its_turn() {
    let receiver = Receiver::slow(Duration::from_secs(10));
    receiver.make_busy();
    let runtime = tempfile::tempdir().unwrap();

    let (code, json, stderr) =
        receiver.send(runtime.path(), "when you are free", &["--read-wait", "0.5"]);

    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(json["receipt"], "queued", "{json}");
    assert_eq!(json["receipt_basis"], "transcript");
    let msg_id = json["msg_id"].as_str().expect("a msg_id");
    assert!(
        receiver.delivered(msg_id).is_none(),
        "reported queued: its Claude has not read it yet"
    );
    let queued = receiver.transcript().into_iter().any(|entry| {
        entry["operation"] == "enqueue"
            && entry["content"]
                .as_str()
                .is_some_and(|c| c.contains("when you are free"))
    });
    assert!(queued, "its transcript shows it taken into its queue");
    assert!(
        wait_for(Duration::from_secs(60), || receiver.delivered(msg_id)).is_some(),
        "its Claude reads it once its turn is over"
    );
}

#[test]
fn a_held_message_is_reported_held_every_time_while_the_machine_is_loaded() {
    let receiver = Receiver::start(Some("hold"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    let _load = Burners::start(2);

    for n in 0..3 {
        let message = format!("held under load {n}");
        let (code, json, stderr) = receiver.send(runtime.path(), &message, &[]);

        assert_eq!(code, 0, "{json} {stderr}");
        assert_eq!(json["receipt"], "held", "send {n}: {json}");
        let msg_id = json["msg_id"].as_str().expect("a msg_id");
        assert!(
            receiver.delivered(msg_id).is_none(),
            "send {n}: its Claude never got it"
        );
    }
}

#[test]
fn a_transcript_that_is_not_ours_to_read_leaves_the_receipt_to_silence() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let runtime = tempfile::tempdir().unwrap();
    // Before its first line, its transcript is made a link to a file elsewhere: Claude
    // Code writes through it; this project never follows a link.
    let elsewhere = tempfile::tempdir().unwrap();
    let real = elsewhere.path().join("transcript.jsonl");
    fs::write(&real, "").unwrap();
    let path = receiver.transcript_path(&receiver.session_id);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    symlink(&real, &path).unwrap();

    let (code, json, stderr) = receiver.send(runtime.path(), "through a link", &[]);

    assert_eq!(code, 0, "{json} {stderr}");
    assert_eq!(
        (json["receipt"].as_str(), json["receipt_basis"].as_str()),
        (Some("accepted"), Some("silence")),
        "{json}"
    );
    let msg_id = json["msg_id"].as_str().expect("a msg_id");
    assert!(
        wait_for(Duration::from_secs(30), || receiver.delivered(msg_id)).is_some(),
        "the message did arrive, so accepted was right"
    );
}
