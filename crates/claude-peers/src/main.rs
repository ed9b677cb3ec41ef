//! `claude-peers`: the live Claude Code sessions on this machine, from a shell.
#![forbid(unsafe_code)]

mod args;
mod cli;
mod cmd;
mod config;
mod error;
mod json;
mod ops;
mod output;
mod signals;
mod table;

use std::ffi::OsString;
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use crate::args::SenderArgs;
use crate::cli::{Cli, Command};
use crate::error::{Exit, Failure};
use crate::ops::Context;
use crate::ops::remote::Hosts;
use crate::ops::send::HOOK;
use crate::output::{Format, Output};

fn main() -> ExitCode {
    // Claude Code runs the sender's hooks as `claude-peers hook …`: a protocol of their
    // own (exit 2 blocks), not a command for people, so it is answered before parsing.
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if args.first().is_some_and(|first| first == HOOK) {
        return ExitCode::from(u8::try_from(claude_peer_guard::run(&args[1..])).unwrap_or(2));
    }
    let cli = Cli::parse();
    let out = Output::new(if cli.json {
        Format::Json
    } else {
        Format::Human
    });
    match run(cli, &out) {
        Ok(code) => code.into(),
        Err(failure) => out.fail(&failure),
    }
}

fn run(cli: Cli, out: &Output) -> Result<Exit, Failure> {
    if let Some(theirs) = cli.peer_protocol {
        handshake(theirs)?;
    }
    let ctx = Context::new(cli.home)?;
    if let Some(hosts) = Hosts::from_flags(&ctx, &cli.hosts, cli.every_host, cli.remote_bin)? {
        return on_hosts(&ctx, &hosts, cli.command, out);
    }
    match cli.command {
        Command::List(args) => cmd::list::exec(&ctx, &args, out),
        Command::Show(args) => cmd::show::exec(&ctx, &args, out),
        Command::Resolve(args) => cmd::resolve::exec(&ctx, &args, out),
        Command::Settings(args) => cmd::settings::exec(ctx, args, out),
        Command::Watch(args) => cmd::watch::exec(&ctx, &args, out),
        Command::Whoami => cmd::whoami::run(&ctx, out),
        Command::Top {
            bell,
            sender,
            managed_settings,
        } => cmd::top::run(
            &ctx.with_managed_settings(managed_settings.path),
            top_options(bell, sender, None),
        ),
        Command::Send(args) => cmd::send::exec(ctx, args, out),
        Command::Serve(args) => cmd::serve::exec(ctx, args, out),
        Command::Outbox(args) => cmd::outbox::exec(&ctx, args, out),
        Command::Log(args) => cmd::log::exec(args, out),
        Command::Reply(args) => cmd::reply::exec(ctx, args, out),
        Command::Mailbox {
            sender,
            timeout,
            managed_settings,
        } => cmd::mailbox::run(
            &ctx.with_managed_settings(managed_settings.path),
            sender.claude.path,
            sender.from,
            timeout.span.0,
        ),
        Command::Mcp {
            action: Some(action),
            ..
        } => cmd::mcp::install(&ctx, action, out),
        Command::Mcp {
            action: None,
            claude,
            managed_settings,
        } => cmd::mcp::run(
            ctx.with_managed_settings(managed_settings.path),
            claude.path,
        ),
        Command::Doctor(args) => cmd::doctor::exec(&ctx, args, out),
        Command::Completions(args) => cmd::completions::exec(Cli::command(), &args),
        Command::Man => cmd::man::exec(Cli::command()),
    }
}

/// How `top` runs: over `hosts` too, when given.
fn top_options(bell: bool, sender: SenderArgs, hosts: Option<Hosts>) -> cmd::top::Options {
    cmd::top::Options {
        bell,
        colors: if output::colors_allowed() {
            cmd::top::Colors::On
        } else {
            cmd::top::Colors::Off
        },
        claude: sender.claude.path,
        from: sender.from,
        hosts,
    }
}

/// A command of `--host`/`--hosts`: asked of each host.
fn on_hosts(ctx: &Context, hosts: &Hosts, command: Command, out: &Output) -> Result<Exit, Failure> {
    match command {
        Command::Top {
            bell,
            sender,
            managed_settings,
        } => cmd::top::run(
            &ctx.clone().with_managed_settings(managed_settings.path),
            top_options(bell, sender, Some(hosts.clone())),
        ),
        Command::List(args) => cmd::list::exec_hosts(hosts, &args, out),
        Command::Show(args) => cmd::show::exec_hosts(hosts, &args, out),
        Command::Send(args) => cmd::send::exec_hosts(hosts, &args, out),
        Command::Watch(args) => cmd::watch::exec_hosts(hosts, &args, out),
        Command::Doctor(args) => cmd::doctor::exec_hosts(hosts, &args, out),
        Command::Outbox(args) => cmd::outbox::exec_hosts(hosts, args, out),
        Command::Log(args) => cmd::log::exec_hosts(hosts, &args, out),
        _ => Err(Failure::usage(
            "no_host",
            "--host and --hosts apply to list, show, send, watch, top, doctor, outbox and log",
        )),
    }
}

/// The remote protocol the asking `claude-peers` speaks must be this one's.
fn handshake(theirs: u32) -> Result<(), Failure> {
    if theirs == claude_peer_remote::PROTOCOL {
        return Ok(());
    }
    Err(Failure::error(
        claude_peer_remote::INCOMPATIBLE,
        format!(
            "claude-peers {} here speaks remote protocol {}, the one asking speaks {theirs}: run the same version on both machines",
            env!("CARGO_PKG_VERSION"),
            claude_peer_remote::PROTOCOL
        ),
    ))
}
