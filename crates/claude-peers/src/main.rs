//! `claude-peers`: the live Claude Code sessions on this machine, from a shell.
#![forbid(unsafe_code)]

mod cli;
mod commands;
mod mailbox;
mod mcp;
mod output;
mod send;
mod view;
mod watch;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;
use crate::output::Output;

/// The first argument that runs the Claude sender's hooks (see `send`).
pub(crate) const HOOK: &str = "hook";

fn main() -> ExitCode {
    // Claude Code runs the sender's hooks as `claude-peers hook …`: a protocol of their
    // own (exit 2 blocks), not a command for people, so it is answered before parsing.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|first| first == HOOK) {
        return ExitCode::from(u8::try_from(claude_peer_relay::hook::run(&args[1..])).unwrap_or(2));
    }
    let cli = Cli::parse();
    let out = Output::new(cli.json);
    match commands::run(cli, &out) {
        Ok(code) => code.into(),
        Err(failure) => out.fail(&failure),
    }
}
