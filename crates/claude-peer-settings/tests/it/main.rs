//! The integration tests of `claude-peer-settings`, on the real file system, through its
//! public API (fault injection and real processes are unit tests: `src/tests/`).

// Test code: a failed unwrap is a failed test (clippy.toml allows these in `#[test]` functions;
// the helpers here are test code too).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;
mod corpus;
mod effective;
mod managed;
