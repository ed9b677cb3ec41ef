//! Everything the dashboard shows, as values: the board, the mode the keys act in, the
//! policy as last read (with its revision), the bottom line's news and the clock. The
//! loop changes it only through these updates and draws it as it is; none of them does
//! any IO, so each is a plain function of the state and its input.

use std::path::PathBuf;

use claude_peer_settings::{InboundPolicy, Revision, Snapshot};
use claude_peer_transcript::Summary;

use super::board::{self, Board};
use super::mail::Heard;

/// What the keys act on now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The table: move, open, filter, message, policy.
    Table,
    /// One session's details, by session id (it stays open while the session lives).
    Details(String),
    /// Typing the filter (applied as typed).
    Filter,
    /// Typing a message for a session.
    Message {
        session_id: String,
        name: String,
        text: String,
    },
    /// Choosing a new inbound policy.
    Policy,
    /// Confirming it: written only if the file is still at `revision`.
    Confirm {
        policy: InboundPolicy,
        revision: Revision,
    },
    Help,
}

/// Whether the screen has colours (`NO_COLOR` is decided where the command starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Colors {
    On,
    Off,
}

/// One line of a conversation: when, which way, the text, and what became of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Said {
    pub(crate) at_ms: u64,
    /// The session sent it to one of our senders (else we sent it to the session).
    pub(crate) incoming: bool,
    pub(crate) text: String,
    /// For a message out: its receipt, else its state.
    pub(crate) fate: Option<String>,
}

/// The dashboard, as it is shown.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) board: Board,
    pub(crate) mode: Mode,
    /// The user's settings as last read: their `crossSessionInbound` is in the header.
    pub(crate) settings: Result<Snapshot, String>,
    /// The last thing to tell the user, on the bottom line.
    pub(crate) status: String,
    /// The end of the transcript of the session whose details are open: that session's
    /// id, and its transcript's end when it has one.
    pub(crate) transcript: Option<(String, Option<Summary>)>,
    /// The conversation with the session whose details are open, from the history:
    /// that session's id and its last lines, oldest first.
    pub(crate) conversation: Option<(String, Vec<Said>)>,
    /// The registry's directory, named when it has no live session.
    pub(crate) registry: PathBuf,
    pub(crate) colors: Colors,
    /// Milliseconds since the epoch, as of the last tick: the times shown count from it.
    pub(crate) now_ms: u64,
}

impl State {
    pub(crate) fn new(
        registry: PathBuf,
        settings: Result<Snapshot, String>,
        colors: Colors,
        now_ms: u64,
    ) -> Self {
        Self {
            board: Board::default(),
            mode: Mode::Table,
            settings,
            status: String::new(),
            transcript: None,
            conversation: None,
            registry,
            colors,
            now_ms,
        }
    }

    /// The clock moved on.
    pub(crate) fn tick(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }

    /// The screen has room for `rows` sessions' rows.
    pub(crate) fn resize(&mut self, rows: usize) {
        self.board.set_height(rows);
    }

    /// The session whose transcript should be read now: the one whose details are open,
    /// when they have just opened, or `again` (once a second) while they stay open.
    pub(crate) fn transcript_due(&self, again: bool) -> Option<&str> {
        let Mode::Details(session_id) = &self.mode else {
            return None;
        };
        let read_for = self.transcript.as_ref().map(|(id, _)| id);
        (again || read_for != Some(session_id)).then_some(session_id.as_str())
    }

    /// The end of `session_id`'s transcript, as just read.
    pub(crate) fn transcript_read(&mut self, session_id: String, summary: Option<Summary>) {
        self.transcript = Some((session_id, summary));
    }

    /// The last lines of the conversation with `session_id`, as just read.
    pub(crate) fn conversation_read(&mut self, session_id: String, said: Vec<Said>) {
        self.conversation = Some((session_id, said));
    }

    /// What the settings store answered to a change of the policy to `policy`.
    pub(crate) fn policy_written(
        &mut self,
        policy: InboundPolicy,
        written: Result<Snapshot, String>,
    ) {
        self.status = match written {
            Ok(snapshot) => {
                let status = format!(
                    "crossSessionInbound is now {} in {}",
                    policy.as_str(),
                    snapshot.path.display()
                );
                self.settings = Ok(snapshot);
                status
            }
            Err(why) => format!("policy unchanged: {why}"),
        };
    }

    /// What the mail thread heard: a send's end, a receipt, a reply, the sender's end.
    pub(crate) fn heard(&mut self, heard: Heard) {
        match heard {
            Heard::Sent { session_id, result } => {
                let fate = match result {
                    Ok(delivered) => {
                        let name = delivered.session.record.display_name().unwrap_or("-");
                        self.status = format!("sent to {name}; its row shows what it does with it");
                        let outcome = delivered.receipt.map_or("accepted", |r| r.outcome.as_str());
                        board::Fate::Sent {
                            msg_id: delivered.msg_id.unwrap_or_default(),
                            outcome: outcome.to_owned(),
                        }
                    }
                    Err(failure) => {
                        self.status = format!("not sent: {}", failure.message);
                        board::Fate::Failed(failure.name.to_owned())
                    }
                };
                self.board.set_fate(&session_id, fate);
            }
            Heard::Event(claude_peer_sender::MailboxEvent::Receipt(receipt)) => {
                self.board
                    .receipt(&receipt.msg_ids, receipt.outcome.as_str());
            }
            Heard::Event(claude_peer_sender::MailboxEvent::Message {
                from,
                from_name,
                session_id,
                text,
            }) => match session_id {
                Some(_) => {
                    let name = from_name.unwrap_or(from);
                    self.status = format!("reply from {name} (Enter on its row shows it)");
                }
                None => self.status = format!("message from {from}: {text}"),
            },
            Heard::Event(claude_peer_sender::MailboxEvent::Closed {
                reason: Some(reason),
                ..
            }) => self.status = format!("the sender ended: {reason}"),
            Heard::Event(_) => {}
        }
    }
}
