//! `watch`, end to end: appeared, changed, vanished, and a clean end.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::support::{Home, Sleeper};

/// A bound on waiting for an event, so a broken watch fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(20);

#[test]
fn a_record_appearing_changing_and_its_process_dying_are_three_events_in_order() {
    let mut home = Home::new();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .args(["--json", "watch", "--home"])
        .arg(home.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = watch.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    let next = || -> serde_json::Value {
        let line = rx.recv_timeout(PATIENCE).expect("an event line");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("a JSON line ({e}): {line}"))
    };

    let mut child = Sleeper::spawn();
    home.live_record(&child, "s-watch", "watched", "idle", true);
    let appeared = next();
    assert_eq!(appeared["event"], "appeared");
    assert_eq!(appeared["session"]["session_id"], "s-watch");
    assert_eq!(appeared["session"]["status"], "idle");

    home.live_record(&child, "s-watch", "watched", "busy", true);
    let changed = next();
    assert_eq!(changed["event"], "changed");
    assert_eq!(changed["session"]["status"], "busy");

    child.crash();
    let vanished = next();
    assert_eq!(vanished["event"], "vanished");
    assert_eq!(vanished["session"]["session_id"], "s-watch");

    watch.kill().unwrap();
    watch.wait().unwrap();
}

#[test]
fn watch_ends_cleanly_when_its_reader_goes_away() {
    let home = Home::empty();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .args(["--json", "watch", "--home"])
        .arg(home.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(watch.stdout.take());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(watch.wait_with_output().unwrap()));
    let output = rx
        .recv_timeout(PATIENCE)
        .expect("watch exits once stdout is closed");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        !home.root().join("sessions").exists(),
        "watch never creates the registry"
    );
}

#[test]
fn watch_follows_a_registry_created_after_it_started() {
    let home = Home::empty();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .args(["--json", "watch", "--home"])
        .arg(home.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    std::fs::create_dir(home.root().join("sessions")).unwrap();
    let mut home = home;
    let child = Sleeper::spawn();
    home.live_record(&child, "s-late", "late", "idle", false);
    let line = rx
        .recv_timeout(PATIENCE)
        .expect("an event for the late registry");
    let event: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(event["event"], "appeared");
    assert_eq!(event["session"]["session_id"], "s-late");
    watch.kill().unwrap();
    watch.wait().unwrap();
}

#[test]
fn sigint_and_sigterm_end_watch_at_once_with_every_line_whole() {
    for signal in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let mut home = Home::new();
        let child = Sleeper::spawn();
        home.live_record(&child, "s-signal", "signalled", "idle", false);
        let mut watch = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .args(["--json", "watch", "--home"])
            .arg(home.root())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(watch.stdout.take().unwrap());
        let mut first = String::new();
        stdout.read_line(&mut first).unwrap();
        let pid = rustix::process::Pid::from_raw(i32::try_from(watch.id()).unwrap()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || tx.send(watch.wait()));
        let status = rx
            .recv_timeout(PATIENCE)
            .expect("watch ends on the signal")
            .unwrap();
        assert!(!status.success(), "ended by {signal:?}");
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut rest).unwrap();
        for line in first.lines().chain(rest.lines()) {
            let event: serde_json::Value =
                serde_json::from_str(line).expect("every line is whole JSON");
            assert_eq!(event["event"], "appeared");
        }
    }
}
