//! A long-lived sender: many sends, every later outcome, and replies.
//!
//! A [`Mailbox`] keeps one headless Claude Code sender running (the same sender, model,
//! hooks and checks as [`ClaudeRelay`]), so it hears what a one-shot send cannot: a held
//! message released, denied or expired minutes later, replies sent to its address, and
//! idle notices of receivers it subscribed to.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::mpsc::{RecvTimeoutError, Sender as Channel};
use std::time::{Duration, Instant};

use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;

use crate::claude::await_result;
use crate::hook::Plan;
use crate::sender::Sender;
use crate::stream::{Inbound, Line};
use claude_peer_deliver::{
    Confirmation, Courier, Delivered, Error, Outcome, Relay, RelayFailure, Target,
};

use crate::ClaudeRelay;

/// What a receiver did with messages sent from a mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// What it did.
    pub outcome: Outcome,
    /// The messages this receipt is about, as far as they can be told: notices to one
    /// receiver are coalesced and name at most a few; when `count` is larger, the rest
    /// could not be attributed.
    pub msg_ids: Vec<String>,
    /// How many messages the receipt covers.
    pub count: usize,
    /// The receiver's address, `uds:<socket path>`.
    pub recipient: String,
}

/// Something that happened to a mailbox after a send returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A receiver's decision about messages sent earlier. `accepted` means no notice
    /// came within the receipt window after the last send to that receiver.
    Receipt(Receipt),
    /// A message to the mailbox's address: a reply, or anything another session sent.
    Message {
        /// The sender's address, `uds:<socket path>`; send to it to answer.
        from: String,
        /// The name the sender gives itself.
        from_name: Option<String>,
        /// The session id when the address is a live session's socket of this home.
        session_id: Option<String>,
        /// The exact text.
        text: String,
    },
    /// A receiver the mailbox subscribed to (`notify_when_idle`) finished its turn.
    Idle {
        /// The receiver's address as the notice gives it.
        recipient: String,
        /// The session id when the address is a live session's socket of this home.
        session_id: Option<String>,
    },
    /// A prompt queued for the mailbox that is none of the above, verbatim.
    Notice(String),
    /// The sender ended: closed by [`Mailbox::close`], or it died. Messages without a
    /// final outcome (held, or within their receipt window) are `unknown`. Always last.
    Closed {
        /// The `msg_id`s whose fate the mailbox can no longer learn.
        unknown: Vec<String>,
        /// Why it ended, when it was not closed.
        reason: Option<String>,
    },
}

/// Wakes a thread blocked in [`Mailbox::next_event`], which then returns `None`.
#[derive(Debug, Clone)]
pub struct Waker(Channel<Line>);

impl Waker {
    /// Wakes the mailbox's waiter (a no-op once it is closed).
    pub fn wake(&self) {
        let _ = self.0.send(Line::Wake);
    }
}

/// One long-lived Claude Code sender and everything it hears.
///
/// ```no_run
/// use std::time::Duration;
/// use claude_peer_registry::ClaudeHome;
/// use claude_peer_sender::{ClaudeRelay, Event, Mailbox};
///
/// let home = ClaudeHome::new("/home/ada/.claude");
/// let relay = ClaudeRelay::new("/usr/local/bin/claude", vec!["/usr/local/bin/claude-peers".into(), "hook".into()]);
/// let mut mailbox = Mailbox::open(home, &relay)?;
/// let sent = mailbox.send("8668bde0-50ff-4b1e-a7dc-8a4dcbefad57", "review PR 12, reply here", true)?;
/// println!("sent {:?}", sent.msg_id);
/// while let Some(event) = mailbox.next_event(Duration::from_secs(600)) {
///     match event {
///         Event::Message { text, .. } => println!("reply: {text}"),
///         Event::Receipt(receipt) => println!("{:?} {:?}", receipt.outcome, receipt.msg_ids),
///         _ => {}
///     }
/// }
/// for event in mailbox.close() {
///     println!("{event:?}");
/// }
/// # Ok::<(), claude_peer_sender::Error>(())
/// ```
#[derive(Debug)]
pub struct Mailbox<P = OsProcessTable, F = OsRegistryFs> {
    courier: Courier<P, F>,
    home: ClaudeHome,
    sender: Sender,
    timeout: Duration,
    tracker: Tracker,
    ready: VecDeque<Event>,
    closed: bool,
}

impl Mailbox {
    /// Opens a mailbox for sessions of `home`, with the sender `relay` describes (its
    /// Claude Code, hook program, name, home, timeout per send and receipt window), on
    /// this machine's real processes and files.
    pub fn open(home: ClaudeHome, relay: &ClaudeRelay) -> Result<Self, Error> {
        Self::with_courier(Courier::os(), home, relay)
    }
}

