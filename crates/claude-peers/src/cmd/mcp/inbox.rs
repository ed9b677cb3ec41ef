//! The server's mailbox: one long-lived Claude Code sender for every `send_message`, so
//! replies, later receipts and idle notices reach the calling agent (`wait_for_messages`,
//! `notifications/message`) instead of a one-shot sender's socket that is gone.
//!
//! The [`Mailbox`] is synchronous and owned by one thread; calls hand it requests over a
//! channel and wake it with its [`Waker`]. Everything it hears goes to [`Events`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use claude_peer_deliver::{DEFAULT_TIMEOUT, Delivered, Outcome};
use claude_peer_sender::{ClaudeRelay, Event, Idle, Mailbox, Waker};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

use super::to_json;
use crate::error::Failure;
use crate::json::{BroadcastJson, DeliveredJson, MailboxEventJson};
use crate::ops::broadcast::{Targets, broadcast_with};
use crate::ops::send::Via;
use crate::ops::{Context, send, sessions};

/// The most events kept for `wait_for_messages`; older ones are dropped and counted.
const MAX_EVENTS: usize = 1000;
/// The most announcements waiting for a slow client; past that they are skipped (the
/// events stay in the queue).
pub(crate) const MAX_ANNOUNCEMENTS: usize = 1000;

/// How long a single send's answer waits for its receipt, and again after `queued`
/// for `read`: a receipt the agent can act on, without holding the call for long.
const RECEIPT_WAIT: Duration = Duration::from_secs(2);

/// The events heard and not yet taken by `wait_for_messages`, oldest first.
#[derive(Debug)]
pub(crate) struct Events {
    queue: Mutex<Queue>,
    notify: Notify,
    /// Each event as it comes, to be announced to the client.
    announce: tokio::sync::mpsc::Sender<Value>,
}

#[derive(Debug, Default)]
struct Queue {
    events: VecDeque<Value>,
    dropped: usize,
}

impl Events {
    pub(crate) fn new(announce: tokio::sync::mpsc::Sender<Value>) -> Self {
        Self {
            queue: Mutex::default(),
            notify: Notify::new(),
            announce,
        }
    }

    fn push(&self, event: &Event) {
        let Ok(value) = serde_json::to_value(MailboxEventJson::from(event)) else {
            return;
        };
        {
            let mut queue = self.lock();
            if queue.events.len() >= MAX_EVENTS {
                queue.events.pop_front();
                queue.dropped += 1;
            }
            queue.events.push_back(value.clone());
        }
        self.notify.notify_waiters();
        // A client that does not read misses announcements, never the events.
        let _ = self.announce.try_send(value);
    }

    /// Everything queued, `dropped` first when some were; waits up to `timeout` for at
    /// least one.
    pub(crate) async fn wait(&self, timeout: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Enabled before looking: a push in between still wakes it.
            notified.as_mut().enable();
            let events = self.drain();
            if !events.is_empty() {
                return events;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.drain();
            }
        }
    }

    fn drain(&self) -> Vec<Value> {
        let mut queue = self.lock();
        let mut events = Vec::new();
        if queue.dropped > 0 {
            events.push(json!({"event": "dropped", "count": queue.dropped}));
            queue.dropped = 0;
        }
        events.extend(queue.events.drain(..));
        events
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        lock(&self.queue)
    }
}

/// Whom a `send_message` call is for.
#[derive(Debug)]
pub(crate) enum Whom {
    One(String),
    Several(Vec<String>),
}

/// What a call answers: the JSON of `send`, or a failure.
pub(crate) type Answer = Result<String, Failure>;

/// What reaches the mailbox's thread.
enum Input {
    Request(Request),
    /// Wakes the thread while it has no sender, to see it must stop.
    Stop,
}

/// One `send_message` call, waiting for the mailbox's thread.
struct Request {
    whom: Whom,
    message: String,
    idle: Idle,
    /// Whether the call was cancelled: then, if not taken yet, it is not sent.
    cancelled: Box<dyn Fn() -> bool + Send>,
    reply: oneshot::Sender<Answer>,
}

