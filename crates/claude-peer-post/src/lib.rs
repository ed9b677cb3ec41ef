//! The claude-peers post office: messages kept until their receiver can take them, each
//! with the timeline of everything that happened to it, and the deliverer that hands
//! them to the gate.
//!
//! One SQLite file per user ([`default_store_path`]: `$XDG_STATE_HOME/claude-peers/post.db`,
//! else `~/.local/state/claude-peers/post.db`), 0600, in a directory only this user can
//! change, in write-ahead-log mode with every commit on disk before it returns: a
//! message reported stored survives a `kill -9` and a reboot. A file that is not a
//! store, is cut off, or was written by a newer claude-peers is refused by name and left
//! untouched.
//!
//! A message moves through one state machine ([`Step::from`]): `waiting` → `sending` →
//! `delivered` (its receipt may change later), or `refused`, `expired`, `cancelled`,
//! `unknown`. Only a waiting message can be claimed for an attempt, in a transaction of
//! its own, so two deliverers never send one message at once.
//!
//! A [`PostOffice`] delivers what the store holds: each [`PostOffice::pass`] tries every
//! waiting message whose address resolves now, through the same gate as a one-shot send
//! (`claude_peer_deliver::Courier`: policy, the last-moment confirm), first in, first out
//! per address; a failed attempt waits [`backoff`] before the next.
//!
//! ```
//! use claude_peer_post::{Attempt, Address, NewMessage, State, Step, Store};
//! # let dir = tempfile::tempdir()?;
//! let mut store = Store::open(&dir.path().join("state/post.db"))?;
//! let now = 1_700_000_000_000;
//! let posted = store.post(
//!     &NewMessage {
//!         from: "build-bot".to_owned(),
//!         key: Some("build-1234".to_owned()),
//!         to: Address::Name("reviewer".to_owned()),
//!         text: "the build is green".to_owned(),
//!         expires_at_ms: now + 86_400_000,
//!         in_reply_to: None,
//!     },
//!     now,
//! )?;
//! assert_eq!(posted.message.state, State::Waiting);
//! let sending = store.step(&posted.message.id, &Step::Send(Attempt::to("s")), now + 10)?;
//! assert_eq!((sending.state, sending.attempts), (State::Sending, 1));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod carrier;
mod client;
mod error;
mod lock;
mod message;
mod office;
pub mod protocol;
mod server;
mod store;

use std::path::PathBuf;
use std::time::Duration;

pub use carrier::{
    Carried, Carrier, Handing, Heard, Hearer, OpenSender, Relays, SENDER_IDLE, WarmSenders,
};
pub use client::{Client, Done};
pub use error::Error;
pub use lock::{LOCK_FILE, Lock};
pub use message::{
    Address, AddressKind, Attempt, Change, Direction, Inbound, Message, NewMessage, SenderProcess,
    State, Step,
};
pub use office::{
    FIRST_BACKOFF, LONGEST_BACKOFF, Pass, PostOffice, SentNow, WhenSent, backoff, record_heard,
};
pub use server::{DEFAULT_IDLE_EXIT, SOCKET_FILE, Server, Stopper};
pub use store::{
    Imported, LogFilter, Logged, MARK_END, MARK_START, MAX_IMPORT_LINE, Order, Posted, Retention,
    Store,
};

/// The longest a message may wait for its receiver: 30 days.
pub const MAX_EXPIRY: Duration = Duration::from_secs(30 * 86_400);

/// How long a message waits unless told otherwise: 24 hours.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(86_400);

/// Where this user's store is: `claude-peers/post.db` under `$XDG_STATE_HOME`, else
/// under `~/.local/state` (an absolute path only, as the XDG spec asks).
pub fn default_store_path() -> Result<PathBuf, Error> {
    let var = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = var("XDG_STATE_HOME")
        .or_else(|| var("HOME").map(|home| home.join(".local/state")))
        .ok_or(Error::NoPlace)?;
    Ok(base.join("claude-peers").join("post.db"))
}
