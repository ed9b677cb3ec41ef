//! Send to live Claude Code sessions with Claude Code's own `SendMessage`.
//!
//! This project never writes Claude Code's messaging socket. [`ClaudeRelay`] runs the
//! user's `claude` headless as the sender, its model this project's scripted endpoint
//! ([`claude_peer_endpoint`]: no language model, no credentials, no request leaves the machine), guarded by
//! the hooks of [`claude_peer_guard`] that allow exactly the planned call; [`Mailbox`] keeps one such sender
//! running for many sends, later receipts and replies. Whether a send may happen, and to
//! whom, is decided by `claude-peer-deliver`'s [`Courier`](claude_peer_deliver::Courier),
//! the same gate every relay goes through.
//!
//! ```no_run
//! use claude_peer_deliver::deliver;
//! use claude_peer_registry::ClaudeHome;
//! use claude_peer_sender::ClaudeRelay;
//!
//! let home = ClaudeHome::new("/home/ada/.claude");
//! let hook = vec!["/usr/local/bin/claude-peers".into(), "hook".into()];
//! let relay = ClaudeRelay::new("/usr/local/bin/claude", hook).from("build-bot");
//! let delivered = deliver(&home, "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57", "the build is green", &relay)?;
//! println!("{:?} {:?}", delivered.receipt, delivered.msg_id); // Some(Receipt { outcome: Read, basis: Transcript }) Some("963bec29-…")
//! # Ok::<(), claude_peer_deliver::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cancel;
mod channel;
mod decider;
mod error;
mod headless;
mod mailbox;
mod name;
mod private_dir;
mod relay;
mod stream;
mod witness;

pub use cancel::Cancel;
pub use error::Error;
pub use headless::{DEFAULT_SENDER_NAME, Idle, default_sender_home};
pub use mailbox::{
    Claim, Job, Mailbox, MailboxEvent, MailboxHandle, MailboxReceipt, Open, Reply, Wait, Waiting,
    Waker,
};
pub use name::{MAX_SENDER_NAME_BYTES, check_sender_name};
pub use private_dir::{default_runtime_dir, private_dir};
pub use relay::{
    Batch, Capabilities, ClaudeRelay, DEFAULT_READ_WAIT, DEFAULT_RECEIPT_WINDOW, RECEIVER_PACE,
    paced_by_receiver,
};
