//! A [`Mailbox`] on a thread of its own: jobs in over a channel, in order; every event
//! out to one callback, in the order heard, each job's reply in its place among them.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use claude_peer_deliver::Delivered;

use super::{Claim, Mailbox, MailboxEvent, Until, Waker};
use crate::{Error, Idle};

/// How long the owner waits for an event when nothing else comes: any job wakes it.
const IDLE_WAIT: Duration = Duration::from_secs(3600);

/// Starts a mailbox's sender: its `Closed` ends the mailbox, and the next job starts
/// another with this.
pub type Open = Box<dyn FnMut() -> Result<Mailbox, Error> + Send>;

/// How long a job's send waits before its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Until Claude Code sent it ([`Mailbox::send`]).
    Sent,
    /// Until its receipt is decided too ([`Mailbox::send_for_receipt`]).
    Receipt,
}

/// What became of a job.
#[derive(Debug)]
pub enum Reply {
    /// It was sent, or refused or failed, as [`Mailbox::send`] says; a sender that could
    /// not start is its error.
    Sent(Result<Box<Delivered>, Error>),
    /// Not sent: cancelled, or the mailbox was closing when its turn came.
    Cancelled,
}

/// One message to send, and whom to tell what became of it.
pub struct Job {
    session_id: String,
    message: String,
    idle: Idle,
    wait: Wait,
    cancelled: Box<dyn Fn() -> bool + Send>,
    claim: Box<dyn FnMut(&Claim<'_>) -> bool + Send>,
    reply: Box<dyn FnOnce(Reply) + Send>,
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("session_id", &self.session_id)
            .field("idle", &self.idle)
            .field("wait", &self.wait)
            .finish_non_exhaustive()
    }
}

impl Job {
    /// `message` for the live session `session_id`; `reply` is called on the mailbox's
    /// thread, before any event heard after it.
    pub fn new(
        session_id: impl Into<String>,
        message: impl Into<String>,
        reply: impl FnOnce(Reply) + Send + 'static,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            message: message.into(),
            idle: Idle::Ignore,
            wait: Wait::Sent,
            cancelled: Box::new(|| false),
            claim: Box::new(|_| true),
            reply: Box::new(reply),
        }
    }

    /// Whether to subscribe to the receiver's next idle moment [default: no].
    #[must_use]
    pub fn idle(mut self, idle: Idle) -> Self {
        self.idle = idle;
        self
    }

    /// How long the send waits before its reply [default: [`Wait::Sent`]].
    #[must_use]
    pub const fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }

    /// Asked when the job's turn comes: a job cancelled by then is not sent.
    #[must_use]
    pub fn cancelled_when(mut self, cancelled: impl Fn() -> bool + Send + 'static) -> Self {
        self.cancelled = Box::new(cancelled);
        self
    }

    /// Asked once the gate allowed the send, right before the hand-over, with the
    /// sender that will carry it: a caller that must record a send before it may have
    /// happened does so here. `false` sends nothing ([`Reply::Cancelled`]).
    #[must_use]
    pub fn claim_with(mut self, claim: impl FnMut(&Claim<'_>) -> bool + Send + 'static) -> Self {
        self.claim = Box::new(claim);
        self
    }
}

/// What closing a mailbox does with the jobs still waiting their turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// Answered [`Reply::Cancelled`], unsent: for a signal, which asks to stop soon.
    Cancel,
    /// Sent first, in order: for a user who quits after sending, so nothing they sent
    /// is dropped.
    Send,
}

/// What is asked of the mailbox's thread: a job, or to close.
enum Request {
    Job(Job),
    /// The last request: every job queued before it has been taken.
    Close,
}

