//! The store on real files: what it refuses, what it keeps, and its one state machine.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod bounded;
mod history;
mod office;
mod open;
mod server;
mod steps;

use claude_peer_post::{Address, NewMessage};

/// Now, as the tests' clock: 2026-12-01.
pub(crate) const NOW: u64 = 1_764_547_200_000;
pub(crate) const DAY: u64 = 86_400_000;

/// A message from `build-bot` to the name `to`, expiring in a day.
pub(crate) fn message(to: &str, text: &str) -> NewMessage {
    NewMessage {
        from: "build-bot".to_owned(),
        key: None,
        to: Address::Name(to.to_owned()),
        text: text.to_owned(),
        expires_at_ms: NOW + DAY,
        in_reply_to: None,
    }
}
