//! End-to-end tests: the built binary against real registries in temporary homes,
//! with real live child processes.
// Test helpers may panic: a failed expectation is the test failing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod broadcast;
mod claude;
mod doctor;
mod guard;
mod history;
mod hosts;
mod list;
mod mailbox;
mod mailbox_broadcast;
mod managed;
mod mcp;
mod mcp_broadcast;
mod mcp_claude;
mod mcp_inbox;
mod mcp_pool;
mod mcp_post;
mod receipts;
mod receiver;
mod resolve;
mod send;
mod serve;
mod serve_disk;
mod serve_send;
mod settings;
mod support;
mod terminal;
mod top;
mod top_claude;
mod watch;
mod whoami;
