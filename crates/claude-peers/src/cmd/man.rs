//! `man`: the manual page, in roff, made from the same clap definitions as `--help`.

use std::io::{self, Write};

use crate::error::{Exit, Failure};

/// The page of `command` (the whole command line).
pub(crate) fn exec(command: clap::Command) -> Result<Exit, Failure> {
    let mut page = Vec::new();
    clap_mangen::Man::new(command).render(&mut page)?;
    let mut stdout = io::stdout().lock();
    stdout.write_all(&page)?;
    stdout.flush()?;
    Ok(Exit::Success)
}
