//! The guard hooks Claude Code runs for the `claude-peers` sender, and the plan files they
//! check its calls against.
//!
//! The sender is a headless Claude Code whose model is a script; this crate is what keeps
//! it to exactly the planned call, in another process, at the moment of the call. Before
//! asking for a tool call the sender writes its [`Plan`] (the [`Recipient`] the gate
//! confirmed and the [`Call`] it may carry) into a plans directory; Claude Code then runs
//! the hook ([`run`]) before the call, which allows a `SendMessage` only as planned, once,
//! and only while the same process still runs the same session (the gate's own rule,
//! `Discovery::confirm`), and before every prompt, which lets only this project's own
//! prompts reach the model. Every job begins with a canary call the hook must block and
//! note ([`canary_blocked`]): the proof that the guard runs. A refusal is noted beside the
//! plan ([`read_refusal`]), so the sender reports it in the gate's terms.
//!
//! How the hooks are installed and how this project's prompts are written is the
//! [`protocol`], written once for the sender, its stream parser and the hooks.
//!
//! [`Recipient`]: claude_peer_deliver::Recipient
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod hook;
mod plan;
pub mod protocol;

pub use hook::{run, run_with};
pub use plan::{Call, Plan, canary_blocked, read_refusal};
