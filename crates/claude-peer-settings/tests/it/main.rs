//! The integration tests of `claude-peer-settings`, on the real file system.

mod common;
mod corpus;
mod effective;
mod faults;
mod processes;
