//! Messages typed in `top`: one Claude Code sender, started at the first message, sends
//! them in order on a thread of its own (the screen never waits for it); what each send
//! did, and everything the sender hears later, reaches the dashboard's loop.

use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use claude_peer_deliver::{DEFAULT_TIMEOUT, Delivered};
use claude_peer_sender::{Event, Idle, Mailbox, Waker};

use super::Input;
use crate::error::Failure;
use crate::ops::{Context, send};

/// What the mail thread tells the dashboard.
#[derive(Debug)]
pub(crate) enum Heard {
    /// A send finished: sent (its `msg_id`), or refused or failed.
    Sent {
        session_id: String,
        result: Result<Box<Delivered>, Failure>,
    },
    /// Something the sender heard after a send: receipts, replies, its end.
    Event(Event),
}

enum Job {
    Send { session_id: String, message: String },
    Stop,
}

/// The mail thread and how to reach it.
#[derive(Debug)]
pub(crate) struct Mail {
    jobs: Sender<Job>,
    /// The open mailbox's waker, to interrupt its wait for events; none while closed.
    waker: Arc<Mutex<Option<Waker>>>,
    thread: JoinHandle<()>,
}

/// Who the messages are from, and the Claude Code that sends them.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) claude: Option<PathBuf>,
    pub(crate) from: String,
}

impl Mail {
    pub(crate) fn start(ctx: Context, origin: Origin, to: Sender<Input>) -> Result<Self, Failure> {
        let (jobs, taken) = mpsc::channel();
        let waker = Arc::new(Mutex::new(None));
        let thread = {
            let waker = Arc::clone(&waker);
            thread::Builder::new()
                .name("top-mail".to_owned())
                .spawn(move || serve(&ctx, &origin, &taken, &to, &waker))
                .map_err(|err| {
                    Failure::error("top_failed", format!("cannot start a thread: {err}"))
                })?
        };
        Ok(Self {
            jobs,
            waker,
            thread,
        })
    }

    /// Queues `message` for `session_id`; its [`Heard::Sent`] comes when it is done.
    pub(crate) fn send(&self, session_id: String, message: String) {
        let _ = self.jobs.send(Job::Send {
            session_id,
            message,
        });
        self.wake();
    }

    /// Closes the sender cleanly (its record and socket removed) once the send under
    /// way is done. Blocking.
    pub(crate) fn close(self) {
        let _ = self.jobs.send(Job::Stop);
        self.wake();
        let _ = self.thread.join();
    }

    fn wake(&self) {
        if let Some(waker) = lock(&self.waker).as_ref() {
            waker.wake();
        }
    }
}

fn serve(
    ctx: &Context,
    origin: &Origin,
    jobs: &Receiver<Job>,
    to: &Sender<Input>,
    waker: &Mutex<Option<Waker>>,
) {
    let heard = |heard: Heard| to.send(Input::Mail(heard)).is_ok();
    let mut mailbox: Option<Mailbox> = None;
    loop {
        let job = match mailbox.as_mut() {
            // No sender yet (or the last one ended): wait for a message to start one.
            None => jobs.recv().unwrap_or(Job::Stop),
            Some(open) => match jobs.try_recv() {
                Ok(job) => job,
                Err(TryRecvError::Disconnected) => Job::Stop,
                Err(TryRecvError::Empty) => {
                    let Some(event) = open.next_event(Duration::from_secs(3600)) else {
                        continue;
                    };
                    if !heard(hear(event, &mut mailbox, waker)) {
                        break;
                    }
                    continue;
                }
            },
        };
        let Job::Send {
            session_id,
            message,
        } = job
        else {
            break;
        };
        if mailbox.is_none() {
            match open(ctx, origin) {
                Ok(opened) => {
                    *lock(waker) = Some(opened.waker());
                    mailbox = Some(opened);
                }
                Err(failure) => {
                    heard(Heard::Sent {
                        session_id,
                        result: Err(failure),
                    });
                    continue;
                }
            }
        }
        let Some(open) = mailbox.as_mut() else {
            continue;
        };
        let result = open
            .send(&session_id, &message, Idle::Ignore)
            .map(Box::new)
            .map_err(Failure::from);
        heard(Heard::Sent { session_id, result });
        // What the mailbox heard already, before the next message: a sender that ended
        // during this send is replaced, not sent to.
        while let Some(event) = mailbox.as_mut().and_then(|m| m.next_event(Duration::ZERO)) {
            heard(hear(event, &mut mailbox, waker));
        }
    }
    *lock(waker) = None;
    if let Some(mailbox) = mailbox {
        let _ = mailbox.close();
    }
}

/// `event` for the screen; at `Closed` the mailbox is gone, and the next message starts
/// another.
fn hear(event: Event, mailbox: &mut Option<Mailbox>, waker: &Mutex<Option<Waker>>) -> Heard {
    if matches!(event, Event::Closed { .. }) {
        *lock(waker) = None;
        *mailbox = None;
    }
    Heard::Event(event)
}

fn open(ctx: &Context, origin: &Origin) -> Result<Mailbox, Failure> {
    let relay = send::claude(origin.claude.clone(), origin.from.clone(), DEFAULT_TIMEOUT)?;
    send::mailbox(ctx, &relay).map_err(Failure::from)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
