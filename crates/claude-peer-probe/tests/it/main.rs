//! Integration tests of the real OS layer: real processes, real files.

// The helpers outside `#[test]` functions are test code too: clippy.toml's
// allow-*-in-tests does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fs;
#[cfg(target_os = "linux")]
mod process;
