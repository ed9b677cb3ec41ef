//! The pure model of Claude Code's live-session registry.
//!
//! Claude Code registers each running session as `<home>/sessions/<pid>.json`. This
//! crate knows what those names and records mean and how to judge whether one is a
//! live session, as plain functions of bytes and facts: it does no IO, reads no
//! environment and looks at no clock, so every decision can be tested and fuzzed.
//! Reading the directory and asking the OS about pids is `claude-peer-probe`'s job.
//!
//! ```
//! use claude_peer_registry::{classify_entry_name, judge, Contents, EntryName, Liveness, ProcessFacts, Record, Signal};
//!
//! let EntryName::Record(pid) = classify_entry_name("9242.json".as_ref()) else { unreachable!() };
//! let record = Record::parse(pid, br#"{"pid":9242,"sessionId":"fbf07282","procStart":"67117","status":"idle"}"#)?;
//! let facts = ProcessFacts { start_token: Some("67117".into()), ..ProcessFacts::with_signal(Signal::Alive) };
//! assert_eq!(judge(Contents::Parsed(&record), &facts, None).liveness, Liveness::Live);
//! assert_eq!(judge(Contents::Parsed(&record), &ProcessFacts::gone(), None).liveness, Liveness::Gone);
//! # Ok::<(), claude_peer_registry::Rejection>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod home;
mod liveness;
mod name;
mod pid;
mod record;
mod rejection;
mod uuid;

pub use home::ClaudeHome;
pub use liveness::{
    Contents, Liveness, PREVIOUS_OWNER_GRACE, ProcessFacts, ProcessState, Signal, Verdict, judge,
};
pub use name::{EntryName, classify_entry_name};
pub use pid::Pid;
pub use record::{Activity, FormerName, Kind, NameSource, Record, VendorStatus};
pub use rejection::Rejection;
pub use uuid::is_uuid;

/// The most bytes a record may have; larger files are rejected unread, as Claude Code does.
///
/// Here, below both the record parse that applies it and the [`Rejection`] that names it.
pub const MAX_RECORD_BYTES: usize = 262_144;
