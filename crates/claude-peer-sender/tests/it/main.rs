//! Integration tests of the sender's parts that run without Claude Code: the mailbox
//! service on a stand-in sender. (Sends with the real Claude Code are tested in the
//! command crate, which builds the hook program.)
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod service;
