//! Reach `claude-peers` on other machines through the system `ssh`: no broker, no port
//! of our own, the user's keys, config, jump hosts and multiplexing as they are.
//!
//! A [`Host`] is `local` or an ssh destination checked so that ssh can only read it as
//! one. [`Ssh`] runs `claude-peers --json` there, the handshake ([`PROTOCOL`]) in the same
//! invocation, every word quoted for the remote shell ([`shell_line`]), one connection
//! per host kept open for the next command (`ControlMaster`, unless the user's own
//! configuration multiplexes). What went wrong on the way is an [`Error`] naming the
//! host; what the remote `claude-peers` answered is the caller's to read.

mod error;
mod host;
mod quote;
mod ssh;

pub use error::Error;
pub use host::{Host, LOCAL};
pub use quote::shell_line;
pub use ssh::{
    Answer, DEFAULT_CONNECT_TIMEOUT, INCOMPATIBLE, PROTOCOL, PROTOCOL_FLAG, SSH_VAR, Ssh,
    last_words,
};
