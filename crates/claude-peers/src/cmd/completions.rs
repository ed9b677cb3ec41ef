//! `completions`: a shell completion script on stdout.

use std::io;

use crate::error::{Exit, Failure};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The shell
    shell: Shell,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The script for the shell of `args`, completing `command` (the whole command line).
pub(crate) fn exec(mut command: clap::Command, args: &Args) -> Result<Exit, Failure> {
    let shell = match args.shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut command, "claude-peers", &mut buffer);
    io::Write::write_all(&mut io::stdout().lock(), &buffer)?;
    Ok(Exit::Success)
}
