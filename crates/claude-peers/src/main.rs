//! `claude-peers`: the live Claude Code sessions on this machine, from a shell.
#![forbid(unsafe_code)]

mod cli;
mod cmd;
mod error;
mod json;
mod ops;
mod output;
mod signals;
mod table;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::Parser;
use claude_peer_resolve::Scope;

use crate::cli::{Cli, Command};
use crate::error::{Exit, Failure};
use crate::ops::Context;
use crate::ops::send::HOOK;
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
    let ctx = Context::new(cli.home)?;
    match cli.command {
        Command::List { all } => {
            let scope = if all { Scope::All } else { Scope::Live };
            cmd::list::run(&ctx, scope, out)
        }
        Command::Show { target } => cmd::show::run(&ctx, &target, out),
        Command::Resolve { session_id } => cmd::resolve::run(&ctx, &session_id, out),
        Command::Settings { action } => cmd::settings::run(ctx, action, out),
        Command::Watch { poll } => cmd::watch::run(&ctx, poll, out),
        Command::Whoami => cmd::whoami::run(&ctx, out),
        Command::Top {
            bell,
            from,
            claude,
            managed_settings,
        } => cmd::top::run(
            &ctx.with_managed_settings(managed_settings),
            cmd::top::Options {
                bell,
                colors: if output::colors_allowed() {
                    cmd::top::Colors::On
                } else {
                    cmd::top::Colors::Off
                },
                claude,
                from,
            },
        ),
        Command::Send(args) => cmd::send::run(ctx, args, out),
        Command::Mailbox {
            from,
            claude,
            timeout,
            managed_settings,
        } => cmd::mailbox::run(
            &ctx.with_managed_settings(managed_settings),
            claude,
            from,
            timeout,
        ),
        Command::Mcp {
            claude,
            managed_settings,
        } => cmd::mcp::run(ctx.with_managed_settings(managed_settings), claude),
        Command::Doctor {
            session,
            claude,
            managed_settings,
        } => cmd::doctor::run(
            &ctx.with_managed_settings(managed_settings),
            session.as_deref(),
            claude,
            out,
        ),
        Command::Completions { shell } => cmd::completions::run(shell),
        Command::Man => cmd::man::run(),
    }
}
