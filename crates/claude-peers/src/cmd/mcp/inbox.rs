//! The server's mailbox: one long-lived Claude Code sender for every `send_message`, so
//! replies, later receipts and idle notices reach the calling agent (`wait_for_messages`,
//! `notifications/message`) instead of a one-shot sender's socket that is gone.
//!
//! The mailbox runs as the sender library's service ([`MailboxHandle`]): calls hand it
//! jobs in arrival order, and everything it hears goes to [`Events`].

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use claude_peer_deliver::{DEFAULT_TIMEOUT, Delivered};
use claude_peer_sender::{Idle, MailboxEvent, MailboxHandle, Reply, Wait, Waiting};
use serde_json::Value;
use tokio::sync::{Notify, oneshot};

use super::to_json;
use crate::error::Failure;
use crate::json::{BroadcastJson, DeliveredJson, MailboxEventJson};
use crate::ops::broadcast::{Targets, broadcast_with};
use crate::ops::history::Journal;
use crate::ops::send::Via;
use crate::ops::{self, Context, send, sessions};
use crate::output::{Format, Output};

/// The most events kept for `wait_for_messages`; older ones are dropped and counted.
const MAX_EVENTS: usize = 1000;
/// The most bytes of events (as JSON) kept for `wait_for_messages`: a message can be
/// 64 KiB, and a thousand of them are more than a waiting client needs held.
const MAX_EVENT_BYTES: usize = 16 << 20;
/// The most announcements waiting for a slow client; past that they are skipped (the
/// events stay in the queue). Each shares its event with the queue.
pub(crate) const MAX_ANNOUNCEMENTS: usize = 256;

/// The events heard and not yet taken by `wait_for_messages`, oldest first.
#[derive(Debug)]
pub(crate) struct Events {
    queue: Mutex<Queue>,
    notify: Notify,
    /// Each event as it comes, to be announced to the client.
    announce: tokio::sync::mpsc::Sender<Arc<Value>>,
}

/// The events held, each with its size as JSON, and how many were dropped unread.
#[derive(Debug, Default)]
struct Queue {
    events: VecDeque<(Arc<Value>, usize)>,
    bytes: usize,
    dropped: usize,
}

impl Queue {
    fn push_back(&mut self, event: Arc<Value>, size: usize) {
        while !self.events.is_empty()
            && (self.events.len() >= MAX_EVENTS || self.bytes + size > MAX_EVENT_BYTES)
        {
            if let Some((_, dropped)) = self.events.pop_front() {
                self.bytes -= dropped;
                self.dropped += 1;
            }
        }
        self.bytes += size;
        self.events.push_back((event, size));
    }
}

impl Events {
    pub(crate) fn new(announce: tokio::sync::mpsc::Sender<Arc<Value>>) -> Self {
        Self {
            queue: Mutex::default(),
            notify: Notify::new(),
            announce,
        }
    }

    /// Queues `event`, with the history's record of a message in.
    fn push(&self, event: &MailboxEvent, logged: Option<&claude_peer_post::Message>) {
        let Ok(value) = serde_json::to_value(MailboxEventJson::heard(event, logged)) else {
            return;
        };
        let size = serde_json::to_vec(&value).map_or(0, |json| json.len());
        let value = Arc::new(value);
        self.lock().push_back(Arc::clone(&value), size);
        self.notify.notify_waiters();
        // A client that does not read misses announcements, never the events.
        let _ = self.announce.try_send(value);
    }

