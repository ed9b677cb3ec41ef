//! Messages typed in `top`: one mailbox service, started at the first message, sends
//! them in order on a thread of its own (the screen never waits for it); what each send
//! did, and everything the sender hears later, reaches the dashboard's loop in the order
//! it happened.

use std::cell::OnceCell;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;

use claude_peer_deliver::{DEFAULT_TIMEOUT, Delivered};
use claude_peer_sender::{MailboxEvent, MailboxHandle, Reply, Waiting};

use super::LoopInput;
use crate::error::Failure;
use crate::ops::history::Journal;
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
    Event(MailboxEvent),
}

/// The dashboard's mailbox, once a message started it.
#[derive(Debug)]
pub(crate) struct Mail {
    ctx: Context,
    origin: Origin,
    to: Sender<LoopInput>,
    /// The mailbox service and the history its sends and events are recorded in.
    mailbox: OnceCell<(MailboxHandle, Arc<Journal>)>,
    /// How many messages were answered cancelled: typed, and still unsent at the quit.
    cancelled: Arc<AtomicUsize>,
}

/// Who the messages are from, and the Claude Code that sends them.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) claude: Option<PathBuf>,
    pub(crate) from: String,
}

impl Mail {
    pub(crate) fn start(ctx: Context, origin: Origin, to: Sender<LoopInput>) -> Self {
        Self {
            ctx,
            origin,
            to,
            mailbox: OnceCell::new(),
            cancelled: Arc::default(),
        }
    }

    /// Queues `message` for `session_id`; its [`Heard::Sent`] comes when it is done. The
    /// first message starts the mailbox (its sender starts on the mailbox's thread, and
    /// again at the next message after one ended).
    pub(crate) fn send(&self, session_id: String, message: String) {
        let mailbox = match self.mailbox() {
            Ok(mailbox) => mailbox,
            Err(failure) => {
                let _ = self.to.send(LoopInput::Mail(Heard::Sent {
                    session_id,
                    result: Err(failure),
                }));
                return;
            }
        };
        let (to, cancelled) = (self.to.clone(), Arc::clone(&self.cancelled));
        let job = mailbox
            .1
            .job(session_id.clone(), message, None, move |reply| {
                let result = match reply {
                    Reply::Sent(sent) => sent.map_err(Failure::from),
                    Reply::Cancelled => {
                        cancelled.fetch_add(1, Ordering::Relaxed);
                        Err(Failure::error(
                            "cancelled",
                            "top is closing; nothing was sent",
                        ))
                    }
                };
                let _ = to.send(LoopInput::Mail(Heard::Sent { session_id, result }));
            });
        mailbox.0.send(job);
    }

    fn mailbox(&self) -> Result<&(MailboxHandle, Arc<Journal>), Failure> {
        if let Some(mailbox) = self.mailbox.get() {
            return Ok(mailbox);
        }
        // Without a store the dashboard still sends; its details show no conversation.
        let (journal, _) = Journal::open(&self.origin.from);
        let relay = send::claude(
            self.origin.claude.clone(),
            self.origin.from.clone(),
            DEFAULT_TIMEOUT,
        )?;
        let to = self.to.clone();
        let heard = Arc::clone(&journal).events(move |event, _| {
            let _ = to.send(LoopInput::Mail(Heard::Event(event)));
        });
        let mailbox = MailboxHandle::spawn(None, Some(send::mailboxes(&self.ctx, &relay)), heard)
            .map_err(|err| {
            Failure::error("top_failed", format!("cannot start a thread: {err}"))
        })?;
        Ok(self.mailbox.get_or_init(|| (mailbox, journal)))
    }

    /// Cancels every message typed and not yet handed to Claude Code (one being sent is
    /// sent whole), then closes the sender cleanly (its record and socket removed): the
    /// user who quits asked to stop. How many were cancelled. Blocking while a send
    /// finishes (a second signal ends it at once).
    pub(crate) fn close(self) -> usize {
        if let Some((mailbox, _)) = self.mailbox.get() {
            mailbox.close(Waiting::Cancel);
        }
        self.cancelled.load(Ordering::Relaxed)
    }
}
