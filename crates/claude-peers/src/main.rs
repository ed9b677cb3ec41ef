//! `claude-peers`: the live Claude Code sessions on this machine, from a shell.
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod context;
mod error;
mod output;
mod view;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};
use crate::context::HOOK;
use crate::error::{Exit, Failure};
use crate::output::Output;

fn main() -> ExitCode {
    // Claude Code runs the sender's hooks as `claude-peers hook …`: a protocol of their
    // own (exit 2 blocks), not a command for people, so it is answered before parsing.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|first| first == HOOK) {
        return ExitCode::from(
            u8::try_from(claude_peer_sender::hook::run(&args[1..])).unwrap_or(2),
        );
    }
    let cli = Cli::parse();
    let out = Output::new(cli.json);
    match run(cli, &out) {
        Ok(code) => code.into(),
        Err(failure) => out.fail(&failure),
    }
}

fn run(cli: Cli, out: &Output) -> Result<Exit, Failure> {
    let home = context::home(cli.home)?;
    match cli.command {
        Command::List { all } => cmd::list::run(&home, all, out),
        Command::Show { target } => cmd::show::run(&home, &target, out),
        Command::Resolve { session_id } => cmd::resolve::run(&home, &session_id, out),
        Command::Settings { action } => cmd::settings::run(&home, action, out),
        Command::Watch { poll } => cmd::watch::run(&home, poll, out),
        Command::Send(args) => cmd::send::run(&home, args, out),
        Command::Mailbox {
            from,
            claude,
            timeout,
            managed_settings,
        } => context::claude_relay(claude, from, timeout)
            .and_then(|relay| cmd::mailbox::run(&home, &relay, managed_settings)),
        Command::Mcp {
            claude,
            managed_settings,
        } => cmd::mcp::run(cmd::mcp::Config {
            home,
            claude,
            managed_settings,
        }),
        Command::Completions { shell } => cmd::completions::run(shell),
    }
}
