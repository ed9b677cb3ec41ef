//! Following a transcript as it is written.

use std::fs;
use std::os::unix::fs::symlink;
use std::thread;
use std::time::Duration;

use claude_peer_transcript::{Error, Fact, Follower};
use serde_json::json;

use crate::{Home, SESSION, accept_facts, append, fixture, hold_facts};

/// Long enough never to be reached when something arrives.
const LONG: Duration = Duration::from_secs(10);
/// Short: for calls expected to find nothing.
const SHORT: Duration = Duration::from_millis(100);

/// Calls `next` until it has reported `count` facts (or ten calls went by).
fn facts(follower: &mut Follower, count: usize) -> Vec<Fact> {
    let mut facts = Vec::new();
    for _ in 0..10 {
        facts.extend(follower.next(LONG).unwrap());
        if facts.len() >= count {
            break;
        }
    }
    facts
}

#[test]
fn facts_of_lines_appended_after_start_are_reported_and_lines_present_before_start_are_not() {
    let home = Home::with_project();
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    assert_eq!(follower.path(), Some(home.transcript().as_path()));
    assert_eq!(
        follower.next(Duration::ZERO).unwrap(),
        [],
        "what was there before start is never reported"
    );
    append(&home.transcript(), fixture("hold.jsonl").as_bytes());
    assert_eq!(follower.next(LONG).unwrap(), hold_facts());
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    assert_eq!(facts(&mut follower, 2), accept_facts());
    assert_eq!(follower.next(Duration::ZERO).unwrap(), []);
}

#[test]
fn a_line_being_written_at_start_is_skipped_and_the_next_is_read() {
    let home = Home::with_project();
    let accept = fixture("accept.jsonl");
    let (head, tail) = accept.split_at(accept.find("\"origin\"").unwrap());
    append(&home.transcript(), head.as_bytes());
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    append(&home.transcript(), tail.as_bytes());
    append(&home.transcript(), fixture("hold.jsonl").as_bytes());
    assert_eq!(
        facts(&mut follower, 1),
        hold_facts(),
        "the read line begun before start is not reported, even in part"
    );
}

#[test]
fn a_transcript_missing_at_start_is_found_when_it_appears_and_read_from_its_beginning() {
    let home = Home::with_project();
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    assert_eq!(follower.path(), None);
    assert_eq!(follower.next(SHORT).unwrap(), []);
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    assert_eq!(facts(&mut follower, 2), accept_facts());
    assert_eq!(follower.path(), Some(home.transcript().as_path()));
}

#[test]
fn a_transcript_is_found_when_projects_and_its_directory_appear_after_start() {
    let home = Home::empty();
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    assert_eq!(follower.next(SHORT).unwrap(), []);
    let transcript = home.transcript();
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        fs::create_dir_all(transcript.parent().unwrap()).unwrap();
        append(&transcript, b"");
        thread::sleep(Duration::from_millis(50));
        append(&transcript, fixture("hold.jsonl").as_bytes());
    });
    assert_eq!(facts(&mut follower, 1), hold_facts());
    writer.join().unwrap();
}

#[test]
fn a_transcript_is_found_in_a_project_directory_made_after_start() {
    let home = Home::with_project();
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    let dir = home.home.projects_dir().join("-new-project");
    let transcript = dir.join(format!("{SESSION}.jsonl"));
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        fs::create_dir(&dir).unwrap();
        thread::sleep(Duration::from_millis(50));
        append(&transcript, fixture("hold.jsonl").as_bytes());
    });
    assert_eq!(facts(&mut follower, 1), hold_facts());
    writer.join().unwrap();
    assert!(
        follower
            .path()
            .unwrap()
            .ends_with("-new-project/".to_owned() + SESSION + ".jsonl")
    );
}

#[test]
fn a_line_written_in_two_parts_is_reported_once_whole_after_its_newline() {
    let home = Home::with_project();
    append(&home.transcript(), b"");
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    let hold = fixture("hold.jsonl");
    let line = hold.lines().last().unwrap();
    let (first, second) = line.split_at(line.find("preview").unwrap());
    append(&home.transcript(), first.as_bytes());
    assert_eq!(follower.next(SHORT).unwrap(), [], "no newline yet: pending");
    append(&home.transcript(), second.as_bytes());
    assert_eq!(follower.next(SHORT).unwrap(), [], "still no newline");
    append(&home.transcript(), b"\n");
    assert_eq!(follower.next(LONG).unwrap(), hold_facts());
    assert_eq!(follower.next(Duration::ZERO).unwrap(), [], "reported once");
}