impl<P: ProcessTable, F: RegistryFs> Mailbox<P, F> {
    /// Opens a mailbox that resolves and checks policy with `courier`.
    pub fn with_courier(
        courier: Courier<P, F>,
        home: ClaudeHome,
        relay: &ClaudeRelay,
    ) -> Result<Self, Error> {
        let sender = Sender::start(&relay.options).map_err(Error::Sender)?;
        Ok(Self {
            courier,
            home,
            sender,
            timeout: relay.timeout,
            tracker: Tracker::new(relay.receipt_window),
            ready: VecDeque::new(),
            closed: false,
        })
    }

    /// The sender's pid (its socket is this mailbox's address).
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.sender.pid()
    }

    /// Sends `message` to the live session `session_id`, with every check of a one-shot
    /// send, and returns once Claude Code has sent it (its `msg_id` in the result); what
    /// the receiver does with it comes later as [`Event::Receipt`]. With
    /// `notify_when_idle`, the mailbox also subscribes to the receiver's next idle moment
    /// ([`Event::Idle`]).
    pub fn send(
        &mut self,
        session_id: &str,
        message: &str,
        notify_when_idle: bool,
    ) -> Result<Delivered, Error> {
        if self.closed {
            return Err(Error::Sender("the mailbox's sender has ended".to_owned()));
        }
        let relay = MailboxRelay {
            sender: RefCell::new(&mut self.sender),
            tracker: RefCell::new(&mut self.tracker),
            ready: RefCell::new(&mut self.ready),
            timeout: self.timeout,
            notify_when_idle,
        };
        self.courier
            .prepare(&self.home, session_id, message)?
            .hand_over(&relay)
    }

    /// A [`Waker`] that makes [`Mailbox::next_event`] return early, for callers that
    /// wait on other inputs too.
    #[must_use]
    pub fn waker(&self) -> Waker {
        Waker(self.sender.wake.clone())
    }

    /// The next event, waiting up to `timeout`; `None` when none came (or a [`Waker`]
    /// woke the wait). After [`Event::Closed`], always `None`.
    pub fn next_event(&mut self, timeout: Duration) -> Option<Event> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.closed {
                return None;
            }
            let now = Instant::now();
            self.ready
                .extend(self.tracker.due(now).into_iter().map(Event::Receipt));
            if !self.ready.is_empty() {
                continue;
            }
            let until = self
                .tracker
                .next_due()
                .map_or(deadline, |due| due.min(deadline));
            match self
                .sender
                .lines
                .recv_timeout(until.saturating_duration_since(now))
            {
                Ok(Line::Wake) => return self.ready.pop_front(),
                Ok(line) => self.observe(line),
                Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => return None,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.observe(Line::Closed),
            }
        }
    }

    /// Closes the mailbox: waits out the receipt windows of recent sends, closes the
    /// sender's stdin (a clean exit removes its record and socket), and returns every
    /// event still to come, [`Event::Closed`] last.
    pub fn close(mut self) -> Vec<Event> {
        let mut events: Vec<Event> = self.ready.drain(..).collect();
        while !self.closed {
            let Some(due) = self.tracker.next_due() else {
                break;
            };
            if let Some(event) = self.next_event(due.saturating_duration_since(Instant::now())) {
                events.push(event);
            }
        }
        if !self.closed {
            self.sender.close(Instant::now() + Duration::from_secs(5));
            // The sender has ended: what it printed last is still on its way from the
            // reader, which says `Closed` at the end of its stdout.
            while let Ok(line) = self.sender.lines.recv_timeout(Duration::from_secs(1)) {
                if line == Line::Closed {
                    break;
                }
                self.observe(line);
            }
            self.closed = true;
            self.ready.push_back(Event::Closed {
                unknown: self.tracker.unknown(),
                reason: None,
            });
        }
        events.extend(self.ready.drain(..));
        events
    }

    fn observe(&mut self, line: Line) {
        match line {
            Line::Closed => {
                let status = self.sender.wait_exit(Duration::from_secs(1));
                self.closed = true;
                self.ready.push_back(Event::Closed {
                    unknown: self.tracker.unknown(),
                    reason: Some(format!(
                        "the sender ended ({status}){}",
                        self.sender.stderr_note()
                    )),
                });
            }
            line => {
                let (courier, home) = (&self.courier, &self.home);
                observe(line, &mut self.tracker, &mut self.ready, |address| {
                    session_at(courier, home, address)
                });
            }
        }
    }
}

