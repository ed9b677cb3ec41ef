//! `claude-peers`: the live Claude Code sessions on this machine, from a shell.
#![forbid(unsafe_code)]

mod cli;
mod commands;
mod output;
mod send;
mod view;
mod watch;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::Cli;
use crate::output::Output;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = Output::new(cli.json);
    match commands::run(cli, &out) {
        Ok(code) => code.into(),
        Err(failure) => out.fail(&failure),
    }
}
