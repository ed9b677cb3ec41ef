//! What whoever waits on a sender hears, on one channel: the sender's printed lines,
//! and what else must wake the waiter — the sender's end, a cancellation, a nudge, a
//! receiver's transcript.
//!
//! The stdout parse ([`crate::stream::Printed`]) knows nothing of the channel; the
//! transcript witness sends here and the stream does not know it either.

use claude_peer_transcript::Fact;

use crate::stream::{Printed, Queued, Tally};

/// One message on a sender's channel.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Line {
    /// `system/init`: what this Claude Code can do.
    Init {
        version: Option<String>,
        send_message: bool,
        messaging_socket: Option<String>,
    },
    /// A tool's result (`tool_use_result` beside a `tool_result` block).
    ToolResult {
        tool_use_id: String,
        success: bool,
        msg_id: Option<String>,
        /// What Claude Code said: its result message, or the error text.
        text: String,
    },
    /// A receiver's decision about messages sent earlier, as the sender's own
    /// informational line counts them.
    Tally(Tally),
    /// A queued prompt the `user-prompt-submit` hook kept from the model: its items.
    Queued(Vec<Queued>),
    /// The end of a turn.
    Result,
    /// Any other printed line.
    Other,
    /// The sender's stdout ended.
    Closed,
    /// Nothing from the sender: a waiter is woken to look at something else.
    Wake,
    /// Not from the sender: the send was cancelled ([`crate::Cancel`]).
    Cancelled,
    /// Not from the sender either: what a receiver's transcript said
    /// ([`crate::witness::Witness`]).
    Transcript { session_id: String, heard: Heard },
}

/// What a receiver's transcript said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    /// A line about a cross-session message.
    Fact(Fact),
    /// The transcript can no longer be followed (or never could): the receipt must rest
    /// on other evidence.
    Lost(String),
}

impl From<Printed> for Line {
    fn from(printed: Printed) -> Self {
        match printed {
            Printed::Init {
                version,
                send_message,
                messaging_socket,
            } => Self::Init {
                version,
                send_message,
                messaging_socket,
            },
            Printed::ToolResult {
                tool_use_id,
                success,
                msg_id,
                text,
            } => Self::ToolResult {
                tool_use_id,
                success,
                msg_id,
                text,
            },
            Printed::Tally(tally) => Self::Tally(tally),
            Printed::Queued(items) => Self::Queued(items),
            Printed::Result => Self::Result,
            Printed::Other => Self::Other,
        }
    }
}
