//! A long-lived sender: many sends, every later outcome, and replies.
//!
//! A [`Mailbox`] keeps one headless Claude Code sender running (the same sender, model,
//! hooks and checks as [`ClaudeRelay`]), so it hears what a one-shot send cannot: a held
//! message released, denied or expired minutes later, replies sent to its address, and
//! idle notices of receivers it subscribed to. [`MailboxHandle`] serves one on a thread
//! of its own, for front ends that wait on other inputs too.

mod conversation;
mod events;
mod service;
mod tracker;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{RecvTimeoutError, Sender as Channel};
use std::time::{Duration, Instant};

use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;

use crate::Error;
use crate::channel::{Heard, Line};
use crate::decider::Waits;
use crate::headless::{HeadlessClaude, Idle};
use crate::relay::{TurnEnd, await_result, await_sent};
use crate::witness::Witness;
use claude_peer_deliver::{
    Basis, Confirmation, Courier, Delivered, Outcome, Recipient, Relay, RelayFailure,
};
use events::{observe, session_at};
pub use service::{Job, MailboxHandle, Open, Reply, Wait, Waiting};
use tracker::Tracker;

use crate::ClaudeRelay;

/// How many receivers' transcripts a mailbox follows at once (a thread each); messages to
/// others rest on notices and silence.
const MAX_FOLLOWED: usize = 64;

/// What a receiver did with messages sent from a mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailboxReceipt {
    /// What it did.
    pub outcome: Outcome,
    /// How that is known: its transcript (`queued`, `read`, `held`, one message each),
    /// its notice, or silence (`accepted`).
    pub basis: Basis,
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
pub enum MailboxEvent {
    /// A receiver's decision about messages sent earlier. `accepted` means no notice
    /// came within the receipt window after the last send to that receiver.
    Receipt(MailboxReceipt),
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

/// A send the gate allowed, about to be handed to the mailbox's sender: what a caller
/// that records its sends before they go ([`crate::Job::claim_with`]) writes down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claim<'a> {
    /// The receiving session, as the gate resolved it.
    pub session_id: &'a str,
    /// The sender's pid, the leader of its own process group.
    pub sender_pid: u32,
    /// The sender's messaging socket (its address, `uds:<path>`, as receivers record
    /// it), once known.
    pub sender_socket: Option<&'a str>,
}

/// Wakes a thread blocked in [`Mailbox::next_event`], which then returns `None`.
#[derive(Debug, Clone)]
pub struct Waker {
    lines: Channel<Line>,
    /// Set while a wake is on its way: many wakes before the waiter looks are one.
    pending: Arc<AtomicBool>,
}

impl Waker {
    /// Wakes the mailbox's waiter (a no-op once it is closed).
    pub fn wake(&self) {
        if !self.pending.swap(true, Ordering::AcqRel) {
            let _ = self.lines.send(Line::Wake);
        }
    }
}

