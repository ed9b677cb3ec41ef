//! The integration tests of `claude-peer-settings`, on the real file system.

// Test code: a failed unwrap is a failed test (clippy.toml allows these in `#[test]` functions;
// the helpers here are test code too).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod corpus;
mod effective;
mod faults;
mod processes;
