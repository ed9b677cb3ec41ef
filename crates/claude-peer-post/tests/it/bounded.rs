//! 100,000 waiting messages: a pass and the outbox stream them from the store, so the
//! memory they take does not follow their number.

use std::fs;
use std::ops::ControlFlow;
use std::os::unix::fs::PermissionsExt;
use std::time::{SystemTime, UNIX_EPOCH};

use claude_peer_deliver::{CommandRelay, Courier};
use claude_peer_post::{NewMessage, PostOffice, Relays, State, Store};
use claude_peer_testkit::home::TempHome;

const MESSAGES: usize = 100_000;

/// Bytes of each text: 100,000 of them held at once would be about 100 MiB.
const TEXT_BYTES: usize = 1_000;

/// What the kernel says of this process in `/proc/self/status`, in KiB.
fn status_kib(field: &str) -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|line| line.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_hundred_thousand_waiting_messages_are_streamed_not_held() {
    let temp = TempHome::new().unwrap();
    fs::set_permissions(temp.root(), fs::Permissions::from_mode(0o700)).unwrap();
    let path = temp.root().join("state/post.db");
    let mut store = Store::open(&path).unwrap();
    let now = u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap();
    // Posted through the store's own path; in one transaction of the test's, so that
    // 100,000 posts do not take 100,000 syncs.
    let first = store
        .post(
            &NewMessage {
                from: "build-bot".to_owned(),
                key: None,
                to: claude_peer_post::Address::Name("nobody-0".to_owned()),
                text: "x".repeat(TEXT_BYTES),
                expires_at_ms: now + 3_600_000,
                in_reply_to: None,
            },
            now,
        )
        .unwrap()
        .message;
    drop(store);
    {
        let mut conn = rusqlite::Connection::open(&path).unwrap();
        let tx = conn.transaction().unwrap();
        tx.execute(
            "INSERT INTO message (id, sender, to_kind, address, text, state, reason, created_at_ms, expires_at_ms)
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?1)
             SELECT printf('%016x', i), sender, to_kind, 'nobody-' || (i % 1000), text, state, reason, created_at_ms, expires_at_ms
             FROM message, n WHERE message.id = ?2",
            rusqlite::params![i64::try_from(MESSAGES - 1).unwrap(), first.id],
        )
        .unwrap();
        tx.execute(
            "INSERT INTO change (message, n, at_ms, state, detail) SELECT seq, 0, created_at_ms, 'waiting', 'posted' FROM message WHERE seq > 1",
            [],
        )
        .unwrap();
        tx.commit().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let relay = temp.root().join("relay-never-runs");
    let courier = || Courier::os().with_managed_settings(temp.root().join("managed.json"));
    let home = temp.claude().clone();
    let relays = Relays::new(courier(), home.clone(), move |_: &str| {
        CommandRelay::new(&relay)
    });
    let mut office = PostOffice::new(store, courier(), home, relays);

    // The peak from here on: what the pass and the outbox add.
    let before = status_kib("VmRSS:");
    fs::write("/proc/self/clear_refs", "5").unwrap();
    let pass = office.pass().unwrap();
    assert_eq!(pass.waiting, MESSAGES);
    let mut open = 0;
    office
        .store()
        .outbox(|message| {
            assert_eq!(message.state, State::Waiting);
            open += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(open, MESSAGES);
    let grew = status_kib("VmHWM:").saturating_sub(before);
    assert!(
        grew < 24 * 1024,
        "the pass and the outbox over {MESSAGES} messages of {TEXT_BYTES} bytes grew the peak by {grew} KiB"
    );
}
