//! Integration tests of the watch engine: fakes driven through random histories, and
//! the real OS with live processes whose records are rewritten in place.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod fakes;
mod os;
mod stress;
mod support;
