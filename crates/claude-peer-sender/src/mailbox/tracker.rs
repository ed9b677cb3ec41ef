//! Which sent messages still wait for a word from their receiver, and what a notice
//! settles: the mailbox's bookkeeping of receipts.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Outcome};
use claude_peer_transcript::Fact;

use super::Receipt;

/// A sent message its receiver's transcript has not shown read yet.
#[derive(Debug)]
struct Unread {
    msg_id: String,
    session_id: String,
    recipient: String,
    /// Its text, until its transcript shows it queued (from then on only its `msg_id`
    /// is looked for).
    text: Option<String>,
}

/// Which messages still wait for a word from their receiver.
#[derive(Debug)]
pub(super) struct Tracker {
    window: Duration,
    /// Sent, no notice yet, by receiver: accepted once the window after the last send
    /// to that receiver passes quietly (notices to one receiver are debounced).
    unsettled: HashMap<String, (Instant, Vec<String>)>,
    /// Held by its receiver's word (a notice), waiting for released, denied or expired.
    held: Vec<(String, String)>,
    /// Held as its receiver's transcript shows, its notice not come yet: no longer waits
    /// out the window, and the notice attributes it.
    seen_held: Vec<(String, String)>,
    /// Seen read in their receiver's transcript: decided, whatever notices follow.
    read: HashSet<String>,
    /// The count of the informational line that precedes each notice, by receiver.
    counts: HashMap<(String, Outcome), usize>,
    /// Sent and not seen read, oldest first: what transcript lines are matched against.
    unread: Vec<Unread>,
}

impl Tracker {
    pub(super) fn new(window: Duration) -> Self {
        Self {
            window,
            unsettled: HashMap::new(),
            held: Vec::new(),
            seen_held: Vec::new(),
            read: HashSet::new(),
            counts: HashMap::new(),
            unread: Vec::new(),
        }
    }

    /// `msg_id` was sent to `recipient`, the session `session_id`, with `text`.
    pub(super) fn sent(&mut self, msg_id: &str, recipient: &str, session_id: &str, text: &str) {
        self.unread.push(Unread {
            msg_id: msg_id.to_owned(),
            session_id: session_id.to_owned(),
            recipient: recipient.to_owned(),
            text: Some(text.to_owned()),
        });
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
        let of = |list: &[(String, String)]| -> Vec<String> {
            list.iter()
                .filter(|(_, to)| to == recipient)
                .map(|(id, _)| id.clone())
                .collect()
        };
        let mut waiting = of(&self.seen_held);
        match outcome {
            Outcome::Released | Outcome::Denied | Outcome::Expired => {
                waiting.extend(of(&self.held));
            }
            _ => waiting.extend(
                self.unsettled
                    .get(recipient)
                    .map(|(_, ids)| ids.clone())
                    .unwrap_or_default(),
            ),
        }
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
        self.seen_held.retain(|(id, _)| !msg_ids.contains(id));
        match outcome {
            Outcome::Held => self
                .held
                .extend(msg_ids.iter().map(|id| (id.clone(), recipient.to_owned()))),
            // Never to be read.
            Outcome::Refused | Outcome::Denied | Outcome::Expired => {
                self.unread.retain(|m| !msg_ids.contains(&m.msg_id));
            }
            _ => {}
        }
        Receipt {
            outcome,
            basis: Basis::Notice,
            msg_ids,
            count,
            recipient: recipient.to_owned(),
        }
    }

