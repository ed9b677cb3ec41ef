//! Which sent messages still wait for a word from their receiver, and what a notice
//! settles: the mailbox's bookkeeping of receipts.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use claude_peer_deliver::Outcome;

use super::Receipt;

/// Which messages still wait for a word from their receiver.
#[derive(Debug)]
pub(super) struct Tracker {
    window: Duration,
    /// Sent, no notice yet, by receiver: accepted once the window after the last send
    /// to that receiver passes quietly (notices to one receiver are debounced).
    unsettled: HashMap<String, (Instant, Vec<String>)>,
    /// Held, waiting for released, denied or expired.
    held: Vec<(String, String)>,
    /// The count of the informational line that precedes each notice, by receiver.
    counts: HashMap<(String, Outcome), usize>,
}

impl Tracker {
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            unsettled: HashMap::new(),
            held: Vec::new(),
            counts: HashMap::new(),
        }
    }

    pub(super) fn sent(&mut self, msg_id: &str, recipient: &str) {
        let entry = self
            .unsettled
            .entry(recipient.to_owned())
            .or_insert_with(|| (Instant::now(), Vec::new()));
        entry.0 = Instant::now() + self.window;
        entry.1.push(msg_id.to_owned());
    }

    pub(super) fn counted(&mut self, recipient: &str, outcome: Outcome, count: usize) {
        self.counts.insert((recipient.to_owned(), outcome), count);
    }

    /// A notice naming `named` (maybe not all it covers): settles what it names, and
    /// attributes the rest only when exactly as many candidates wait as it covers.
    pub(super) fn notice(
        &mut self,
        outcome: Outcome,
        recipient: &str,
        named: &[String],
    ) -> Receipt {
        let count = self
            .counts
            .remove(&(recipient.to_owned(), outcome))
            .unwrap_or(0)
            .max(named.len())
            .max(1);
        let waiting: Vec<String> = match outcome {
            Outcome::Held | Outcome::Refused | Outcome::Accepted => self
                .unsettled
                .get(recipient)
                .map(|(_, ids)| ids.clone())
                .unwrap_or_default(),
            Outcome::Released | Outcome::Denied | Outcome::Expired => self
                .held
                .iter()
                .filter(|(_, to)| to == recipient)
                .map(|(id, _)| id.clone())
                .collect(),
        };
        let unnamed: Vec<String> = waiting
            .into_iter()
            .filter(|id| !named.contains(id))
            .collect();
        let mut msg_ids = named.to_vec();
        if unnamed.len() == count - named.len() {
            msg_ids.extend(unnamed);
        }
        if let Some((_, ids)) = self.unsettled.get_mut(recipient) {
            ids.retain(|id| !msg_ids.contains(id));
        }
        self.held.retain(|(id, _)| !msg_ids.contains(id));
        if outcome == Outcome::Held {
            self.held
                .extend(msg_ids.iter().map(|id| (id.clone(), recipient.to_owned())));
        }
        Receipt {
            outcome,
            msg_ids,
            count,
            recipient: recipient.to_owned(),
        }
    }

    /// Receivers whose window passed without a notice: their messages were accepted.
    pub(super) fn due(&mut self, now: Instant) -> Vec<Receipt> {
        let due: Vec<String> = self
            .unsettled
            .iter()
            .filter(|(_, (until, ids))| *until <= now && !ids.is_empty())
            .map(|(recipient, _)| recipient.clone())
            .collect();
        due.into_iter()
            .filter_map(|recipient| {
                let (_, msg_ids) = self.unsettled.remove(&recipient)?;
                Some(Receipt {
                    outcome: Outcome::Accepted,
                    count: msg_ids.len(),
                    msg_ids,
                    recipient,
                })
            })
            .collect()
    }

    pub(super) fn next_due(&self) -> Option<Instant> {
        self.unsettled
            .values()
            .filter(|(_, ids)| !ids.is_empty())
            .map(|(until, _)| *until)
            .min()
    }

    pub(super) fn unknown(&self) -> Vec<String> {
        let mut unknown: Vec<String> = self.held.iter().map(|(id, _)| id.clone()).collect();
        unknown.extend(
            self.unsettled
                .values()
                .flat_map(|(_, ids)| ids.iter().cloned()),
        );
        unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|&n| n.to_owned()).collect()
    }

    #[test]
    fn quiet_windows_accept_and_notices_settle_what_they_name() {
        let mut tracker = Tracker::new(Duration::ZERO);
        tracker.sent("a", "uds:/r.sock");
        tracker.sent("b", "uds:/r.sock");
        tracker.sent("c", "uds:/s.sock");
        let held = tracker.notice(Outcome::Held, "uds:/r.sock", &ids(&["a"]));
        assert_eq!(held.msg_ids, ids(&["a"]));
        let accepted = tracker.due(Instant::now() + Duration::from_millis(1));
        assert_eq!(accepted.len(), 2);
        assert!(
            accepted
                .iter()
                .any(|r| r.recipient == "uds:/r.sock" && r.msg_ids == ids(&["b"]))
        );
        assert_eq!(
            tracker.unknown(),
            ids(&["a"]),
            "a held message has no final outcome yet"
        );
        let released = tracker.notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]));
        assert_eq!((released.msg_ids, released.count), (ids(&["a"]), 1));
        assert!(tracker.unknown().is_empty());
    }

    #[test]
    fn a_coalesced_notice_attributes_the_unnamed_only_when_the_count_leaves_no_doubt() {
        let mut tracker = Tracker::new(Duration::from_secs(60));
        for id in ["a", "b", "c", "d", "e", "f", "g"] {
            tracker.sent(id, "uds:/r.sock");
        }
        tracker.counted("uds:/r.sock", Outcome::Held, 7);
        let all = tracker.notice(
            Outcome::Held,
            "uds:/r.sock",
            &ids(&["a", "b", "c", "d", "e"]),
        );
        assert_eq!(
            (all.count, all.msg_ids.len()),
            (7, 7),
            "the two unnamed are the two waiting"
        );

        tracker.counted("uds:/r.sock", Outcome::Released, 3);
        let some = tracker.notice(Outcome::Released, "uds:/r.sock", &ids(&["a"]));
        assert_eq!(
            (some.count, some.msg_ids),
            (3, ids(&["a"])),
            "six wait, three released: which is unknown"
        );
        assert_eq!(tracker.unknown().len(), 6);
    }
}
