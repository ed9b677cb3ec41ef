//! The mailbox service on a stand-in sender (a program that reads its stdin, prints
//! nothing and ends with it): jobs answered in order among the events, cancelled jobs not sent, a sender
//! that dies replaced at the next job (or the mailbox ended, without a way to start
//! another), and a clean close with `Closed` last. Refusals need no Claude Code: the
//! gate refuses a session that is not live before anything reaches the sender.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use claude_peer_registry::ClaudeHome;
use claude_peer_sender::{
    ClaudeRelay, Error, Job, Mailbox, MailboxEvent, MailboxHandle, Open, Reply, Waiting,
};
use tempfile::TempDir;

/// What the service told, in the order it told it.
#[derive(Debug)]
enum Told {
    Reply(&'static str, Reply),
    Event(MailboxEvent),
}

struct Setup {
    dir: TempDir,
    told: Receiver<Told>,
    tell: Sender<Told>,
    /// The pid of every sender started.
    pids: Arc<Mutex<Vec<u32>>>,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let claude = dir.path().join("claude");
        std::fs::write(&claude, "#!/bin/sh\nwhile read -r _; do :; done\n").unwrap();
        std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir(dir.path().join("home")).unwrap();
        let (tell, told) = mpsc::channel();
        Self {
            dir,
            told,
            tell,
            pids: Arc::default(),
        }
    }

    fn open(&self) -> Open {
        let (root, relay, pids) = (
            self.dir.path().join("home"),
            relay(self.dir.path()),
            Arc::clone(&self.pids),
        );
        Box::new(move || {
            let mailbox = Mailbox::open(ClaudeHome::new(&root), &relay)?;
            pids.lock().unwrap().push(mailbox.pid());
            Ok(mailbox)
        })
    }

    fn spawn(&self, opened: Option<Mailbox>, open: Option<Open>) -> MailboxHandle {
        let tell = self.tell.clone();
        MailboxHandle::spawn(opened, open, move |event| {
            let _ = tell.send(Told::Event(event));
        })
        .unwrap()
    }

    fn job(&self, name: &'static str) -> Job {
        let tell = self.tell.clone();
        Job::new("no-such-session", "hello", move |reply| {
            let _ = tell.send(Told::Reply(name, reply));
        })
    }

    fn next(&self) -> Told {
        self.told.recv_timeout(Duration::from_secs(30)).unwrap()
    }

    fn kill_last(&self) {
        let pid = *self.pids.lock().unwrap().last().unwrap();
        let status = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }
}

fn relay(dir: &Path) -> ClaudeRelay {
    ClaudeRelay::new(dir.join("claude"), vec![PathBuf::from("/bin/false").into()])
        .home(dir.join("sender"))
        .managed_settings(dir.join("no-managed-settings.json"))
}

fn assert_refused(told: Told, name: &str) {
    match told {
        Told::Reply(got, Reply::Sent(Err(err))) if got == name => {
            assert!(err.refusal().is_some(), "{err}");
        }
        told => panic!("expected {name} refused, got {told:?}"),
    }
}

fn assert_closed(told: Told, clean: bool) {
    match told {
        Told::Event(MailboxEvent::Closed { unknown, reason }) => {
            assert!(unknown.is_empty(), "{unknown:?}");
            assert_eq!(reason.is_none(), clean, "{reason:?}");
        }
        told => panic!("expected closed, got {told:?}"),
    }
}

#[test]
fn jobs_are_answered_in_order_a_cancelled_one_is_not_sent_and_close_tells_closed_last() {
    let setup = Setup::new();
    let opened = (setup.open())().unwrap();
    let handle = setup.spawn(Some(opened), None);
    handle.send(setup.job("first"));
    handle.send(setup.job("cancelled").cancelled_when(|| true));
    handle.send(setup.job("third"));
    assert_refused(setup.next(), "first");
    assert!(
        matches!(setup.next(), Told::Reply("cancelled", Reply::Cancelled)),
        "not sent"
    );
    assert_refused(setup.next(), "third");
    handle.close(Waiting::Cancel);
    assert_closed(setup.next(), true);
    assert!(setup.told.try_recv().is_err(), "closed is last");
}

#[test]
fn a_sender_that_dies_is_replaced_at_the_next_job() {
    let setup = Setup::new();
    let handle = setup.spawn(None, Some(setup.open()));
    assert!(
        setup.pids.lock().unwrap().is_empty(),
        "started by the first job"
    );
    handle.send(setup.job("first"));
    assert_refused(setup.next(), "first");
    setup.kill_last();
    assert_closed(setup.next(), false);
    handle.send(setup.job("second"));
    assert_refused(setup.next(), "second");
    assert_eq!(setup.pids.lock().unwrap().len(), 2, "a new sender");
    handle.close(Waiting::Cancel);
    assert_closed(setup.next(), true);
}

#[test]
fn without_a_way_to_start_another_the_mailbox_ends_with_its_sender() {
    let setup = Setup::new();
    let opened = (setup.open())().unwrap();
    let handle = setup.spawn(Some(opened), None);
    setup.kill_last();
    assert_closed(setup.next(), false);
    handle.send(setup.job("late"));
    match setup.next() {
        Told::Reply("late", Reply::Sent(Err(Error::Ended))) => {}
        told => panic!("expected ended, got {told:?}"),
    }
    handle.close(Waiting::Cancel);
    assert!(setup.told.try_recv().is_err(), "nothing after its end");
}

#[test]
fn closing_with_waiting_send_sends_every_job_queued_before_it_in_order() {
    let setup = Setup::new();
    let opened = (setup.open())().unwrap();
    let handle = setup.spawn(Some(opened), None);
    let names = ["one", "two", "three", "four", "five"];
    for name in names {
        handle.send(setup.job(name));
    }
    handle.close(Waiting::Send);
    for name in names {
        assert_refused(setup.next(), name);
    }
    assert_closed(setup.next(), true);
    assert!(setup.told.try_recv().is_err(), "closed is last");
}