    /// What a line of `session_id`'s transcript settles, for messages sent from `from`
    /// (this mailbox's own address): read (by `msg_id`), queued or held (by sender and
    /// text, the oldest such message first). Read and queued are receipts of their own;
    /// held only stops the window, as the receiver's notice says it with its `msg_id`s.
    pub(super) fn transcript(
        &mut self,
        session_id: &str,
        fact: &Fact,
        from: &str,
    ) -> Option<Receipt> {
        let (outcome, at) = match fact {
            Fact::Read { msg_id, .. } => (
                Outcome::Read,
                self.unread.iter().position(|m| &m.msg_id == msg_id)?,
            ),
            Fact::Queued { from: by, text } if by == from => (
                Outcome::Queued,
                self.unread
                    .iter()
                    .position(|m| m.session_id == session_id && m.text.as_ref() == Some(text))?,
            ),
            Fact::Held { from: by, preview } if by == from => {
                let preview = preview.trim_end_matches('…');
                let unsettled = |id: &str| {
                    self.unsettled
                        .values()
                        .any(|(_, ids)| ids.iter().any(|u| u == id))
                };
                (
                    Outcome::Held,
                    self.unread.iter().position(|m| {
                        m.session_id == session_id
                            && m.text.as_deref().is_some_and(|t| t.starts_with(preview))
                            && unsettled(&m.msg_id)
                    })?,
                )
            }
            _ => return None,
        };
        let message = &mut self.unread[at];
        let (msg_id, recipient) = (message.msg_id.clone(), message.recipient.clone());
        if let Some((_, ids)) = self.unsettled.get_mut(&recipient) {
            ids.retain(|id| *id != msg_id);
        }
        match outcome {
            Outcome::Read => {
                self.unread.remove(at);
                self.read.insert(msg_id.clone());
            }
            Outcome::Queued => message.text = None,
            _ => {
                self.seen_held.push((msg_id, recipient));
                return None;
            }
        }
        Some(Receipt {
            outcome,
            basis: Basis::Transcript,
            msg_ids: vec![msg_id],
            count: 1,
            recipient,
        })
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
                // Decided: no transcript line is waited for any more.
                self.unread.retain(|m| !msg_ids.contains(&m.msg_id));
                Some(Receipt {
                    outcome: Outcome::Accepted,
                    basis: Basis::Silence,
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
        let held = self.held.iter().chain(&self.seen_held).map(|(id, _)| id);
        let unsettled = self.unsettled.values().flat_map(|(_, ids)| ids);
        held.chain(unsettled)
            .filter(|id| !self.read.contains(*id))
            .cloned()
            .collect()
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
        tracker.sent("a", "uds:/r.sock", "s", "text");
        tracker.sent("b", "uds:/r.sock", "s", "text");
        tracker.sent("c", "uds:/s.sock", "s", "text");
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
            tracker.sent(id, "uds:/r.sock", "s", "text");
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

    #[test]
    fn transcript_lines_settle_our_messages_by_msg_id_or_by_sender_and_text() {
        let mut tracker = Tracker::new(Duration::ZERO);
        let us = "uds:/me.sock";
        tracker.sent("a", "uds:/r.sock", "s-r", "same words");
        tracker.sent("b", "uds:/r.sock", "s-r", "same words");
        tracker.sent("c", "uds:/r.sock", "s-r", "other words");
        let queued = |from: &str, text: &str| Fact::Queued {
            from: from.to_owned(),
            text: text.to_owned(),
        };
        assert_eq!(
            tracker.transcript("s-r", &queued("uds:/someone-else.sock", "same words"), us),
            None,
            "another sender's message with the same text is not ours"
        );
        assert_eq!(
            tracker.transcript("s-other", &queued(us, "same words"), us),
            None
        );
        let first = tracker
            .transcript("s-r", &queued(us, "same words"), us)
            .unwrap();
        let second = tracker
            .transcript("s-r", &queued(us, "same words"), us)
            .unwrap();
        assert_eq!(
            (first.msg_ids, second.msg_ids, first.basis),
            (ids(&["a"]), ids(&["b"]), Basis::Transcript),
            "equal texts are queued in the order they were sent"
        );
        let read = Fact::Read {
            msg_id: "b".to_owned(),
            from: None,
        };
        let read = tracker.transcript("s-r", &read, us).unwrap();
        assert_eq!((read.outcome, read.msg_ids), (Outcome::Read, ids(&["b"])));
        let held = Fact::Held {
            from: us.to_owned(),
            preview: "other wo…".to_owned(),
        };
        assert_eq!(
            tracker.transcript("s-r", &held, us),
            None,
            "held is told by its notice, which names it"
        );
        assert!(
            tracker
                .due(Instant::now() + Duration::from_millis(1))
                .is_empty(),
            "nothing the transcript settled is accepted on silence"
        );
        assert_eq!(
            tracker.unknown(),
            ids(&["c"]),
            "queued is decided, held is not"
        );
        tracker.counted("uds:/r.sock", Outcome::Held, 1);
        let noticed = tracker.notice(Outcome::Held, "uds:/r.sock", &[]);
        assert_eq!(
            (noticed.msg_ids, noticed.basis),
            (ids(&["c"]), Basis::Notice),
            "a coalesced notice attributes what the transcript saw held"
        );
        let read_after_release = Fact::Read {
            msg_id: "c".to_owned(),
            from: None,
        };
        assert!(tracker.transcript("s-r", &read_after_release, us).is_some());
        assert!(tracker.unknown().is_empty(), "read is decided");
        let released = tracker.notice(Outcome::Released, "uds:/r.sock", &ids(&["c"]));
        assert_eq!(
            released.msg_ids,
            ids(&["c"]),
            "a release told after the read"
        );
    }
}
