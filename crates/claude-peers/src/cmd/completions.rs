//! `completions`: a shell completion script on stdout.

use std::io;

use clap::CommandFactory;

use crate::cli::{Cli, Shell};
use crate::error::{Exit, Failure};

pub(crate) fn run(shell: Shell) -> Result<Exit, Failure> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command();
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut command, "claude-peers", &mut buffer);
    io::Write::write_all(&mut io::stdout().lock(), &buffer)?;
    Ok(Exit::Success)
}
