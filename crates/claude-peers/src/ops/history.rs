//! The history a long-lived sender's front end keeps (`mailbox`, MCP, `top`): each of
//! its sends and everything its sender hears, in the user's store, as `send` and the
//! post office keep theirs.

use std::sync::{Arc, Mutex, PoisonError};

use claude_peer_deliver::Delivered;
use claude_peer_post::{Message, Store, default_store_path};
use claude_peer_sender::{Job, MailboxEvent, Reply};

use crate::ops::Error;
use crate::ops::post::{Letter, sent_record};

/// The store, open for one sender name. What cannot be recorded is left out: the send
/// or event itself stands (the store's own failure is told when it is opened).
#[derive(Debug)]
pub(crate) struct Journal {
    from: String,
    store: Mutex<Store>,
}

impl Journal {
    /// The history of the sender named `from`, in the user's store.
    pub(crate) fn open(from: &str) -> Result<Arc<Self>, Error> {
        let store = Store::open(&default_store_path()?)?;
        Ok(Arc::new(Self {
            from: from.to_owned(),
            store: Mutex::new(store),
        }))
    }

    /// `message` for `session_id` as a job whose outcome is recorded before `reply`
    /// hears it.
    pub(crate) fn job(
        self: &Arc<Self>,
        session_id: String,
        message: String,
        reply: impl FnOnce(Reply) + Send + 'static,
    ) -> Job {
        let journal = Arc::clone(self);
        let text = message.clone();
        let target = session_id.clone();
        Job::new(session_id, message, move |sent| {
            if let Reply::Sent(result) = &sent {
                journal.sent(&target, &text, result);
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
            let logged = {
                let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
                claude_peer_post::record_heard(&mut store, &self.from, &event)
                    .ok()
                    .flatten()
            };
            each(event, logged);
        }
    }

    fn sent(
        &self,
        target: &str,
        text: &str,
        result: &Result<Box<Delivered>, claude_peer_sender::Error>,
    ) {
        let letter = Letter {
            from: &self.from,
            text,
            in_reply_to: None,
        };
        let result = result
            .as_deref()
            .map_err(|err| err.refusal().cloned());
        if let Some((new, steps, now)) = sent_record(&letter, target, result) {
            let mut store = self.store.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = store.record(&new, &steps, now);
        }
    }
}
