//! When the receipt of one sent message is decided: one state machine per `msg_id`, fed
//! what its receiver's transcript shows and the notices its sender gets, used by the
//! one-shot send and the [`Mailbox`](crate::Mailbox) alike.
//!
//! The rule, once: the first of these decides, and nothing changes the decision after.
//! - The transcript shows the message read: `read`. It shows it held (the receiver
//!   writes a held message down as it holds it, with no `msg_id`): `held`.
//! - A notice (held, refused, released, denied, expired): that outcome.
//! - The transcript shows it queued: `read` is waited for [`Waits::read`] longer, then
//!   `queued`.
//! - Nothing within [`Waits::window`] of the send (or of a later send to the same
//!   receiver, [`Decider::defer`]): `accepted`, on silence.
//!
//! Deadlines pass when the caller says the time has come ([`Decider::waited`]): a word
//! heard before that, even one handed in late, still counts.

use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Outcome, Receipt};
use claude_peer_transcript::Fact;

/// How long a receipt is waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Waits {
    /// For any word (a transcript line, a notice) before the receipt rests on silence.
    pub(crate) window: Duration,
    /// For `read`, once the message is seen queued.
    pub(crate) read: Duration,
}

/// What the receiver's transcript shows of one message (a [`Fact`] known to be about it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Seen {
    Queued,
    Read,
    Held,
}

impl From<&Fact> for Seen {
    fn from(fact: &Fact) -> Self {
        match fact {
            Fact::Queued { .. } => Self::Queued,
            Fact::Read { .. } => Self::Read,
            Fact::Held { .. } => Self::Held,
        }
    }
}

/// One word about one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Word {
    /// Its receiver's transcript.
    Transcript(Seen),
    /// A notice its sender got.
    Notice(Outcome),
}

/// The receipt of one message: what is known, what is decided, and until when it waits.
#[derive(Debug, Clone)]
pub(crate) struct Decider {
    waits: Waits,
    /// When silence decides `accepted`.
    silent_after: Instant,
    /// When the transcript showed it queued.
    queued_at: Option<Instant>,
    decided: Option<Receipt>,
    /// Every outcome told so far: each is news once.
    told: Vec<Outcome>,
    /// Every notice heard.
    noticed: Vec<Outcome>,
}

impl Decider {
    /// A message sent (its tool result came) at `sent_at`.
    pub(crate) fn new(sent_at: Instant, waits: Waits) -> Self {
        Self {
            waits,
            silent_after: sent_at + waits.window,
            queued_at: None,
            decided: None,
            told: Vec::new(),
            noticed: Vec::new(),
        }
    }

    /// The receipt, once decided.
    pub(crate) const fn decision(&self) -> Option<Receipt> {
        self.decided
    }

    /// When time alone decides, unless a word does first; `None` once decided.
    pub(crate) fn decide_by(&self) -> Option<Instant> {
        if self.decided.is_some() {
            return None;
        }
        Some(
            self.queued_at
                .map_or(self.silent_after, |at| at + self.waits.read),
        )
    }

    /// A later send to the same receiver at `at`: its notices are debounced with this
    /// message's, so silence is waited for from then on.
    pub(crate) fn defer(&mut self, at: Instant) {
        self.silent_after = self.silent_after.max(at + self.waits.window);
    }

    /// Takes in `word`, heard at `now`: the receipt it tells, when that is news.
    pub(crate) fn hear(&mut self, word: Word, now: Instant) -> Option<Receipt> {
        let receipt = match word {
            Word::Transcript(Seen::Queued) => {
                if self.has_told(Outcome::Read) {
                    // Read already: the queue line is old news.
                    return None;
                }
                self.queued_at.get_or_insert(now);
                if self.waits.read.is_zero() {
                    // No wait for `read`: queued decides at once.
                    self.decided.get_or_insert(transcript(Outcome::Queued));
                }
                transcript(Outcome::Queued)
            }
            Word::Transcript(Seen::Read) => transcript(Outcome::Read),
            Word::Transcript(Seen::Held) => transcript(Outcome::Held),
            Word::Notice(outcome) => {
                self.noticed.push(outcome);
                Receipt {
                    outcome,
                    basis: Basis::Notice,
                }
            }
        };
        if receipt.outcome != Outcome::Queued {
            self.decided.get_or_insert(receipt);
        }
        self.tell(receipt)
    }

    /// Decides on time, once `now` is past [`Decider::decide_by`]: `queued` after the wait
    /// for `read`, else `accepted` on silence. The receipt is news only when it is
    /// `accepted` (`queued` was told when the transcript showed it).
    pub(crate) fn waited(&mut self, now: Instant) -> Option<Receipt> {
        if self.decide_by().is_none_or(|by| now < by) {
            return None;
        }
        self.settle();
        self.decided.filter(|r| r.basis == Basis::Silence)
    }

    /// Decides now, with what is known (the sender ended, or the send's time is up):
    /// `queued` when the transcript showed it queued, else `accepted` on silence.
    pub(crate) fn settle(&mut self) -> Receipt {
        let receipt = match self.queued_at {
            Some(_) => transcript(Outcome::Queued),
            None => Receipt {
                outcome: Outcome::Accepted,
                basis: Basis::Silence,
            },
        };
        let decided = *self.decided.get_or_insert(receipt);
        if decided.basis == Basis::Silence {
            self.tell(decided);
        }
        decided
    }

    /// Whether a notice of `outcome` can still be about this message: a held or refused
    /// notice before anything but its transcript showing it held told of it; released,
    /// denied or expired while it is held.
    pub(crate) fn awaits(&self, outcome: Outcome) -> bool {
        if self.noticed.contains(&outcome) {
            return false;
        }
        match outcome {
            Outcome::Released | Outcome::Denied | Outcome::Expired => self.is_held(),
            // Queued: taken in, so neither held nor refused.
            _ => {
                self.queued_at.is_none() && self.decided.is_none_or(|r| r.outcome == Outcome::Held)
            }
        }
    }

    /// Whether its fate is still to learn: nothing heard of it within its window, or held
    /// with no word since (read is a word).
    pub(crate) fn is_open(&self) -> bool {
        !self.has_told(Outcome::Read)
            && ((self.decided.is_none() && self.queued_at.is_none()) || self.is_held())
    }

    /// Whether nothing more will be learned of it: refused, denied or expired; or read,
    /// unless it is held (a receiver writes a released message read before it tells its
    /// sender of the release).
    pub(crate) fn is_final(&self) -> bool {
        [Outcome::Refused, Outcome::Denied, Outcome::Expired]
            .into_iter()
            .any(|outcome| self.has_told(outcome))
            || (self.has_told(Outcome::Read) && !self.is_held())
    }

    fn is_held(&self) -> bool {
        self.has_told(Outcome::Held)
            && ![Outcome::Released, Outcome::Denied, Outcome::Expired]
                .into_iter()
                .any(|outcome| self.has_told(outcome))
    }

    pub(crate) fn has_told(&self, outcome: Outcome) -> bool {
        self.told.contains(&outcome)
    }

    fn tell(&mut self, receipt: Receipt) -> Option<Receipt> {
        if self.has_told(receipt.outcome) {
            return None;
        }
        self.told.push(receipt.outcome);
        Some(receipt)
    }
}

const fn transcript(outcome: Outcome) -> Receipt {
    Receipt {
        outcome,
        basis: Basis::Transcript,
    }
}

#[cfg(test)]
mod tests;
