//! One send through a running sender and the receipt of it: what the receiver's
//! transcript and notices say, or its silence.

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Confirmation, Outcome, Receipt, RelayFailure, Target};
use claude_peer_resolve::RefusalKind;
use claude_peer_transcript::Fact;

use super::{TurnEnd, await_sent};
use crate::sender::{Idle, Sender};
use crate::stream::Line;
use crate::witness::{Heard, Witness};

pub(super) fn send_once(
    sender: &mut Sender,
    target: &Target,
    message: &str,
    deadline: Instant,
    waits: Waits,
    turn_end: TurnEnd,
) -> Result<Confirmation, RelayFailure> {
    // From the transcript's end as it is before the send: nothing earlier counts.
    let _witness = Witness::start(&target.home, &target.session_id, sender.wake.clone());
    let ids = sender
        .request(target, message, Idle::Ignore)
        .map_err(|err| RelayFailure::new(err.to_string()))?;
    let mut early = Vec::new();
    let msg_id = await_sent(sender, &ids, deadline, turn_end, |line| {
        early.push(line);
    })?;
    let sent = Sent {
        msg_id: msg_id.as_deref(),
        from: sender.socket().map(|socket| format!("uds:{socket}")),
        recipient: format!("uds:{}", target.socket.display()),
        message,
    };
    let mut decision = Decision::new(waits, deadline);
    let mut lines = early.into_iter();
    loop {
        let line = match lines.next() {
            Some(line) => Ok(line),
            None => sender
                .lines
                .recv_timeout(decision.until().saturating_duration_since(Instant::now())),
        };
        let decided = match line {
            // Sent; cancelled before the receiver's word came: what it did is unknown.
            Ok(Line::Cancelled) => {
                return Ok(Confirmation {
                    detail: Some("cancelled before the receipt was decided".to_owned()),
                    receipt: None,
                    msg_id,
                });
            }
            Ok(Line::Closed) | Err(RecvTimeoutError::Disconnected) => {
                // Sent, but the sender ended before it could hear back.
                Some(decision.ended())
            }
            Ok(line) => decision.hear(&sent, line),
            Err(RecvTimeoutError::Timeout) => decision.waited(Instant::now()),
        };
        if let Some(receipt) = decided {
            return settle(receipt, msg_id);
        }
    }
}

/// How long a one-shot send waits for the receiver's word.
#[derive(Debug, Clone, Copy)]
pub(super) struct Waits {
    /// For anything at all (a transcript line, a notice) before the receipt rests on
    /// silence.
    pub(super) window: Duration,
    /// For `read` once the message is known to be queued.
    pub(super) read: Duration,
}

/// What was sent, to recognise it in the receiver's transcript and notices.
struct Sent<'a> {
    msg_id: Option<&'a str>,
    /// The sender's own address, `uds:<socket>`, as the receiver names it.
    from: Option<String>,
    /// The receiver's address, as notices name it.
    recipient: String,
    message: &'a str,
}

impl Sent<'_> {
    fn is_from_us(&self, from: &str) -> bool {
        self.from.as_deref() == Some(from)
    }
}

/// The receipt of one send, decided from what is heard, or from silence.
#[derive(Debug)]
struct Decision {
    waits: Waits,
    deadline: Instant,
    /// When the window for any word ends.
    silent_after: Instant,
    /// When the message was seen queued: from then on only `read` is waited for.
    queued_at: Option<Instant>,
}

impl Decision {
    fn new(waits: Waits, deadline: Instant) -> Self {
        Self {
            waits,
            deadline,
            silent_after: Instant::now() + waits.window,
            queued_at: None,
        }
    }

    /// When the next wait ends.
    fn until(&self) -> Instant {
        let until = match self.queued_at {
            Some(at) => at + self.waits.read,
            None => self.silent_after,
        };
        until.min(self.deadline)
    }

    fn hear(&mut self, sent: &Sent<'_>, line: Line) -> Option<Receipt> {
        let transcript = |outcome| Receipt {
            outcome,
            basis: Basis::Transcript,
        };
        match line {
            Line::Tally(tally) if tally.recipient == sent.recipient => Some(Receipt {
                outcome: tally.outcome,
                basis: Basis::Notice,
            }),
            Line::Transcript {
                heard: Heard::Fact(fact),
                ..
            } => match fact {
                Fact::Read { msg_id, .. } if Some(msg_id.as_str()) == sent.msg_id => {
                    Some(transcript(Outcome::Read))
                }
                Fact::Held { from, .. } if sent.is_from_us(&from) => {
                    Some(transcript(Outcome::Held))
                }
                Fact::Queued { from, text } if sent.is_from_us(&from) && text == sent.message => {
                    self.queued_at.get_or_insert_with(Instant::now);
                    self.waited(Instant::now())
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// What the time alone decides: `queued` once the wait for `read` is over, else
    /// `accepted` on silence once the window is.
    fn waited(&self, now: Instant) -> Option<Receipt> {
        if now < self.until() {
            return None;
        }
        Some(match self.queued_at {
            Some(_) => Receipt {
                outcome: Outcome::Queued,
                basis: Basis::Transcript,
            },
            None => Receipt {
                outcome: Outcome::Accepted,
                basis: Basis::Silence,
            },
        })
    }

    /// The sender ended: what the transcript said so far, else nothing.
    fn ended(&self) -> Receipt {
        self.queued_at.map_or(
            Receipt {
                outcome: Outcome::Accepted,
                basis: Basis::Silence,
            },
            |_| Receipt {
                outcome: Outcome::Queued,
                basis: Basis::Transcript,
            },
        )
    }
}

/// What the receipt of the one message sent means for the send.
fn settle(receipt: Receipt, msg_id: Option<String>) -> Result<Confirmation, RelayFailure> {
    let id = msg_id.as_deref().unwrap_or("unknown");
    match receipt.outcome {
        Outcome::Refused | Outcome::Denied => Err(RelayFailure::refused(
            RefusalKind::InboundRefused,
            format!(
                "the receiving session {} the message (msg_id {id}); it was not delivered",
                receipt.outcome.as_str()
            ),
        )),
        Outcome::Expired => Err(RelayFailure::new(format!(
            "the message (msg_id {id}) expired unapproved at the receiving session"
        ))),
        _ => Ok(Confirmation {
            detail: None,
            receipt: Some(receipt),
            msg_id,
        }),
    }
}