/// The mailbox's thread and how to reach it.
#[derive(Debug)]
pub(crate) struct Inbox {
    /// The sender's name, fixed when it starts.
    pub(crate) from: String,
    requests: mpsc::Sender<Input>,
    /// The running sender's waker; none while the thread has no sender.
    waker: Arc<Mutex<Option<Waker>>>,
    stopping: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Inbox {
    /// Starts the sender (blocking: it spawns Claude Code) and the thread that owns it.
    pub(crate) fn open(
        ctx: &Context,
        claude: Option<PathBuf>,
        from: String,
        events: Arc<Events>,
    ) -> Result<Self, Failure> {
        let relay = send::claude(claude, from.clone(), DEFAULT_TIMEOUT)?;
        let mailbox = send::mailbox(ctx, &relay)?;
        let waker = Arc::new(Mutex::new(Some(mailbox.waker())));
        let (requests, taken) = mpsc::channel();
        let stopping = Arc::new(AtomicBool::new(false));
        let owner = Owner {
            ctx: ctx.clone(),
            relay,
            events,
            waker: Arc::clone(&waker),
            stopping: Arc::clone(&stopping),
            pending: Vec::new(),
        };
        let thread = thread::Builder::new()
            .name("mcp-inbox".to_owned())
            .spawn(move || owner.serve(mailbox, &taken))
            .map_err(|err| {
                Failure::error("mcp_failed", format!("cannot start the mailbox: {err}"))
            })?;
        Ok(Self {
            from,
            requests,
            waker,
            stopping,
            thread: Mutex::new(Some(thread)),
        })
    }

    fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake();
        }
    }

    /// Sends in arrival order; the answer, or a failure when the mailbox ended first.
    pub(crate) async fn send(
        &self,
        whom: Whom,
        message: String,
        idle: Idle,
        cancelled: Box<dyn Fn() -> bool + Send>,
    ) -> Answer {
        let (reply, answer) = oneshot::channel();
        let request = Request {
            whom,
            message,
            idle,
            cancelled,
            reply,
        };
        if self.requests.send(Input::Request(request)).is_ok() {
            self.wake();
        }
        answer.await.unwrap_or_else(|_| {
            Err(Failure::error(
                "mailbox_ended",
                "the server's mailbox ended before the message was sent; nothing was sent",
            ))
        })
    }

    /// Lets the send under way finish, answers the waiting ones `cancelled`, and closes
    /// the mailbox cleanly (its sender's record and socket removed). Blocking.
    pub(crate) fn close(&self) {
        self.stopping.store(true, Ordering::Release);
        let _ = self.requests.send(Input::Stop);
        self.wake();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

/// A single send's answer, held until its receipt comes or its deadline passes.
struct Pending {
    delivered: Delivered,
    msg_id: String,
    deadline: Instant,
    queued: bool,
    reply: oneshot::Sender<Answer>,
}

impl Pending {
    fn answer(self) {
        let _ = self.reply.send(delivered_json(&self.delivered));
    }
}

/// What the mailbox's thread holds besides the mailbox.
struct Owner {
    ctx: Context,
    /// What a new sender is started with when the last one ended.
    relay: ClaudeRelay,
    events: Arc<Events>,
    waker: Arc<Mutex<Option<Waker>>>,
    stopping: Arc<AtomicBool>,
    pending: Vec<Pending>,
}

impl Owner {
    fn serve(mut self, mailbox: Mailbox, requests: &Receiver<Input>) {
        let mut mailbox = Some(mailbox);
        loop {
            if self.stopping.load(Ordering::Acquire) {
                break;
            }
            let Some(open) = mailbox.as_mut() else {
                // The last sender ended: the next call starts another.
                match requests.recv() {
                    Ok(Input::Request(request)) if !self.stopping.load(Ordering::Acquire) => {
                        match send::mailbox(&self.ctx, &self.relay).map_err(Failure::from) {
                            Ok(opened) => {
                                *lock(&self.waker) = Some(opened.waker());
                                mailbox = Some(opened);
                                self.take(&mut mailbox, request);
                                self.hear_ready(&mut mailbox);
                            }
                            Err(failure) => {
                                let _ = request.reply.send(Err(failure));
                            }
                        }
                    }
                    Ok(Input::Request(request)) => {
                        let _ = request.reply.send(Err(cancelled()));
                    }
                    Ok(Input::Stop) | Err(_) => break,
                }
                continue;
            };
            match requests.try_recv() {
                Ok(Input::Request(request)) => {
                    self.take(&mut mailbox, request);
                    self.hear_ready(&mut mailbox);
                    continue;
                }
                Ok(Input::Stop) => continue,
                Err(TryRecvError::Disconnected) => break,
                Err(TryRecvError::Empty) => {}
            }
            let now = Instant::now();
            let (due, waiting) = std::mem::take(&mut self.pending)
                .into_iter()
                .partition(|p| p.deadline <= now);
            self.pending = waiting;
            due.into_iter().for_each(Pending::answer);
            let wait = self
                .pending
                .iter()
                .map(|p| p.deadline.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::from_secs(3600));
            if let Some(event) = open.next_event(wait) {
                self.hear(&event, &mut mailbox);
            }
        }
        self.pending.drain(..).for_each(Pending::answer);
        while let Ok(input) = requests.try_recv() {
            if let Input::Request(request) = input {
                let _ = request.reply.send(Err(cancelled()));
            }
        }
        if let Some(mailbox) = mailbox {
            for event in mailbox.close() {
                self.events.push(&event);
            }
        }
    }

    /// Takes in one event; at `Closed`, the mailbox is gone and the next call starts
    /// another.
    fn hear(&mut self, event: &Event, mailbox: &mut Option<Mailbox>) {
        if let Event::Receipt(receipt) = event {
            self.receipt(receipt);
        }
        self.events.push(event);
        if matches!(event, Event::Closed { .. }) {
            self.pending.drain(..).for_each(Pending::answer);
            *lock(&self.waker) = None;
            *mailbox = None;
        }
    }

    /// Takes in what the mailbox has heard already, before the next call: a sender that
    /// ended during the send just made must be replaced, not sent to.
    fn hear_ready(&mut self, mailbox: &mut Option<Mailbox>) {
        while let Some(event) = mailbox.as_mut().and_then(|m| m.next_event(Duration::ZERO)) {
            self.hear(&event, mailbox);
        }
    }

    /// Sends one call's message (to each of its sessions); a cancelled call is not sent.
    /// A sender that ends in it is heard as the mailbox's `Closed` next.
    fn take(&mut self, mailbox: &mut Option<Mailbox>, request: Request) {
        let Some(mailbox) = mailbox.as_mut() else {
            return;
        };
        if (request.cancelled)() {
            let _ = request.reply.send(Err(cancelled()));
            return;
        }
        let (message, idle) = (&request.message, request.idle);
        match request.whom {
            Whom::One(target) => match sessions::session_id(&self.ctx, &target)
                .map_err(Failure::from)
                .and_then(|id| mailbox.send(&id, message, idle).map_err(Failure::from))
            {
                Ok(delivered) => match delivered.msg_id.clone() {
                    Some(msg_id) => self.pending.push(Pending {
                        delivered,
                        msg_id,
                        deadline: Instant::now() + RECEIPT_WAIT,
                        queued: false,
                        reply: request.reply,
                    }),
                    None => {
                        let _ = request.reply.send(delivered_json(&delivered));
                    }
                },
                Err(failure) => {
                    let _ = request.reply.send(Err(failure));
                }
            },
            Whom::Several(given) => {
                let targets = Targets {
                    given,
                    ..Targets::default()
                };
                let outcomes = broadcast_with(&self.ctx, &targets, |session_id| {
                    mailbox.send(session_id, message, idle)
                });
                let answer = outcomes
                    .map_err(Failure::from)
                    .and_then(|outcomes| to_json(&BroadcastJson::new(&outcomes, Via::Claude)));
                let _ = request.reply.send(answer);
            }
        }
    }

    /// Settles the single sends `receipt` names: at once when it is decisive, after
    /// another wait for `read` when it is `queued`.
    fn receipt(&mut self, receipt: &claude_peer_sender::Receipt) {
        let now = Instant::now();
        let mut waiting = Vec::new();
        for mut pending in self.pending.drain(..) {
            if !receipt.msg_ids.contains(&pending.msg_id) {
                waiting.push(pending);
                continue;
            }
            pending.delivered.receipt = Some(claude_peer_deliver::Receipt {
                outcome: receipt.outcome,
                basis: receipt.basis,
            });
            if receipt.outcome != Outcome::Queued {
                pending.answer();
                continue;
            }
            if !pending.queued {
                pending.queued = true;
                pending.deadline = now + RECEIPT_WAIT;
            }
            waiting.push(pending);
        }
        self.pending = waiting;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn cancelled() -> Failure {
    Failure::error(
        "cancelled",
        "the call was cancelled before its turn to send; nothing was sent",
    )
}

fn delivered_json(delivered: &Delivered) -> Answer {
    to_json(&DeliveredJson::new(delivered, Via::Claude))
}

#[cfg(test)]
mod tests {
    use claude_peer_sender::Event;
    use serde_json::json;

    use super::{Events, MAX_EVENTS};

    #[test]
    fn a_full_queue_drops_the_oldest_and_the_next_drain_counts_them_first() {
        let (announce, mut announced) = tokio::sync::mpsc::channel(super::MAX_ANNOUNCEMENTS);
        let events = Events::new(announce);
        for n in 0..MAX_EVENTS + 2 {
            events.push(&Event::Notice(n.to_string()));
        }
        let drained = events.drain();
        assert_eq!(drained.len(), MAX_EVENTS + 1);
        assert_eq!(drained[0], json!({"event": "dropped", "count": 2}));
        assert_eq!(drained[1], json!({"event": "notice", "text": "2"}));
        assert!(events.drain().is_empty(), "each event once");
        assert_eq!(
            announced.try_recv().unwrap()["text"],
            "0",
            "announced in order"
        );
        let mut count = 1;
        while announced.try_recv().is_ok() {
            count += 1;
        }
        assert_eq!(
            count,
            super::MAX_ANNOUNCEMENTS,
            "a client that never reads holds no more"
        );
    }
}