/// One long-lived Claude Code sender and everything it hears.
///
/// ```no_run
/// use std::time::Duration;
/// use claude_peer_registry::ClaudeHome;
/// use claude_peer_sender::{ClaudeRelay, Idle, Mailbox, MailboxEvent};
///
/// let home = ClaudeHome::new("/home/ada/.claude");
/// let relay = ClaudeRelay::new("/usr/local/bin/claude", vec!["/usr/local/bin/claude-peers".into(), "hook".into()]);
/// let mut mailbox = Mailbox::open(home, &relay)?;
/// let sent = mailbox.send("8668bde0-50ff-4b1e-a7dc-8a4dcbefad57", "review PR 12, reply here", Idle::Notify)?;
/// println!("sent {:?}", sent.msg_id);
/// while let Some(event) = mailbox.next_event(Duration::from_secs(600)) {
///     match event {
///         MailboxEvent::Message { text, .. } => println!("reply: {text}"),
///         MailboxEvent::Receipt(receipt) => println!("{:?} {:?}", receipt.outcome, receipt.msg_ids),
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
    sender: HeadlessClaude,
    timeout: Duration,
    tracker: Tracker,
    ready: VecDeque<MailboxEvent>,
    /// The transcripts of the sessions sent to last (at most [`MAX_FOLLOWED`]), each
    /// followed from the first send to it; least recently sent to first.
    witnesses: Vec<(String, Witness)>,
    /// Transcript lines heard while a send waited for its tool result: read once the
    /// send is on the books, so its own lines find it.
    heard_while_sending: Vec<Line>,
    /// Shared with its [`Waker`]s: a wake is on its way.
    wake_pending: Arc<AtomicBool>,
    /// Sends since the sender's conversation began.
    conversation_sends: u32,
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
        let sender = HeadlessClaude::start(&relay.options)?;
        Ok(Self {
            courier,
            home,
            sender,
            timeout: relay.timeout,
            tracker: Tracker::new(Waits {
                window: relay.receipt_window,
                read: relay.read_wait,
            }),
            ready: VecDeque::new(),
            witnesses: Vec::new(),
            heard_while_sending: Vec::new(),
            wake_pending: Arc::new(AtomicBool::new(false)),
            conversation_sends: 0,
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
    /// the receiver does with it comes later as [`MailboxEvent::Receipt`]. With
    /// [`Idle::Notify`], the mailbox also subscribes to the receiver's next idle moment
    /// ([`MailboxEvent::Idle`]).
    pub fn send(
        &mut self,
        session_id: &str,
        message: &str,
        idle: Idle,
    ) -> Result<Delivered, Error> {
        self.send_until(session_id, message, idle, Until::Sent, &mut |_| true)
            .and_then(|sent| sent.ok_or(Error::Ended))
    }

    /// Sends as [`Mailbox::send`] does, then waits for the receiver's word as a one-shot
    /// send does (the receipt window, and again for `read` once it is queued), hearing
    /// every other event meanwhile: the receipt decided is in [`Delivered::receipt`] (none
    /// when the sender ended first). Its events still come as [`MailboxEvent::Receipt`]s.
    pub fn send_for_receipt(
        &mut self,
        session_id: &str,
        message: &str,
        idle: Idle,
    ) -> Result<Delivered, Error> {
        self.send_until(session_id, message, idle, Until::Decided, &mut |_| true)
            .and_then(|sent| sent.ok_or(Error::Ended))
    }

    /// Sends as [`Mailbox::send`] does, asking `claim` once the gate allowed the send and
    /// right before the hand-over, with the sender that will carry it: `false` sends
    /// nothing (`Ok(None)`).
    fn send_until(
        &mut self,
        session_id: &str,
        message: &str,
        idle: Idle,
        until: Until,
        claim: &mut dyn FnMut(&Claim<'_>) -> bool,
    ) -> Result<Option<Delivered>, Error> {
        if self.closed {
            return Err(Error::Ended);
        }
        if self.conversation_sends >= conversation::SENDS_PER_CONVERSATION {
            self.clear_conversation();
        }
        self.conversation_sends += 1;
        self.follow(session_id);
        let delivered = {
            let (pid, socket) = (self.sender.pid(), self.sender.socket().map(str::to_owned));
            let (courier, home) = (&self.courier, &self.home);
            let lookup = |address: &str| session_at(courier, home, address);
            let relay = MailboxRelay {
                session_at: &lookup,
                sender: RefCell::new(&mut self.sender),
                tracker: RefCell::new(&mut self.tracker),
                ready: RefCell::new(&mut self.ready),
                heard: RefCell::new(&mut self.heard_while_sending),
                timeout: self.timeout,
                idle,
                until,
            };
            self.courier
                .prepare(&self.home, session_id, message)
                .and_then(|prepared| {
                    let send = Claim {
                        session_id: &prepared.session().record.session_id,
                        sender_pid: pid,
                        sender_socket: socket.as_deref(),
                    };
                    if claim(&send) {
                        prepared.hand_over(&relay).map(Some)
                    } else {
                        Ok(None)
                    }
                })
        };
        for line in std::mem::take(&mut self.heard_while_sending) {
            self.observe(line);
        }
        // A sender that ended during the send was seen ending there (its stdout closed,
        // or the timeout killed it), not by `next_event`: the mailbox is closed here.
        if delivered.is_err() && !self.closed && self.sender.ended() {
            self.closed = true;
            self.ready.push_back(MailboxEvent::Closed {
                unknown: self.tracker.unknown(),
                reason: Some(format!(
                    "the sender ended during a send{}",
                    self.sender.stderr_note()
                )),
            });
        }
        let Some(mut delivered) = delivered? else {
            return Ok(None);
        };
        if until == Until::Decided {
            delivered.receipt = self.decide();
        }
        // A wake the send's wait took is spent: the caller looks at its inputs now.
        self.wake_pending.store(false, Ordering::Release);
        Ok(Some(delivered))
    }

    /// Hears the sender until the awaited message's receipt is decided (or the sender
    /// ended); every event meanwhile is kept for [`Mailbox::next_event`].
    fn decide(&mut self) -> Option<claude_peer_deliver::Receipt> {
        while !self.closed && !self.tracker.awaited_is_decided() {
            let now = Instant::now();
            self.ready
                .extend(self.tracker.due(now).into_iter().map(MailboxEvent::Receipt));
            let Some(until) = self.tracker.next_due() else {
                break;
            };
            match self
                .sender
                .lines
                .recv_timeout(until.saturating_duration_since(now))
            {
                // For the caller's wait, which looks at its inputs once this returns.
                Ok(Line::Wake) | Err(RecvTimeoutError::Timeout) => {}
                Ok(line) => self.observe(line),
                Err(RecvTimeoutError::Disconnected) => self.observe(Line::Closed),
            }
        }
        self.tracker.take_decision()
    }

    /// Follows the transcript of `session_id` from now, unless it is followed already;
    /// the session sent to longest ago stops being followed past [`MAX_FOLLOWED`].
    fn follow(&mut self, session_id: &str) {
        let at = self.witnesses.iter().position(|(id, _)| id == session_id);
        let witness = match at {
            Some(at) => self.witnesses.remove(at),
            None => (
                session_id.to_owned(),
                Witness::start(self.home.root(), session_id, self.sender.wake.clone()),
            ),
        };
        self.witnesses.push(witness);
        if self.witnesses.len() > MAX_FOLLOWED {
            self.witnesses.remove(0);
        }
    }

    /// A [`Waker`] that makes [`Mailbox::next_event`] return early, for callers that
    /// wait on other inputs too.
    #[must_use]
    pub fn waker(&self) -> Waker {
        Waker {
            lines: self.sender.wake.clone(),
            pending: Arc::clone(&self.wake_pending),
        }
    }

    /// The next event, waiting up to `timeout`; `None` when none came (or a [`Waker`]
    /// woke the wait). After [`MailboxEvent::Closed`], always `None`. A sender that ends during
    /// a send fails that send, and [`MailboxEvent::Closed`] follows.
    pub fn next_event(&mut self, timeout: Duration) -> Option<MailboxEvent> {
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
                .extend(self.tracker.due(now).into_iter().map(MailboxEvent::Receipt));
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
                Ok(Line::Wake) => {
                    self.wake_pending.store(false, Ordering::Release);
                    return self.ready.pop_front();
                }
                Ok(line) => self.observe(line),
                Err(RecvTimeoutError::Timeout) if Instant::now() >= deadline => return None,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => self.observe(Line::Closed),
            }
        }
    }

    /// Closes the mailbox: waits out the receipt windows of recent sends, closes the
    /// sender's stdin (a clean exit removes its record and socket), and returns every
    /// event still to come, [`MailboxEvent::Closed`] last.
    pub fn close(mut self) -> Vec<MailboxEvent> {
        let mut events: Vec<MailboxEvent> = self.ready.drain(..).collect();
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
            self.ready.push_back(MailboxEvent::Closed {
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
                self.ready.push_back(MailboxEvent::Closed {
                    unknown: self.tracker.unknown(),
                    reason: Some(format!(
                        "the sender ended ({status}){}",
                        self.sender.stderr_note()
                    )),
                });
            }
            Line::Transcript { session_id, heard } => match heard {
                Heard::Fact(fact) => {
                    let us = self.sender.socket().map(|socket| format!("uds:{socket}"));
                    let receipt = self.tracker.transcript(
                        &session_id,
                        &fact,
                        us.as_deref().unwrap_or_default(),
                    );
                    self.ready.extend(receipt.map(MailboxEvent::Receipt));
                }
                // Followed afresh at the next send to it; meanwhile notices and silence.
                Heard::Lost(_) => self.witnesses.retain(|(id, _)| *id != session_id),
            },
            line => {
                self.sender.ask_again(&line);
                let (courier, home) = (&self.courier, &self.home);
                observe(line, &mut self.tracker, &mut self.ready, |address| {
                    session_at(courier, home, address)
                });
            }
        }
    }
}