/// A mailbox served by a thread of its own; see [`MailboxHandle::spawn`].
#[derive(Debug)]
pub struct MailboxHandle {
    requests: mpsc::Sender<Request>,
    /// The running sender's waker, updated by the thread when it starts another.
    waker: Arc<Mutex<Option<Waker>>>,
    closing: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl MailboxHandle {
    /// Serves `opened` (or, when `None`, a sender `open` starts at the first job) on a
    /// thread of its own; every event goes to `events`, `Closed` last for each sender.
    /// Without `open`, the mailbox ends with its sender, and later jobs are answered
    /// [`Error::Ended`]; with it, the next job starts another.
    pub fn spawn(
        opened: Option<Mailbox>,
        open: Option<Open>,
        events: impl FnMut(MailboxEvent) + Send + 'static,
    ) -> io::Result<Self> {
        let waker = Arc::new(Mutex::new(opened.as_ref().map(Mailbox::waker)));
        let closing = Arc::new(AtomicBool::new(false));
        let (requests, taken) = mpsc::channel();
        let owner = Owner {
            mailbox: opened,
            open,
            events: Box::new(events),
            waker: Arc::clone(&waker),
            closing: Arc::clone(&closing),
        };
        let thread = thread::Builder::new()
            .name("mailbox".to_owned())
            .spawn(move || owner.serve(&taken))?;
        Ok(Self {
            requests,
            waker,
            closing,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `job` after those before it; its reply comes through its callback (at
    /// once, [`Error::Ended`], when the mailbox's thread is gone).
    pub fn send(&self, job: Job) {
        if let Err(mpsc::SendError(Request::Job(job))) = self.requests.send(Request::Job(job)) {
            (job.reply)(Reply::Sent(Err(Error::Ended)));
            return;
        }
        self.wake();
    }

    /// Closes the mailbox once the send under way is done, doing with the jobs still
    /// waiting their turn what `waiting` says, and closes the sender cleanly (its record
    /// and socket removed), its last events told. Blocking. Once closed, jobs are
    /// answered [`Error::Ended`].
    pub fn close(&self, waiting: Waiting) {
        if waiting == Waiting::Cancel {
            self.closing.store(true, Ordering::Release);
        }
        // Behind every job queued before it: with `Waiting::Send`, those are all taken.
        let _ = self.requests.send(Request::Close);
        self.wake();
        let thread = lock(&self.thread).take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }

    fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake();
        }
    }
}

impl Drop for MailboxHandle {
    fn drop(&mut self) {
        self.close(Waiting::Cancel);
    }
}

/// What the mailbox's thread holds.
struct Owner {
    mailbox: Option<Mailbox>,
    open: Option<Open>,
    events: Box<dyn FnMut(MailboxEvent) + Send>,
    waker: Arc<Mutex<Option<Waker>>>,
    closing: Arc<AtomicBool>,
}

impl Owner {
    fn serve(mut self, requests: &Receiver<Request>) {
        // Without a way to start another, the thread ends with its sender.
        let mut started = self.mailbox.is_some();
        loop {
            if self.closing.load(Ordering::Acquire) {
                break;
            }
            let request = match self.mailbox.as_mut() {
                // No sender yet, or the last one ended: wait for a job to start one.
                None if started && self.open.is_none() => break,
                None => requests.recv().ok(),
                Some(mailbox) => match requests.try_recv() {
                    Ok(request) => Some(request),
                    Err(TryRecvError::Disconnected) => None,
                    Err(TryRecvError::Empty) => {
                        if let Some(event) = mailbox.next_event(IDLE_WAIT) {
                            self.tell(event);
                        }
                        continue;
                    }
                },
            };
            match request {
                Some(Request::Job(job)) => {
                    started = true;
                    self.take(job);
                }
                Some(Request::Close) | None => break,
            }
        }
        self.finish(requests);
    }

    /// Sends one job (starting a sender first when none runs), then tells what the
    /// mailbox heard meanwhile: a sender that ended in it is replaced, not sent to.
    fn take(&mut self, job: Job) {
        if self.closing.load(Ordering::Acquire) || (job.cancelled)() {
            (job.reply)(Reply::Cancelled);
            return;
        }
        if self.mailbox.is_none() {
            let opened = match self.open.as_mut() {
                Some(open) => open(),
                None => Err(Error::Ended),
            };
            match opened {
                Ok(opened) => self.start(opened),
                Err(err) => {
                    (job.reply)(Reply::Sent(Err(err)));
                    return;
                }
            }
        }
        let Some(mailbox) = self.mailbox.as_mut() else {
            return;
        };
        let until = match job.wait {
            Wait::Sent => Until::Sent,
            Wait::Receipt => Until::Decided,
        };
        let mut claim = job.claim;
        let reply =
            match mailbox.send_until(&job.session_id, &job.message, job.idle, until, &mut claim) {
                Ok(Some(sent)) => Reply::Sent(Ok(Box::new(sent))),
                Ok(None) => Reply::Cancelled,
                Err(err) => Reply::Sent(Err(err)),
            };
        (job.reply)(reply);
        while let Some(event) = self
            .mailbox
            .as_mut()
            .and_then(|m| m.next_event(Duration::ZERO))
        {
            self.tell(event);
        }
    }

    fn start(&mut self, mailbox: Mailbox) {
        *lock(&self.waker) = Some(mailbox.waker());
        self.mailbox = Some(mailbox);
    }

    /// Tells one event; at `Closed`, the sender is gone.
    fn tell(&mut self, event: MailboxEvent) {
        if matches!(event, MailboxEvent::Closed { .. }) {
            self.mailbox = None;
            *lock(&self.waker) = None;
        }
        (self.events)(event);
    }

    /// Answers the jobs still waiting and closes the sender, its last events told.
    fn finish(mut self, requests: &Receiver<Request>) {
        let ended = self.mailbox.is_none();
        while let Ok(request) = requests.try_recv() {
            if let Request::Job(job) = request {
                let reply = if ended && !self.closing.load(Ordering::Acquire) {
                    Reply::Sent(Err(Error::Ended))
                } else {
                    Reply::Cancelled
                };
                (job.reply)(reply);
            }
        }
        if let Some(mailbox) = self.mailbox.take() {
            for event in mailbox.close() {
                (self.events)(event);
            }
        }
    }
}

/// The waker slot, shared by the thread and its handle; a panic elsewhere leaves it usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
