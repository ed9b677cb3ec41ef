//! `man`: the manual page, in roff, made from the same clap definitions as `--help`.

use std::io::{self, Write};

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::{Exit, Failure};

pub(crate) fn run() -> Result<Exit, Failure> {
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    let mut stdout = io::stdout().lock();
    stdout.write_all(&page)?;
    stdout.flush()?;
    Ok(Exit::Success)
}
