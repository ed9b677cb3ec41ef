//! Discover the live Claude Code sessions and resolve exactly one for delivery.
//!
//! A registry file is not a live session: records outlive crashes, pids get reused,
//! Claude Code rewrites records in place, and the directory can hold anything. A
//! [`Discovery`] reads the registry through the probe's traits, asks the process table
//! about each pid, and lets `claude_peer_registry::judge` decide. It does no IO of its
//! own, so fakes drive it in tests exactly as the OS does in production. Callers that
//! scan repeatedly should keep one `Discovery` (`Discovery::os()` builds a fresh
//! process table, and only a long-lived one remembers the processes it has pinned).
//! [`Discovery::entries`] hands over each entry as it is judged, holding none, for
//! registries of any size; [`Discovery::scan`] collects them. [`Discovery::live`] gives
//! the live ones as [`LiveSession`]s, which always have a pid and a record; resolution
//! gives an [`AddressableSession`], which also has its messaging socket. Which session
//! a target names is one rule ([`Target`], resolved against one scan, a [`Roster`]):
//! a session id, or else the name of exactly one live session.
//!
//! ```no_run
//! use claude_peer_registry::ClaudeHome;
//! use claude_peer_resolve::Discovery;
//!
//! let home = ClaudeHome::new("/home/ada/.claude");
//! let discovery = Discovery::os();
//! for session in discovery.live(&home)?.entries {
//!     println!("{} {}", session.pid, session.record.session_id);
//! }
//! let target = discovery.resolve_live_session(&home, "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57")?;
//! println!("{}", target.socket.display());
//! # Ok::<(), claude_peer_resolve::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod confirm;
mod error;
mod live;
mod resolve;
mod scan;
mod target;

pub use confirm::Identity;
pub use error::{Error, Refusal, RefusalKind};
pub use live::{AddressableSession, LiveSession};
pub use scan::{
    Addressability, Discovery, Entries, Entry, Rereads, Scan, Scope, Unaddressable, Warning,
};
pub use target::{Roster, Target};