    /// Everything queued, `dropped` first when some were; waits up to `timeout` for at
    /// least one. A call its client cancels (`cancelled` completes, `is_cancelled` says
    /// so) takes nothing: its answer would be thrown away, so what it would have taken
    /// stays queued, in order, for the next call.
    pub(crate) async fn wait(
        &self,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
        is_cancelled: impl Fn() -> bool,
    ) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        tokio::pin!(cancelled);
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Enabled before looking: a push in between still wakes it.
            notified.as_mut().enable();
            let taken = self.take();
            if !taken.is_empty() {
                return self.unless_cancelled(taken, &is_cancelled);
            }
            tokio::select! {
                () = &mut cancelled => return Vec::new(),
                woken = tokio::time::timeout_at(deadline, notified) => {
                    if woken.is_err() {
                        return self.unless_cancelled(self.take(), &is_cancelled);
                    }
                }
            }
        }
    }

    /// `taken` as an answer, or back in the queue, in front, when the call was cancelled.
    fn unless_cancelled(&self, taken: Taken, is_cancelled: &impl Fn() -> bool) -> Vec<Value> {
        if !is_cancelled() {
            return taken.into_events();
        }
        let mut queue = self.lock();
        queue.dropped += taken.dropped;
        for (event, size) in taken.events.into_iter().rev() {
            queue.bytes += size;
            queue.events.push_front((event, size));
        }
        Vec::new()
    }

    fn take(&self) -> Taken {
        let mut queue = self.lock();
        queue.bytes = 0;
        Taken {
            dropped: std::mem::take(&mut queue.dropped),
            events: queue.events.drain(..).collect(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What one call took from the queue.
struct Taken {
    dropped: usize,
    events: Vec<(Arc<Value>, usize)>,
}

impl Taken {
    fn is_empty(&self) -> bool {
        self.dropped == 0 && self.events.is_empty()
    }

    /// The events, `dropped` first when some were.
    fn into_events(self) -> Vec<Value> {
        let mut events = Vec::with_capacity(self.events.len() + 1);
        if self.dropped > 0 {
            let dropped = MailboxEventJson::Dropped {
                count: self.dropped,
            };
            events.push(serde_json::to_value(dropped).unwrap_or_default());
        }
        events.extend(
            self.events
                .into_iter()
                .map(|(event, _)| Arc::unwrap_or_clone(event)),
        );
        events
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

/// The server's mailbox service and what its calls need.
#[derive(Debug)]
pub(crate) struct Inbox {
    /// The sender's name, fixed when it starts.
    pub(crate) from: String,
    /// Where its sends and what it hears are recorded.
    journal: Arc<Journal>,
    ctx: Context,
    mailbox: Arc<MailboxHandle>,
    /// Held by one call at a time, in arrival order: a call's sends are not interleaved
    /// with another's.
    turn: tokio::sync::Mutex<()>,
}

impl Inbox {
    /// Starts the sender (blocking: it spawns Claude Code) and the mailbox service that
    /// owns it, which starts another at the next call when one ended.
    pub(crate) fn open(
        ctx: &Context,
        claude: Option<PathBuf>,
        from: String,
        events: Arc<Events>,
    ) -> Result<Self, Failure> {
        let (journal, unrecorded) = Journal::open(&from);
        if let Some(err) = unrecorded {
            Output::new(Format::Json).warn(&format!("the history is not kept: {err}"));
        }
        let relay = send::claude(claude, from.clone(), DEFAULT_TIMEOUT)?;
        let mut open = send::mailboxes(ctx, &relay);
        let first = open()?;
        let heard = Arc::clone(&journal).events(move |event, logged| {
            events.push(&event, logged.as_ref());
        });
        let mailbox = MailboxHandle::spawn(Some(first), Some(open), heard).map_err(|err| {
            Failure::error("mcp_failed", format!("cannot start the mailbox: {err}"))
        })?;
        Ok(Self {
            journal,
            from,
            ctx: ctx.clone(),
            mailbox: Arc::new(mailbox),
            turn: tokio::sync::Mutex::new(()),
        })
    }

    /// Sends in arrival order; the answer, or a failure when the mailbox ended first. A
    /// single send waits for its receipt as a one-shot `send` does.
    pub(crate) async fn send(
        &self,
        whom: Whom,
        (message, in_reply_to): (String, Option<String>),
        idle: Idle,
        cancelled: Box<dyn Fn() -> bool + Send>,
    ) -> Answer {
        let _turn = self.turn.lock().await;
        match whom {
            Whom::One(target) => {
                let ctx = self.ctx.clone();
                let session_id =
                    tokio::task::spawn_blocking(move || sessions::session_id(&ctx, &target))
                        .await
                        .unwrap_or(Err(ops::Error::MailboxEnded))?;
                let (reply, answer) = oneshot::channel();
                let job = self
                    .journal
                    .job(session_id, message, in_reply_to, move |sent| {
                        let _ = reply.send(sent);
                    })
                    .idle(idle)
                    .wait(Wait::Receipt)
                    .cancelled_when(cancelled);
                self.mailbox.send(job);
                match answer.await {
                    Ok(Reply::Sent(Ok(delivered))) => delivered_json(&delivered),
                    Ok(Reply::Sent(Err(err))) => Err(Failure::from(err)),
                    Ok(Reply::Cancelled) => Err(ops::Error::Cancelled.into()),
                    Err(_) => Err(ops::Error::MailboxEnded.into()),
                }
            }
            Whom::Several(given) => {
                if cancelled() {
                    return Err(ops::Error::Cancelled.into());
                }
                let (ctx, mailbox) = (self.ctx.clone(), Arc::clone(&self.mailbox));
                let journal = Arc::clone(&self.journal);
                tokio::task::spawn_blocking(move || {
                    broadcast(&ctx, (&mailbox, &journal), given, &message, idle)
                })
                .await
                .unwrap_or_else(|err| {
                    Err(Failure::error(
                        "internal",
                        format!("the send failed: {err}"),
                    ))
                })
            }
        }
    }

    /// Lets the send under way finish, answers the waiting ones `cancelled`, and closes
    /// the mailbox cleanly (its sender's record and socket removed). Blocking.
    pub(crate) fn close(&self) {
        self.mailbox.close(Waiting::Cancel);
    }
}

/// Sends to several sessions as `send` to several targets does, each through the mailbox.
fn broadcast(
    ctx: &Context,
    (mailbox, journal): (&MailboxHandle, &Arc<Journal>),
    given: Vec<String>,
    message: &str,
    idle: Idle,
) -> Answer {
    let targets = Targets {
        given,
        ..Targets::default()
    };
    let outcomes = broadcast_with(ctx, &targets, |session_id| {
        let (reply, answer) = std::sync::mpsc::channel();
        mailbox.send(
            journal
                .job(
                    session_id.to_owned(),
                    message.to_owned(),
                    None,
                    move |sent| {
                        let _ = reply.send(sent);
                    },
                )
                .idle(idle),
        );
        match answer.recv() {
            Ok(Reply::Sent(sent)) => sent.map(|delivered| *delivered).map_err(ops::Error::from),
            Ok(Reply::Cancelled) => Err(ops::Error::Cancelled),
            Err(_) => Err(ops::Error::MailboxEnded),
        }
    })?;
    to_json(&BroadcastJson::new(&outcomes, Via::Claude))
}

fn delivered_json(delivered: &Delivered) -> Answer {
    to_json(&DeliveredJson::new(delivered, Via::Claude))
}

#[cfg(test)]
mod tests {
    use claude_peer_sender::MailboxEvent;
    use serde_json::json;

    use super::{Events, MAX_EVENTS};

    #[test]
    fn the_queue_holds_at_most_16_mib_of_events_dropping_and_counting_the_oldest() {
        let (announce, _announced) = tokio::sync::mpsc::channel(super::MAX_ANNOUNCEMENTS);
        let events = Events::new(announce);
        let text = "x".repeat(60 * 1024);
        for n in 0..400 {
            events.push(&MailboxEvent::Notice(format!("{n} {text}")), None);
        }
        let held = events.lock().bytes;
        assert!(held <= super::MAX_EVENT_BYTES, "{held}");
        let taken = events.take().into_events();
        let dropped = taken[0]["count"].as_u64().unwrap();
        assert!(dropped > 100, "{dropped}");
        assert_eq!(
            taken.len() as u64 - 1 + dropped,
            400,
            "each kept or counted"
        );
        assert!(
            taken.last().unwrap()["text"]
                .as_str()
                .unwrap()
                .starts_with("399 ")
        );
        assert_eq!(events.lock().bytes, 0);
    }

    #[test]
    fn a_cancelled_wait_leaves_every_event_queued_in_order_for_the_next() {
        let (announce, _announced) = tokio::sync::mpsc::channel(super::MAX_ANNOUNCEMENTS);
        let events = Events::new(announce);
        for n in 0..=MAX_EVENTS {
            events.push(&MailboxEvent::Notice(n.to_string()), None);
        }
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let wait = |cancelled: bool| {
            runtime.block_on(events.wait(
                std::time::Duration::from_secs(5),
                std::future::pending(),
                || cancelled,
            ))
        };
        assert!(wait(true).is_empty(), "a cancelled call takes nothing");
        let next = wait(false);
        assert_eq!(next.len(), MAX_EVENTS + 1);
        assert_eq!(next[0], json!({"event": "dropped", "count": 1}));
        assert_eq!(next[1]["text"], "1");
        assert_eq!(next[MAX_EVENTS]["text"], MAX_EVENTS.to_string());
    }

    #[test]
    fn a_full_queue_drops_the_oldest_and_the_next_drain_counts_them_first() {
        let (announce, mut announced) = tokio::sync::mpsc::channel(super::MAX_ANNOUNCEMENTS);
        let events = Events::new(announce);
        for n in 0..MAX_EVENTS + 2 {
            events.push(&MailboxEvent::Notice(n.to_string()), None);
        }
        let drained = events.take().into_events();
        assert_eq!(drained.len(), MAX_EVENTS + 1);
        assert_eq!(drained[0], json!({"event": "dropped", "count": 2}));
        assert_eq!(drained[1], json!({"event": "notice", "text": "2"}));
        assert!(events.take().is_empty(), "each event once");
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
