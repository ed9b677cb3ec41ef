//! The mailbox's books of receipts: a [`Decider`] for each message sent and not yet
//! settled for good, by `msg_id`, and which of them a receiver's word is about.

use std::collections::HashMap;
use std::time::Instant;

use claude_peer_deliver::{Basis, Outcome};
use claude_peer_transcript::Fact;

use super::MailboxReceipt;
use crate::decider::{Decider, Seen, Waits, Word};

/// A sent message whose receipt may still change.
#[derive(Debug)]
struct Entry {
    /// The order it was sent in: equal texts are matched oldest first.
    seq: u64,
    session_id: String,
    recipient: String,
    text: String,
    /// What its receiver's transcript has shown of it (each line is about one message).
    shown: Vec<Seen>,
    decider: Decider,
}

/// The messages whose receipts may still change.
#[derive(Debug)]
pub(super) struct Tracker {
    waits: Waits,
    sent: HashMap<String, Entry>,
    next_seq: u64,
    /// The count of the informational line that precedes each notice, by receiver.
    counts: HashMap<(String, Outcome), usize>,
    /// The message a send waits for the decision of: on the books until it is taken.
    awaited: Option<String>,
}

impl Tracker {
    pub(super) fn new(waits: Waits) -> Self {
        Self {
            waits,
            sent: HashMap::new(),
            next_seq: 0,
            counts: HashMap::new(),
            awaited: None,
        }
    }

    /// Keeps `msg_id` on the books until its decision is taken.
    pub(super) fn await_decision(&mut self, msg_id: &str) {
        self.awaited = Some(msg_id.to_owned());
    }

    /// The decision of the awaited message, when there is one; it is awaited no more.
    pub(super) fn take_decision(&mut self) -> Option<claude_peer_deliver::Receipt> {
        let msg_id = self.awaited.take()?;
        let decision = self.sent.get(&msg_id)?.decider.decision();
        self.forget_settled();
        decision
    }

    /// `msg_id` was sent to `recipient`, the session `session_id`, with `text`. Notices to
    /// one receiver are debounced: its earlier messages wait for silence from now on.
    pub(super) fn sent(&mut self, msg_id: &str, recipient: &str, session_id: &str, text: &str) {
        let now = Instant::now();
        for entry in self.sent.values_mut() {
            if entry.recipient == recipient {
                entry.decider.defer(now);
            }
        }
        self.sent.insert(
            msg_id.to_owned(),
            Entry {
                seq: self.next_seq,
                session_id: session_id.to_owned(),
                recipient: recipient.to_owned(),
                text: text.to_owned(),
                shown: Vec::new(),
                decider: Decider::new(now, self.waits),
            },
        );
        self.next_seq += 1;
    }

    pub(super) fn counted(&mut self, recipient: &str, outcome: Outcome, count: usize) {
        self.counts.insert((recipient.to_owned(), outcome), count);
    }

    /// A notice naming `named` (maybe not all it covers): tells what it names, and
    /// attributes the rest only when exactly as many candidates wait as it covers. What
    /// was told already (a held message its transcript showed held) is not told again.
    pub(super) fn notice(
        &mut self,
        outcome: Outcome,
        recipient: &str,
        named: &[String],
    ) -> Option<MailboxReceipt> {
        let count = self
            .counts
            .remove(&(recipient.to_owned(), outcome))
            .unwrap_or(0)
            .max(named.len())
            .max(1);
        let unnamed = self.oldest_first(|id, entry| {
            entry.recipient == recipient && entry.decider.awaits(outcome) && !named.contains(id)
        });
        let rest = count - named.len();
        let attributed = unnamed.len() == rest;
        // What an unattributed rest can be: only messages not told it yet.
        let untold = if attributed {
            0
        } else {
            let untold = unnamed.iter().filter(|id| {
                self.sent
                    .get(*id)
                    .is_some_and(|entry| !entry.decider.has_told(outcome))
            });
            rest.min(untold.count())
        };
        let mut msg_ids = named.to_vec();
        if attributed {
            msg_ids.extend(unnamed);
        }
        let now = Instant::now();
        msg_ids.retain(|id| match self.sent.get_mut(id) {
            Some(entry) => entry.decider.hear(Word::Notice(outcome), now).is_some(),
            // Off the books (read, or decided on silence): told as named.
            None => true,
        });
        self.forget_settled();
        let count = msg_ids.len() + untold;
        (count > 0).then(|| MailboxReceipt {
            outcome,
            basis: Basis::Notice,
            msg_ids,
            count,
            recipient: recipient.to_owned(),
        })
    }