#[test]
fn an_overlong_line_is_skipped_unheld_and_the_following_line_is_reported() {
    let home = Home::with_project();
    append(&home.transcript(), b"");
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    // Longer than a line may be, and than one call reads: it spans calls.
    let mut overlong = br#"{"type":"queue-operation","operation":"enqueue","content":""#.to_vec();
    overlong.resize(9 * 1024 * 1024, b'x');
    append(&home.transcript(), &overlong);
    for _ in 0..3 {
        assert_eq!(follower.next(Duration::ZERO).unwrap(), []);
    }
    assert!(
        format!("{follower:?}").contains("pending: 0"),
        "nothing of the overlong line is held: {follower:?}"
    );
    append(&home.transcript(), b"\"}\n");
    append(&home.transcript(), fixture("hold.jsonl").as_bytes());
    assert_eq!(facts(&mut follower, 1), hold_facts());
}

#[test]
fn a_truncated_transcript_is_an_error_and_stays_one() {
    let home = Home::with_project();
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    fs::File::options()
        .write(true)
        .open(home.transcript())
        .unwrap()
        .set_len(10)
        .unwrap();
    let err = follower.next(LONG).unwrap_err();
    assert!(
        matches!(&err, Error::Truncated { path } if *path == home.transcript()),
        "{err}"
    );
    assert_eq!(err.as_str(), "truncated");
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    assert!(
        matches!(follower.next(LONG), Err(Error::Truncated { .. })),
        "once lost, never read from the middle of something else"
    );
}

#[test]
fn a_file_renamed_over_the_transcript_is_a_replacement() {
    let home = Home::with_project();
    append(&home.transcript(), fixture("accept.jsonl").as_bytes());
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    let other = home.transcript().with_extension("new");
    append(&other, fixture("accept.jsonl").as_bytes());
    append(&other, fixture("hold.jsonl").as_bytes());
    fs::rename(&other, home.transcript()).unwrap();
    let err = follower.next(LONG).unwrap_err();
    assert!(
        matches!(&err, Error::Replaced { path } if *path == home.transcript()),
        "{err}"
    );
    assert_eq!(err.as_str(), "replaced");
}

#[test]
fn a_transcript_removed_while_waited_on_is_a_replacement() {
    let home = Home::with_project();
    append(&home.transcript(), b"");
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    let transcript = home.transcript();
    let remover = thread::spawn(move || {
        thread::sleep(Duration::from_millis(50));
        fs::remove_file(transcript).unwrap();
    });
    let err = follower.next(LONG).unwrap_err();
    remover.join().unwrap();
    assert!(matches!(err, Error::Replaced { .. }), "{err}");
}

#[test]
fn lines_written_before_a_replacement_are_reported_before_it() {
    let home = Home::with_project();
    append(&home.transcript(), b"");
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    append(&home.transcript(), fixture("hold.jsonl").as_bytes());
    fs::remove_file(home.transcript()).unwrap();
    assert_eq!(follower.next(LONG).unwrap(), hold_facts());
    assert!(matches!(follower.next(LONG), Err(Error::Replaced { .. })));
}

#[test]
fn a_symlink_as_the_transcript_is_not_followed() {
    let home = Home::with_project();
    let elsewhere = home.home.root().join("elsewhere.jsonl");
    append(&elsewhere, b"");
    symlink(&elsewhere, home.transcript()).unwrap();
    let err = Follower::start(&home.home, SESSION).unwrap_err();
    assert!(matches!(err, Error::NotOurs { .. }), "{err}");

    fs::remove_file(home.transcript()).unwrap();
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    symlink(&elsewhere, home.transcript()).unwrap();
    append(&elsewhere, fixture("hold.jsonl").as_bytes());
    let err = follower.next(LONG).unwrap_err();
    assert!(
        matches!(&err, Error::NotOurs { path, why } if *path == home.transcript() && why.contains("symbolic link")),
        "one that appears later is refused too: {err}"
    );
}

