//! The delivery gate: decide whether a message may go to one live Claude Code session
//! and to whom exactly, hand it to a [`Relay`], and report honestly what happened.
//!
//! This project never writes Claude Code's messaging socket. A **relay** does the
//! sending: `claude-peer-sender`'s `ClaudeRelay` runs a headless Claude Code with its own
//! `SendMessage`; [`CommandRelay`] runs a program of the harness's own. This crate owns
//! everything before and after the hand-over, so every relay gets the same checks.
//!
//! ```no_run
//! use claude_peer_deliver::{CommandRelay, deliver};
//! use claude_peer_registry::ClaudeHome;
//!
//! let home = ClaudeHome::new("/home/ada/.claude");
//! let relay = CommandRelay::new("/home/ada/bin/relay.sh");
//! let delivered = deliver(&home, "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57", "the build is green", &relay)?;
//! println!("{:?}", delivered.detail);
//! # Ok::<(), claude_peer_deliver::Error>(())
//! ```
//!
//! # What a delivery does
//!
//! 1. An empty (or whitespace-only) message and one above [`MAX_MESSAGE_BYTES`] are
//!    errors before anything else is done.
//! 2. The session is resolved afresh ([`claude_peer_resolve::Discovery::resolve_live_session`]):
//!    refusals `not_live`, `identity_mismatch`, `not_addressable`.
//! 3. Its `crossSessionInbound`, as far as files show (managed settings, the user's
//!    settings, its cwd's project settings; a `--settings` flag on its process cannot be
//!    seen): `refuse` is the refusal `inbound_refused`, and nothing is relayed; so is a
//!    policy that cannot be told (a settings file that cannot be read or parsed).
//!    `accept` makes the outcome [`Inbound::Automatic`]; `hold` and Claude Code's
//!    default (unset) make it [`Inbound::MayHold`]: the message may wait for the
//!    receiving user's approval.
//! 4. Immediately before the hand-over, the session's record and its pid are read again
//!    ([`claude_peer_resolve::Discovery::confirm`]): the same pid, with the same start
//!    token, must still run the same session id, else `not_live` (a `/clear`, a resume
//!    or a crash in between) and the relay is never started.
//! 5. The relay gets the [`Recipient`] and the message. When it does not confirm the send
//!    (it fails, times out or crashes), the refusal is `delivery_failed`, in the relay's
//!    own words.
//!
//! [`Courier::prepare`] (steps 1–3) and [`Prepared::hand_over`] (steps 4–5) are public,
//! so a harness can show the target before sending, and tests can act in between.
//!
//! # A program of your own
//!
//! [`CommandRelay`] runs a program, without a shell, with the target in
//! `CLAUDE_PEERS_TARGET_SESSION_ID`, `CLAUDE_PEERS_TARGET_NAME`,
//! `CLAUDE_PEERS_TARGET_PID`, `CLAUDE_PEERS_TARGET_SOCKET` and `CLAUDE_PEERS_TARGET_CWD`,
//! and the message on stdin. It confirms by exiting 0 after printing a stdout line
//! `{"sent":true}` (optionally with `"detail"`); anything else fails the delivery with
//! the last 4 KiB of its stderr. For example:
//!
//! ```sh
//! #!/bin/sh
//! # Send stdin to the target with your own sender, then confirm.
//! my-sender --to "$CLAUDE_PEERS_TARGET_NAME" >&2 || exit 1
//! echo '{"sent":true,"detail":"sent by my-sender"}'
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod child;
mod courier;
mod error;
mod outcome;
mod program;
mod refusal;
mod relay;

pub use courier::{
    Courier, Delivered, Inbound, MAX_MESSAGE_BYTES, Prepared, check_message, deliver,
};
pub use error::Error;
pub use outcome::{Basis, Outcome, Receipt};
pub use program::{
    CommandRelay, DEFAULT_TIMEOUT, ENV_CWD, ENV_NAME, ENV_PID, ENV_SESSION_ID, ENV_SOCKET,
    STDERR_TAIL_BYTES, STDOUT_LINE_BYTES,
};
pub use refusal::{Refusal, RefusalKind};
pub use relay::{Confirmation, Recipient, Relay, RelayFailure};