/// The live session of `home` whose messaging socket is `address` (`uds:<path>`).
fn session_at<P: ProcessTable, F: RegistryFs>(
    courier: &Courier<P, F>,
    home: &ClaudeHome,
    address: &str,
) -> Option<String> {
    let path = address.strip_prefix("uds:").unwrap_or(address);
    let scan = courier.discovery().live(home).ok()?;
    scan.sessions.into_iter().find_map(|session| {
        let record = session.record;
        (record.messaging_socket_path.as_deref().map(Path::new) == Some(Path::new(path)))
            .then_some(record.session_id)
    })
}

/// Turns one stream line into events (receipts, messages, idle notices).
fn observe(
    line: Line,
    tracker: &mut Tracker,
    ready: &mut VecDeque<Event>,
    session_at: impl Fn(&str) -> Option<String>,
) {
    match line {
        Line::Receipt(receipt) => {
            tracker.counted(&receipt.recipient, receipt.outcome, receipt.count);
        }
        Line::Inbound(Inbound::Notice {
            outcome,
            recipient,
            msg_ids,
        }) => {
            ready.push_back(Event::Receipt(
                tracker.notice(outcome, &recipient, &msg_ids),
            ));
        }
        Line::Inbound(Inbound::Message {
            from,
            from_name,
            text,
        }) => {
            let session_id = session_at(&from);
            ready.push_back(Event::Message {
                from,
                from_name,
                session_id,
                text,
            });
        }
        Line::Inbound(Inbound::Idle { recipient }) => {
            let session_id = session_at(&recipient);
            ready.push_back(Event::Idle {
                recipient,
                session_id,
            });
        }
        Line::Inbound(Inbound::Other(text)) => ready.push_back(Event::Notice(text)),
        _ => {}
    }
}

/// The relay a mailbox hands to [`claude_peer_deliver::Prepared::hand_over`]: asks its running sender
/// and waits for the tool result, turning every other line meanwhile into events.
struct MailboxRelay<'a> {
    sender: RefCell<&'a mut Sender>,
    tracker: RefCell<&'a mut Tracker>,
    ready: RefCell<&'a mut VecDeque<Event>>,
    timeout: Duration,
    notify_when_idle: bool,
}

impl Relay for MailboxRelay<'_> {
    fn send(&self, target: &Target, message: &str) -> Result<Confirmation, RelayFailure> {
        let deadline = Instant::now() + self.timeout;
        let mut sender = self.sender.borrow_mut();
        let mut tracker = self.tracker.borrow_mut();
        let mut ready = self.ready.borrow_mut();
        let ids = sender
            .request(&Plan::of(target, message), self.notify_when_idle)
            .map_err(RelayFailure::new)?;
        // Sessions are looked up when events are read, not while sending.
        let msg_id = await_result(&mut sender, &ids.send, deadline, false, |line| {
            observe(line, &mut tracker, &mut ready, |_| None);
        })?;
        if let Some(msg_id) = &msg_id {
            tracker.sent(msg_id, &format!("uds:{}", target.socket.display()));
        }
        let detail = match &ids.subscribe {
            Some(id) => await_result(&mut sender, id, deadline, false, |line| {
                observe(line, &mut tracker, &mut ready, |_| None);
            })
            .err()
            .map(|failure| format!("the idle subscription failed: {failure}")),
            None => None,
        };
        Ok(Confirmation {
            detail,
            receipt: None,
            msg_id,
        })
    }
}

/// Which messages still wait for a word from their receiver.
#[derive(Debug)]
struct Tracker {
    window: Duration,
    /// Sent, no notice yet, by receiver: accepted once the window after the last send
    /// to that receiver passes quietly (notices to one receiver are debounced).
    unsettled: HashMap<String, (Instant, Vec<String>)>,
    /// Held, waiting for released, denied or expired.
    held: Vec<(String, String)>,
    /// The count of the informational line that precedes each notice, by receiver.
    counts: HashMap<(String, Outcome), usize>,
}

impl Tracker {
    fn new(window: Duration) -> Self {
        Self {
            window,
            unsettled: HashMap::new(),
            held: Vec::new(),
            counts: HashMap::new(),
        }
    }

    fn sent(&mut self, msg_id: &str, recipient: &str) {
        let entry = self
            .unsettled
            .entry(recipient.to_owned())
            .or_insert_with(|| (Instant::now(), Vec::new()));
        entry.0 = Instant::now() + self.window;
        entry.1.push(msg_id.to_owned());
    }

    fn counted(&mut self, recipient: &str, outcome: Outcome, count: usize) {
        self.counts.insert((recipient.to_owned(), outcome), count);
    }

