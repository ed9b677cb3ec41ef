//! One send through a running sender and the receipt of it: what the receiver's
//! transcript and notices say, or its silence.

use std::sync::mpsc::RecvTimeoutError;
use std::time::Instant;

use claude_peer_deliver::{Confirmation, Outcome, Receipt, Recipient, RefusalKind, RelayFailure};
use claude_peer_transcript::Fact;

use super::{TurnEnd, await_sent};
use crate::channel::{Heard, Line};
use crate::decider::{Decider, Seen, Waits, Word};
use crate::headless::{HeadlessClaude, Idle};
use crate::stream::Printed;
use crate::witness::Witness;

pub(super) fn send_once(
    sender: &mut HeadlessClaude,
    target: &Recipient,
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
    let mut decider = Decider::new(Instant::now(), waits);
    let mut lines = early.into_iter();
    loop {
        let until = decider.decide_by().map_or(deadline, |by| by.min(deadline));
        let line = match lines.next() {
            Some(line) => Ok(line),
            None => sender
                .lines
                .recv_timeout(until.saturating_duration_since(Instant::now())),
        };
        match line {
            // Sent; cancelled before the receiver's word came: what it did is unknown.
            Ok(Line::Cancelled) => {
                return Ok(Confirmation {
                    detail: Some("cancelled before the receipt was decided".to_owned()),
                    receipt: None,
                    msg_id,
                });
            }
            // Sent, but the sender ended before it could hear back.
            Ok(Line::Closed) | Err(RecvTimeoutError::Disconnected) => {
                return settle(decider.settle(), msg_id);
            }
            Ok(line) => {
                if let Some(word) = sent.word(&line) {
                    decider.hear(word, Instant::now());
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                let now = Instant::now();
                decider.waited(now);
                if now >= deadline {
                    return settle(decider.settle(), msg_id);
                }
            }
        }
        if let Some(receipt) = decider.decision() {
            return settle(receipt, msg_id);
        }
    }
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
    /// What `line` says about this message, if anything.
    fn word(&self, line: &Line) -> Option<Word> {
        let ours = |from: &str| self.from.as_deref() == Some(from);
        match line {
            Line::Printed(Printed::Tally(tally)) if tally.recipient == self.recipient => {
                Some(Word::Notice(tally.outcome))
            }
            Line::Transcript {
                heard: Heard::Fact(fact),
                ..
            } => {
                let about_it = match fact {
                    Fact::Read { msg_id, .. } => Some(msg_id.as_str()) == self.msg_id,
                    Fact::Held { from, .. } => ours(from),
                    Fact::Queued { from, text, .. } => ours(from) && text == self.message,
                };
                about_it.then(|| Word::Transcript(Seen::from(fact)))
            }
            _ => None,
        }
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
