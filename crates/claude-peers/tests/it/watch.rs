//! `watch`, end to end: appeared, changed, vanished, and a clean end.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::lines::Lines;
use claude_peer_testkit::process::{Sleeper, within};

use crate::support::CommandHome as _;

/// A bound on waiting for an event, so a broken watch fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(20);

/// A running `claude-peers --json watch`, its event lines arriving on a channel.
struct Watch {
    /// `None` once `stop` has taken it to wait for its exit.
    child: Option<Child>,
    lines: Lines,
}

impl Watch {
    fn start(home: &TempHome) -> Self {
        Self::start_with(home, &[])
    }

    fn start_with(home: &TempHome, extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .args(["--json", "watch", "--home"])
            .arg(home.root())
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = Lines::stdout(&mut child).unwrap();
        Self {
            child: Some(child),
            lines,
        }
    }

    fn next(&self) -> serde_json::Value {
        self.lines
            .next_json(PATIENCE)
            .unwrap_or_else(|e| panic!("an event line: {e}"))
    }

    /// Sends `signal` and waits for the exit; the lines still in flight are returned.
    fn stop(mut self, signal: rustix::process::Signal) -> (std::process::ExitStatus, Vec<String>) {
        let mut child = self.child.take().unwrap();
        let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap();
        rustix::process::kill_process(pid, signal).unwrap();
        let status = within(PATIENCE, move || child.wait())
            .expect("watch ends on the signal")
            .unwrap();
        (status, self.lines.rest(PATIENCE))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn a_record_appearing_changing_and_its_process_dying_are_three_events_in_order() {
    let mut home = TempHome::new().unwrap();
    let watch = Watch::start(&home);

    let mut child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-watch", "watched", "idle", true);
    let appeared = watch.next();
    assert_eq!(appeared["event"], "appeared");
    assert_eq!(appeared["session"]["session_id"], "s-watch");
    assert_eq!(appeared["session"]["status"], "idle");

    home.live_record(&child, "s-watch", "watched", "busy", true);
    let changed = watch.next();
    assert_eq!(changed["event"], "changed");
    assert_eq!(changed["session"]["status"], "busy");

    child.crash().unwrap();
    let vanished = watch.next();
    assert_eq!(vanished["event"], "vanished");
    assert_eq!(vanished["session"]["session_id"], "s-watch");
}

#[test]
fn watch_ends_cleanly_when_its_reader_goes_away() {
    let home = TempHome::without_registry().unwrap();
    let mut watch = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .args(["--json", "watch", "--home"])
        .arg(home.root())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(watch.stdout.take());
    let output = within(PATIENCE, move || watch.wait_with_output().unwrap())
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
    let mut home = TempHome::without_registry().unwrap();
    let watch = Watch::start(&home);
    std::fs::create_dir(home.root().join("sessions")).unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-late", "late", "idle", false);
    let event = watch.next();
    assert_eq!(event["event"], "appeared");
    assert_eq!(event["session"]["session_id"], "s-late");
}

#[test]
fn sigint_and_sigterm_end_watch_at_once_with_every_line_whole() {
    for signal in [rustix::process::Signal::INT, rustix::process::Signal::TERM] {
        let mut home = TempHome::new().unwrap();
        let child = Sleeper::spawn().unwrap();
        home.live_record(&child, "s-signal", "signalled", "idle", false);
        let watch = Watch::start(&home);
        assert_eq!(watch.next()["event"], "appeared");
        let (status, rest) = watch.stop(signal);
        assert!(!status.success(), "ended by {signal:?}");
        for line in rest {
            let event: serde_json::Value =
                serde_json::from_str(&line).expect("every line is whole JSON");
            assert_eq!(event["event"], "appeared");
        }
    }
}

#[test]
fn the_polling_fallback_reports_the_same_events() {
    let mut home = TempHome::new().unwrap();
    let watch = Watch::start_with(&home, &["--poll"]);
    let mut child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-poll", "polled", "idle", false);
    assert_eq!(watch.next()["event"], "appeared");
    home.live_record(&child, "s-poll", "polled", "waiting", false);
    let changed = watch.next();
    assert_eq!(
        (
            changed["event"].as_str(),
            changed["session"]["status"].as_str()
        ),
        (Some("changed"), Some("waiting"))
    );
    child.crash().unwrap();
    assert_eq!(watch.next()["event"], "vanished");
}
