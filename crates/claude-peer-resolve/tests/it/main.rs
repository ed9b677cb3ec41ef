//! Integration tests of discovery and resolution: fakes for every combination of
//! facts, the real OS for everything a registry directory can hold.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agreement;
mod os;
mod properties;
mod resolve;
mod target;