#[test]
fn a_session_id_that_is_no_file_name_is_refused_at_start() {
    let home = Home::with_project();
    let err = Follower::start(&home.home, "../../etc/passwd").unwrap_err();
    assert!(matches!(err, Error::SessionId(_)), "{err}");
}

#[test]
fn next_with_no_writes_returns_nothing_when_its_wait_is_over() {
    let home = Home::with_project();
    let mut absent = Follower::start(&home.home, SESSION).unwrap();
    assert_eq!(absent.next(SHORT).unwrap(), [], "no transcript yet");
    append(&home.transcript(), b"");
    let mut present = Follower::start(&home.home, SESSION).unwrap();
    assert_eq!(
        present.next(SHORT).unwrap(),
        [],
        "a transcript not written to"
    );
    let nowhere = claude_peer_registry::ClaudeHome::new(home.home.root().join("missing"));
    let mut homeless = Follower::start(&nowhere, SESSION).unwrap();
    assert_eq!(homeless.next(SHORT).unwrap(), [], "not even a home");
}

#[test]
fn next_returns_early_when_a_line_arrives_from_another_thread() {
    let home = Home::with_project();
    append(&home.transcript(), b"");
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    let transcript = home.transcript();
    let writer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        append(&transcript, fixture("hold.jsonl").as_bytes());
    });
    // An hour's wait that only the write can end before the test gives up on it.
    let (tx, rx) = std::sync::mpsc::channel();
    thread::spawn(move || tx.send(follower.next(Duration::from_secs(3600)).unwrap()));
    let facts = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("woken by the write, not by the end of the wait");
    writer.join().unwrap();
    assert_eq!(facts, hold_facts());
}

#[test]
fn a_64_kib_message_round_trips_through_queued_and_read_facts() {
    let home = Home::with_project();
    append(&home.transcript(), b"");
    let mut follower = Follower::start(&home.home, SESSION).unwrap();
    let mut text = "quote \" backslash \\ newline \n unicode é € 😀 a closing tag </cross-session-message> end\n".to_owned();
    while text.len() < 64 * 1024 {
        text.push_str("0123456789abcdef");
    }
    let from = "uds:/tmp/cc-socks/22051.sock";
    let envelope = format!(
        "<cross-session-message from=\"{from}\" from-name=\"claude-peers\" from-mode=\"prompting\">\n{}\n</cross-session-message>",
        text.replace("</cross-session-message>", "<\\/cross-session-message>")
    );
    let queued = json!({"type": "queue-operation", "operation": "enqueue", "content": envelope});
    let read = json!({
        "type": "user",
        "isMeta": true,
        "message": {"role": "user", "content": format!("Another Claude session sent a message:\n{envelope}")},
        "origin": {"kind": "peer", "from": from, "msg_id": "ab3549f6-d230-4229-a93a-2da29952f856", "body": text},
    });
    append(&home.transcript(), format!("{queued}\n{read}\n").as_bytes());
    assert_eq!(
        facts(&mut follower, 2),
        [
            Fact::Queued {
                from: from.to_owned(),
                from_name: Some("claude-peers".to_owned()),
                text: text.clone(),
            },
            Fact::Read {
                msg_id: "ab3549f6-d230-4229-a93a-2da29952f856".to_owned(),
                from: Some(from.to_owned()),
            },
        ]
    );
}

#[test]
fn the_cwd_directory_name_is_never_rebuilt_from_a_path() {
    let home = Home::with_project();
    let odd = home.home.projects_dir().join("not-a-slug-of-anything");
    fs::create_dir(&odd).unwrap();
    append(&odd.join(format!("{SESSION}.jsonl")), b"");
    let follower = Follower::start(&home.home, SESSION).unwrap();
    assert_eq!(
        follower.path(),
        Some(odd.join(format!("{SESSION}.jsonl")).as_path())
    );
}

#[test]
fn a_follower_can_be_moved_to_a_thread_of_its_own() {
    fn is_send<T: Send>(_: &T) {}
    let home = Home::with_project();
    let follower = Follower::start(&home.home, SESSION).unwrap();
    is_send(&follower);
    let err = Error::Replaced {
        path: home.transcript(),
    };
    is_send(&err);
    assert!(
        err.to_string()
            .contains(&home.transcript().display().to_string())
    );
}
