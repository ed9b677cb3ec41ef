//! The history a long-lived sender's front end keeps (`mailbox`, MCP, `top`): each of
//! its sends and everything its sender hears, in the user's store, as `send` and the
//! post office keep theirs.

use std::sync::{Arc, Mutex, PoisonError};

use claude_peer_deliver::Delivered;
use claude_peer_post::{Direction, Message, Store, default_store_path};
use claude_peer_resolve::Scope;
use claude_peer_sender::{Job, MailboxEvent, Reply};

use crate::ops::post::{Letter, sent_record};
use crate::ops::{Context, Error};
use crate::table::field;

/// Where a reply to a message in goes: its session while that lives (sent now), else
/// whichever session holds its name (queued in the post office).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplyTo {
    /// The session id, or the name.
    pub(crate) target: String,
    /// Whether it is queued (the session is gone).
    pub(crate) queue: bool,
    /// The post id of the message answered.
    pub(crate) answers: String,
}

/// Where a reply to the message `id` of the user's history goes, or why it can go
/// nowhere (no such message, one of ours, from a session gone without a name).
pub(crate) fn reply_to(ctx: &Context, id: &str) -> Result<ReplyTo, Error> {
    let store = Store::open(&default_store_path()?)?;
    let message = store
        .get(id)?
        .ok_or_else(|| claude_peer_post::Error::NoSuchMessage(id.to_owned()))?;
    if message.direction != Direction::In {
        return Err(Error::NotAMessageIn {
            id: message.id,
            to: field(message.to.value()).into_owned(),
        });
    }
    let live = message.session_id.as_ref().filter(|session_id| {
        ctx.courier()
            .discovery()
            .roster(&ctx.home, Scope::Live)
            .is_ok_and(|roster| roster.resolve(session_id).is_ok())
    });
    let (target, queue) = match (live, &message.session_name) {
        (Some(session_id), _) => (session_id.clone(), false),
        (None, Some(name)) => (name.clone(), true),
        (None, None) => {
            return Err(Error::NoReplyAddress {
                from: field(message.session_id.as_deref().unwrap_or(&message.from)).into_owned(),
                id: message.id,
            });
        }
    };
    Ok(ReplyTo {
        target,
        queue,
        answers: message.id,
    })
}

/// The store, open for one sender name. What cannot be recorded is left out: the send
/// or event itself stands (a store that cannot be opened is told when it is opened).
#[derive(Debug)]
pub(crate) struct Journal {
    from: String,
    store: Option<Mutex<Store>>,
}

impl Journal {
    /// The history of the sender named `from`, in the user's store; one that records
    /// nothing when the store cannot be opened, and why.
    pub(crate) fn open(from: &str) -> (Arc<Self>, Option<Error>) {
        let store = default_store_path()
            .and_then(|path| Store::open(&path))
            .map_err(Error::from);
        let (store, err) = match store {
            Ok(store) => (Some(Mutex::new(store)), None),
            Err(err) => (None, Some(err)),
        };
        let journal = Self {
            from: from.to_owned(),
            store,
        };
        (Arc::new(journal), err)
    }

    /// Does `record` with the store, when there is one.
    fn with<T>(&self, record: impl FnOnce(&mut Store) -> Option<T>) -> Option<T> {
        let mut store = self
            .store
            .as_ref()?
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        record(&mut store)
    }

    /// `message` for `session_id` (answering `in_reply_to`) as a job whose outcome is
    /// recorded before `reply` hears it.
    pub(crate) fn job(
        self: &Arc<Self>,
        session_id: String,
        message: String,
        in_reply_to: Option<String>,
        reply: impl FnOnce(Reply) + Send + 'static,
    ) -> Job {
        let journal = Arc::clone(self);
        let text = message.clone();
        let target = session_id.clone();
        Job::new(session_id, message, move |sent| {
            if let Reply::Sent(result) = &sent {
                journal.sent(&target, &text, in_reply_to.as_deref(), result);
            }
            reply(sent);
        })
    }

    /// An events callback that records each event, then hands it to `each` with the
    /// message in as recorded, for a message to the sender.
    pub(crate) fn events(
        self: Arc<Self>,
        mut each: impl FnMut(MailboxEvent, Option<Message>) + Send + 'static,
    ) -> impl FnMut(MailboxEvent) + Send + 'static {
        move |event| {
            let logged = self.with(|store| {
                claude_peer_post::record_heard(store, &self.from, &event)
                    .ok()
                    .flatten()
            });
            each(event, logged);
        }
    }

    fn sent(
        &self,
        target: &str,
        text: &str,
        in_reply_to: Option<&str>,
        result: &Result<Box<Delivered>, claude_peer_sender::Error>,
    ) {
        let letter = Letter {
            from: &self.from,
            text,
            in_reply_to,
        };
        let result = result.as_deref().map_err(|err| err.refusal().cloned());
        if let Some((new, steps, now)) = sent_record(&letter, target, result) {
            self.with(|store| store.record(&new, &steps, now).ok());
        }
    }
}
