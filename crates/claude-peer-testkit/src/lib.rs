//! Fakes and proptest strategies shared by the claude-peers crates' tests.
//!
//! The fakes implement the probe's traits in memory, so scans and resolutions can be
//! driven through every combination of facts without real processes; the strategies
//! generate records, raw JSON and process facts for property tests; `registry` builds
//! real registries of live child processes and dead pids for benchmarks.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod fake;
pub mod registry;
pub mod strategy;
