//! A live Claude Code session's own transcript, followed: what the receiver did with each
//! cross-session message, as it wrote it down.
//!
//! A sender learns from Claude Code only that a message was handed over; the receiver's
//! transcript (`<home>/projects/<dir>/<sessionId>.jsonl`, one JSON object per line,
//! appended) says whether it was queued, given to its model, or held. [`Follower`] reads
//! only what is appended after it starts, line by line and bounded; [`fact`] reads one
//! line; [`envelope`] is the one reader of a message's envelope; [`summary`] reads the
//! end of a transcript: the last prompt and when it was last written.
//!
//! # Example
//!
//! Start the follower before the send, so that nothing the send causes is missed, then
//! wait for the line that gives the message to the receiver's model:
//!
//! ```no_run
//! use std::time::{Duration, Instant};
//!
//! use claude_peer_registry::ClaudeHome;
//! use claude_peer_transcript::{Fact, Follower};
//!
//! # fn send() -> String { String::new() }
//! let home = ClaudeHome::new("/home/ada/.claude");
//! let mut follower = Follower::start(&home, "af4c64f8-b0e2-4e2b-95a9-0d7c5bfd95cd")?;
//! let msg_id = send(); // the sender's tool result names the message's `msg_id`
//! let give_up = Instant::now() + Duration::from_secs(30);
//! let read = loop {
//!     let facts = follower.next(Duration::from_secs(1))?;
//!     if facts.iter().any(|fact| matches!(fact, Fact::Read { msg_id: id, .. } if *id == msg_id)) {
//!         break true;
//!     }
//!     if Instant::now() > give_up {
//!         break false; // still queued behind a running turn, or held: ask other evidence
//!     }
//! };
//! # let _ = read;
//! # Ok::<(), claude_peer_transcript::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod envelope;
mod error;
mod facts;
mod find;
mod follow;
mod summary;

pub use error::Error;
pub use facts::{Fact, fact};
pub use find::find;
pub use follow::Follower;
pub use summary::{PROMPT_CHARS, Summary, TAIL_BYTES, summary};
