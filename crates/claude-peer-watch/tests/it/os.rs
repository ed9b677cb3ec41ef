//! The engine on the real OS: inotify, pidfds and every bad input a registry can hold.

use std::fs;
use std::os::unix::fs::FileTypeExt as _;
use std::os::unix::fs::symlink;

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::Sleeper;
use claude_peer_testkit::registry::{Machine, record};

use crate::support::{WatchedHome as _, describe, live_set, next};

#[test]
fn a_record_replaced_by_rename_is_one_change() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let pid = child.pid();
    home.write(pid, "s-rename", "idle");
    let mut watcher = home.watch();
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", pid, "s-rename".into())
    );

    home.replace(pid, "s-rename", "busy");
    let event = next(&mut watcher);
    assert_eq!(describe(&event), ("changed", pid, "s-rename".into()));
    assert_eq!(
        event
            .session()
            .record
            .status
            .as_ref()
            .map(claude_peer_registry::VendorStatus::as_str),
        Some("busy")
    );
}

#[test]
fn a_live_session_truncated_and_left_empty_keeps_its_state_until_its_process_dies() {
    let mut home = TempHome::new().unwrap();
    let mut child = Sleeper::spawn().unwrap();
    let pid = child.pid();
    home.write(pid, "s-torn", "idle");
    let mut watcher = home.watch();
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", pid, "s-torn".into())
    );

    // Truncated and closed: the writer's next write has not come yet.
    fs::File::create(home.record_path(pid)).unwrap();
    fs::write(home.record_path(pid), "{\"pid\":").unwrap();
    home.write(pid, "s-torn", "waiting");
    let event = next(&mut watcher);
    assert_eq!(
        describe(&event),
        ("changed", pid, "s-torn".into()),
        "no vanished while the record was torn"
    );

    fs::File::create(home.record_path(pid)).unwrap();
    child.crash().unwrap();
    assert_eq!(
        describe(&next(&mut watcher)),
        ("vanished", pid, "s-torn".into())
    );
    assert_eq!(live_set(watcher.sessions()), home.fresh());
}

#[test]
fn a_registry_deleted_recreated_and_replaced_by_a_symlink_is_followed() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    let pid = child.pid();
    home.write(pid, "s-dir", "idle");
    let mut watcher = home.watch();
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", pid, "s-dir".into())
    );

    fs::remove_file(home.record_path(pid)).unwrap();
    fs::remove_dir(home.sessions()).unwrap();
    assert_eq!(
        describe(&next(&mut watcher)),
        ("vanished", pid, "s-dir".into())
    );

    fs::create_dir(home.sessions()).unwrap();
    home.write(pid, "s-dir", "idle");
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", pid, "s-dir".into())
    );

    // Moved away and replaced by a symlink to a directory holding another record.
    let elsewhere = home.root().join("elsewhere");
    fs::create_dir(&elsewhere).unwrap();
    let other = Sleeper::spawn().unwrap();
    let body = home.body(other.pid(), "s-linked", "idle");
    fs::write(elsewhere.join(format!("{}.json", other.pid())), body).unwrap();
    fs::rename(home.sessions(), home.root().join("moved")).unwrap();
    symlink(&elsewhere, home.sessions()).unwrap();
    let mut events = vec![describe(&next(&mut watcher)), describe(&next(&mut watcher))];
    events.sort();
    assert_eq!(
        events,
        [
            ("appeared", other.pid(), "s-linked".into()),
            ("vanished", pid, "s-dir".into())
        ]
    );
    assert!(
        watcher
            .warnings()
            .iter()
            .any(|w| w.as_str() == "registry_is_symlink"),
        "{:?}",
        watcher.warnings()
    );

    // Through the link, changes are polled.
    home.write(other.pid(), "s-linked", "busy");
    assert_eq!(
        describe(&next(&mut watcher)),
        ("changed", other.pid(), "s-linked".into())
    );
    assert_eq!(live_set(watcher.sessions()), home.fresh());
}

#[test]
fn an_overflowed_event_queue_is_a_rescan_and_misses_nothing() {
    let mut home = TempHome::new().unwrap();
    let max: usize = fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16_384);
    let mut watcher = home.watch();
    // A burst while nobody reads: each file is a create, a modify and a close.
    for i in 0..max / 2 {
        fs::write(home.sessions().join(format!("burst-{i}.tmp")), "x").unwrap();
    }
    let child = Sleeper::spawn().unwrap();
    home.write(child.pid(), "s-after-burst", "idle");
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", child.pid(), "s-after-burst".into()),
        "written after the queue overflowed, found by the rescan"
    );
    assert_eq!(live_set(watcher.sessions()), home.fresh());
}

#[test]
fn fifos_huge_files_and_ten_thousand_leftovers_never_hang_the_watch() {
    let mut home = TempHome::new().unwrap();
    let machine = Machine::learn();
    let socks = home.root().join("socks");
    for i in 0..10_000 {
        let pid = machine.dead_pid(i);
        let body = record(pid, "1234", machine.pid_domain.as_deref(), &socks);
        fs::write(home.record_path(pid), body).unwrap();
    }
    let mut watcher = home.watch();

    let fifo_child = Sleeper::spawn().unwrap();
    let fifo = home.record_path(fifo_child.pid());
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    let huge_child = Sleeper::spawn().unwrap();
    let huge = fs::File::create(home.record_path(huge_child.pid())).unwrap();
    huge.set_len(1 << 30).unwrap();
    drop(huge);

    let child = Sleeper::spawn().unwrap();
    home.write(child.pid(), "s-among-leftovers", "idle");
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", child.pid(), "s-among-leftovers".into()),
        "neither the fifo nor the huge file is an event, nor blocks the next one"
    );
    assert_eq!(live_set(watcher.sessions()), home.fresh());
    // Nothing in the registry was written: what the test made is all there is, as made.
    assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
    assert_eq!(
        fs::metadata(home.record_path(huge_child.pid()))
            .unwrap()
            .len(),
        1 << 30
    );
    assert_eq!(fs::read_dir(home.sessions()).unwrap().count(), 10_000 + 3);
}

#[test]
fn the_polling_watch_reports_appeared_changed_and_vanished() {
    let mut home = TempHome::new().unwrap();
    let mut watcher = claude_peer_watch::Watcher::os_polling(home.claude().clone()).unwrap();
    let mut child = Sleeper::spawn().unwrap();
    let pid = child.pid();
    home.write(pid, "s-poll", "idle");
    assert_eq!(
        describe(&next(&mut watcher)),
        ("appeared", pid, "s-poll".into())
    );
    home.write(pid, "s-poll", "busy");
    assert_eq!(
        describe(&next(&mut watcher)),
        ("changed", pid, "s-poll".into())
    );
    child.crash().unwrap();
    assert_eq!(
        describe(&next(&mut watcher)),
        ("vanished", pid, "s-poll".into())
    );
}
