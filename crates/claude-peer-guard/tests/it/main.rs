//! The guard hooks through their public door: plans written by `Plan`, checked by the
//! hook on real files, against a real live session.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod hook;
