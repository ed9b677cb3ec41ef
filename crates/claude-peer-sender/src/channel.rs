//! What whoever waits on a sender hears, on one channel: the sender's printed lines,
//! and what else must wake the waiter — the sender's end, a cancellation, a nudge, a
//! receiver's transcript.
//!
//! The stdout parse ([`crate::stream::Printed`]) knows nothing of the channel; the
//! transcript witness sends here and the stream does not know it either.

use claude_peer_transcript::Fact;

use crate::stream::Printed;

/// One message on a sender's channel.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Line {
    /// A line the sender printed.
    Printed(Printed),
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