/// The relay a mailbox hands to [`claude_peer_deliver::Prepared::hand_over`]: asks its running sender
/// and waits for the tool result, turning every other line meanwhile into events.
struct MailboxRelay<'a> {
    /// The session at a messaging address, looked up when a message or notice is heard
    /// mid-send, as between sends.
    session_at: &'a dyn Fn(&str) -> Option<String>,
    sender: RefCell<&'a mut HeadlessClaude>,
    tracker: RefCell<&'a mut Tracker>,
    ready: RefCell<&'a mut VecDeque<MailboxEvent>>,
    heard: RefCell<&'a mut Vec<Line>>,
    timeout: Duration,
    idle: Idle,
    until: Until,
}

/// Until when a send waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// Claude Code sent it.
    Sent,
    /// Its receipt is decided too.
    Decided,
}

impl Relay for MailboxRelay<'_> {
    fn send(&self, target: &Recipient, message: &str) -> Result<Confirmation, RelayFailure> {
        let deadline = Instant::now() + self.timeout;
        let mut sender = self.sender.borrow_mut();
        let mut tracker = self.tracker.borrow_mut();
        let mut ready = self.ready.borrow_mut();
        let mut heard = self.heard.borrow_mut();
        // Transcript lines wait until the send is on the books.
        let mut other = |line, tracker: &mut Tracker| match line {
            Line::Transcript { .. } => heard.push(line),
            line => observe(line, tracker, &mut ready, self.session_at),
        };
        let ids = sender
            .request(target, message, self.idle)
            .map_err(|err| RelayFailure::new(err.to_string()))?;
        let msg_id = await_sent(&mut sender, &ids, deadline, TurnEnd::Continues, |line| {
            other(line, &mut tracker);
        })?;
        if let Some(msg_id) = &msg_id {
            let recipient = format!("uds:{}", target.socket.display());
            tracker.sent(msg_id, &recipient, &target.session_id, message);
            if self.until == Until::Decided {
                tracker.await_decision(msg_id);
            }
        }
        let detail = match &ids.subscribe {
            Some(id) => await_result(&mut sender, id, deadline, TurnEnd::Continues, |line| {
                other(line, &mut tracker);
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
