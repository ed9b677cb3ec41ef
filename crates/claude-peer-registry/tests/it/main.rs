//! Integration tests of the registry model: one binary, one module per concern.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// Tables of JSON read best with one raw-string style throughout.
#![allow(clippy::needless_raw_string_hashes, clippy::too_many_lines)]

mod fixtures;
mod names;
mod parse;
mod properties;
mod verdicts;