    /// What a line of `session_id`'s transcript tells, for messages sent from `from`
    /// (this mailbox's own address): read (by `msg_id`), queued or held (by sender and
    /// text, the oldest such message first).
    pub(super) fn transcript(
        &mut self,
        session_id: &str,
        fact: &Fact,
        from: &str,
    ) -> Option<MailboxReceipt> {
        let seen = Seen::from(fact);
        let unshown = |entry: &Entry| {
            entry.session_id == session_id
                && !entry.shown.contains(&seen)
                && !entry.shown.contains(&Seen::Read)
        };
        let msg_id = match fact {
            Fact::Read { msg_id, .. } => msg_id.clone(),
            Fact::Queued { from: by, text, .. } if by == from => self
                .oldest_first(|_, entry| unshown(entry) && entry.text == *text)
                .into_iter()
                .next()?,
            Fact::Held { from: by, preview } if by == from => {
                let preview = preview.trim_end_matches('…');
                self.oldest_first(|_, entry| unshown(entry) && entry.text.starts_with(preview))
                    .into_iter()
                    .next()?
            }
            _ => return None,
        };
        let entry = self.sent.get_mut(&msg_id)?;
        entry.shown.push(seen);
        let recipient = entry.recipient.clone();
        let told = entry.decider.hear(Word::Transcript(seen), Instant::now());
        self.forget_settled();
        told.map(|told| MailboxReceipt {
            outcome: told.outcome,
            basis: told.basis,
            msg_ids: vec![msg_id],
            count: 1,
            recipient,
        })
    }

    /// Decides what the time decides at `now`: the messages accepted on silence, one
    /// receipt a receiver, off the books from then on.
    pub(super) fn due(&mut self, now: Instant) -> Vec<MailboxReceipt> {
        let accepted =
            self.oldest_first(|_, entry| entry.decider.decide_by().is_some_and(|by| by <= now));
        let mut receipts: Vec<MailboxReceipt> = Vec::new();
        for msg_id in accepted {
            let Some(entry) = self.sent.get_mut(&msg_id) else {
                continue;
            };
            if entry.decider.waited(now).is_none() {
                // `queued`, told already; `read` may still come.
                continue;
            }
            let recipient = entry.recipient.clone();
            if self.awaited.as_ref() != Some(&msg_id) {
                self.sent.remove(&msg_id);
            }
            match receipts.iter_mut().find(|r| r.recipient == recipient) {
                Some(receipt) => {
                    receipt.msg_ids.push(msg_id);
                    receipt.count += 1;
                }
                None => receipts.push(MailboxReceipt {
                    outcome: Outcome::Accepted,
                    basis: Basis::Silence,
                    msg_ids: vec![msg_id],
                    count: 1,
                    recipient,
                }),
            }
        }
        receipts
    }

    /// When the time next decides a receipt.
    pub(super) fn next_due(&self) -> Option<Instant> {
        self.sent
            .values()
            .filter_map(|entry| entry.decider.decide_by())
            .min()
    }

    /// Whether the awaited message is decided, or off the books.
    pub(super) fn awaited_is_decided(&self) -> bool {
        self.awaited
            .as_ref()
            .and_then(|id| self.sent.get(id))
            .is_none_or(|entry| entry.decider.decision().is_some())
    }

    /// The messages whose fate is still to learn: held, or within their window.
    pub(super) fn unknown(&self) -> Vec<String> {
        self.oldest_first(|_, entry| entry.decider.is_open())
    }

    /// The `msg_id`s of the entries `keep` keeps, in the order they were sent.
    fn oldest_first(&self, keep: impl Fn(&String, &Entry) -> bool) -> Vec<String> {
        let mut kept: Vec<(&String, &Entry)> = self
            .sent
            .iter()
            .filter(|(id, entry)| keep(id, entry))
            .collect();
        kept.sort_by_key(|(_, entry)| entry.seq);
        kept.into_iter().map(|(id, _)| id.clone()).collect()
    }

    /// Takes off the books what nothing more will be learned of (and, once its decision
    /// is taken, what was decided on silence).
    fn forget_settled(&mut self) {
        let awaited = self.awaited.as_ref();
        self.sent.retain(|id, entry| {
            let settled = entry.decider.is_final()
                || entry
                    .decider
                    .decision()
                    .is_some_and(|r| r.basis == Basis::Silence);
            !settled || awaited == Some(id)
        });
    }
}

#[cfg(test)]
mod tests;
