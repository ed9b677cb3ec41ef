//! Messages typed in `top`: one mailbox service, started at the first message, sends
//! them in order on a thread of its own (the screen never waits for it); what each send
//! did, and everything the sender hears later, reaches the dashboard's loop in the order
//! it happened.

use std::cell::OnceCell;
use std::path::PathBuf;
use std::sync::Arc;
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
}

/// Who the messages are from, and the Claude Code that sends them.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) claude: Option<PathBuf>,
    pub(crate) from: String,
}

impl Mail {
    pub(crate) const fn start(ctx: Context, origin: Origin, to: Sender<LoopInput>) -> Self {
        Self {
            ctx,
            origin,
            to,
            mailbox: OnceCell::new(),
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
        let to = self.to.clone();
        let job = mailbox
            .1
            .job(session_id.clone(), message, None, move |reply| {
                let result = match reply {
                    Reply::Sent(sent) => sent.map_err(Failure::from),
                    Reply::Cancelled => Err(Failure::error(
                        "cancelled",
                        "top is closing; nothing was sent",
                    )),
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

    /// Sends every message already typed, then closes the sender cleanly (its record and
    /// socket removed): quitting never drops what the user sent. Blocking (a second
    /// signal ends it at once).
    pub(crate) fn close(self) {
        if let Some((mailbox, _)) = self.mailbox.get() {
            mailbox.close(Waiting::Send);
        }
    }
}
