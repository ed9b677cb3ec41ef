//! The scripted model endpoint over real TCP.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod endpoint;
