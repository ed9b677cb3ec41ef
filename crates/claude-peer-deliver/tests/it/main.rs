//! Integration tests of delivery: real relay programs written by the tests, real live
//! child processes as targets, a real Claude home in a temporary directory.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod outcomes;
mod relays;
mod support;
mod window;