    /// A notice naming `named` (maybe not all it covers): settles what it names, and
    /// attributes the rest only when exactly as many candidates wait as it covers.
    fn notice(&mut self, outcome: Outcome, recipient: &str, named: &[String]) -> Receipt {
        let count = self
            .counts
            .remove(&(recipient.to_owned(), outcome))
            .unwrap_or(0)
            .max(named.len())
            .max(1);
        let waiting: Vec<String> = match outcome {
            Outcome::Held | Outcome::Refused | Outcome::Accepted => self
                .unsettled
                .get(recipient)
                .map(|(_, ids)| ids.clone())
                .unwrap_or_default(),
            Outcome::Released | Outcome::Denied | Outcome::Expired => self
                .held
                .iter()
                .filter(|(_, to)| to == recipient)
                .map(|(id, _)| id.clone())
                .collect(),
        };
        let unnamed: Vec<String> = waiting
            .into_iter()
            .filter(|id| !named.contains(id))
            .collect();
        let mut msg_ids = named.to_vec();
        if unnamed.len() == count - named.len() {
            msg_ids.extend(unnamed);
        }
        if let Some((_, ids)) = self.unsettled.get_mut(recipient) {
            ids.retain(|id| !msg_ids.contains(id));
        }
        self.held.retain(|(id, _)| !msg_ids.contains(id));
        if outcome == Outcome::Held {
            self.held
                .extend(msg_ids.iter().map(|id| (id.clone(), recipient.to_owned())));
        }
        Receipt {
            outcome,
            msg_ids,
            count,
            recipient: recipient.to_owned(),
        }
    }

    /// Receivers whose window passed without a notice: their messages were accepted.
    fn due(&mut self, now: Instant) -> Vec<Receipt> {
        let due: Vec<String> = self
            .unsettled
            .iter()
            .filter(|(_, (until, ids))| *until <= now && !ids.is_empty())
            .map(|(recipient, _)| recipient.clone())
            .collect();
        due.into_iter()
            .filter_map(|recipient| {
                let (_, msg_ids) = self.unsettled.remove(&recipient)?;
                Some(Receipt {
                    outcome: Outcome::Accepted,
                    count: msg_ids.len(),
                    msg_ids,
                    recipient,
                })
            })
            .collect()
    }

    fn next_due(&self) -> Option<Instant> {
        self.unsettled
            .values()
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(until, _)| *until)
            .min()
    }

    fn unknown(&self) -> Vec<String> {
        let mut unknown: Vec<String> = self.held.iter().map(|(id, _)| id.clone()).collect();
        unknown.extend(
            self.unsettled
                .values()
                .flat_map(|(_, ids)| ids.iter().cloned()),
        );
        unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    #[test]
    fn quiet_windows_accept_and_notices_settle_what_they_name() {
        let mut tracker = Tracker::new(Duration::ZERO);
        tracker.sent("a", "uds:/r.sock");
        tracker.sent("b", "uds:/r.sock");
        tracker.sent("c", "uds:/s.sock");
        let held = tracker.notice(Outcome::Held, "uds:/r.sock", &ids(&["a"]));
        assert_eq!(held.msg_ids, ids(&["a"]));
        let accepted = tracker.due(Instant::now() + Duration::from_millis(1));
        assert_eq!(accepted.len(), 2);
        assert!(
            accepted
                .iter()
                .any(|r| r.recipient == "uds:/r.sock" && r.msg_ids == ids(&["b"]))
        );
        assert_eq!(
            tracker.unknown(),
            ids(&["a"]),
            "a held message has no final outcome yet"
        );
        let released = tracker.notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]));
        assert_eq!((released.msg_ids, released.count), (ids(&["a"]), 1));
        assert!(tracker.unknown().is_empty());
    }

    #[test]
    fn a_coalesced_notice_attributes_the_unnamed_only_when_the_count_leaves_no_doubt() {
        let mut tracker = Tracker::new(Duration::from_secs(60));
        for id in ["a", "b", "c", "d", "e", "f", "g"] {
            tracker.sent(id, "uds:/r.sock");
        }
        tracker.counted("uds:/r.sock", Outcome::Held, 7);
        let all = tracker.notice(
            Outcome::Held,
            "uds:/r.sock",
            &ids(&["a", "b", "c", "d", "e"]),
        );
        assert_eq!(
            (all.count, all.msg_ids.len()),
            (7, 7),
            "the two unnamed are the two waiting"
        );

        tracker.counted("uds:/r.sock", Outcome::Released, 3);
        let some = tracker.notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]));
        assert_eq!(
            (some.count, some.msg_ids),
            (3, ids(&["a"])),
            "six wait, three released: which is unknown"
        );
        assert_eq!(tracker.unknown().len(), 6);
    }
}
