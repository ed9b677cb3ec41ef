//! Fakes, proptest strategies and real-world helpers shared by the claude-peers crates'
//! tests and benchmarks.
//!
//! The fakes implement the probe's traits in memory, so scans and resolutions can be
//! driven through every combination of facts without real processes; the strategies
//! generate records, raw JSON and process facts for property tests. For tests against
//! the real OS, `process` makes live children, zombies, reaped pids and parked threads
//! and reads their start tokens, `home` makes a temporary Claude home with records and
//! listening sockets, `lines` reads a child's output with a deadline, `fixtures` names
//! the captured real records, and `registry` builds large registries of live children
//! and dead pids for benchmarks, and `sshd` runs real OpenSSH servers on loopback
//! ports as other machines.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod fake;
pub mod fixtures;
pub mod home;
pub mod lines;
pub mod process;
pub mod registry;
pub mod sshd;
pub mod strategy;
