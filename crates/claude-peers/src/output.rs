//! Where output goes: JSON or human text on stdout, diagnostics on stderr.

use std::fmt::Display;
use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use serde::Serialize;

use crate::error::{Exit, Failure};
use crate::ops::Warned;
use crate::ops::remote::{HostError, Hosts};
use crate::table::{self, Style};

/// What stdout holds: text for people, or exactly the documented JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Human,
    Json,
}

/// The output channel of one invocation.
#[derive(Debug)]
pub(crate) struct Output {
    format: Format,
    pub(crate) style: Style,
}

#[allow(
    clippy::unused_self,
    reason = "all output goes through the invocation's Output, whatever it needs of it"
)]
impl Output {
    pub(crate) fn new(format: Format) -> Self {
        let color = format == Format::Human && io::stdout().is_terminal() && colors_allowed();
        Self {
            format,
            style: Style { color },
        }
    }

    /// Whether stdout holds JSON.
    pub(crate) fn is_json(&self) -> bool {
        self.format == Format::Json
    }

    /// Prints one JSON value and a newline. A closed stdout is not an error worth a
    /// message: the reader has gone.
    pub(crate) fn json(&self, value: &impl Serialize) -> io::Result<()> {
        let mut line = serde_json::to_vec(value).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut stdout = io::stdout().lock();
        stdout.write_all(&line)?;
        stdout.flush()
    }

    /// Prints human text, any control character in it but newlines and tabs escaped
    /// ([`table::lines`]): whatever of a file it quotes cannot steer the terminal.
    pub(crate) fn text(&self, text: &str) -> io::Result<()> {
        self.styled(&table::lines(text))
    }

    /// Prints text as is, this program's colours included: every part of it that comes
    /// from a file must already be escaped with [`table::field`].
    pub(crate) fn styled(&self, text: &str) -> io::Result<()> {
        let mut stdout = io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()
    }

    /// A warning on stderr, in both modes, escaped as [`Output::text`] is.
    pub(crate) fn warn(&self, message: &str) {
        let _ = writeln!(
            io::stderr(),
            "{}: {}",
            self.style_stderr("warning"),
            table::lines(message)
        );
    }

    /// Each of `warnings` on stderr, as [`Output::warn`] does.
    pub(crate) fn warn_all(&self, warnings: &[impl Display]) {
        for warning in warnings {
            self.warn(&warning.to_string());
        }
    }

    /// An operation's value, its warnings said on stderr first.
    pub(crate) fn warned<T, W: Display>(&self, warned: Warned<T, W>) -> T {
        self.warn_all(&warned.warnings);
        warned.value
    }

    fn style_stderr(&self, word: &str) -> String {
        if io::stderr().is_terminal() && colors_allowed() {
            format!("\x1b[33m{word}\x1b[0m")
        } else {
            word.to_owned()
        }
    }

    /// Reports a failure: its JSON shape on stdout with `--json`, a sentence on stderr always.
    pub(crate) fn fail(&self, failure: &Failure) -> ExitCode {
        if failure.is_silent() {
            return failure.exit.into();
        }
        if self.is_json() {
            // serde's escaping only: escaping it again for a terminal would break it.
            let _ = self.styled(&format!("{}\n", failure.json()));
        }
        let _ = writeln!(
            io::stderr(),
            "claude-peers: {}: {}",
            failure.name,
            table::field(&failure.message)
        );
        failure.exit.into()
    }
}

/// Whether the user lets this program use colours at all: not when `NO_COLOR` is set to
/// anything but the empty string (no-color.org). The one place that reads it.
pub(crate) fn colors_allowed() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A JSON array written element by element, as they come: the very bytes `serde_json`
/// writes for the whole array collected, and nothing held.
#[derive(Debug, Default)]
pub(crate) struct JsonArray {
    written: usize,
}

impl JsonArray {
    pub(crate) fn push(&mut self, to: &mut impl Write, value: &impl Serialize) -> io::Result<()> {
        to.write_all(if self.written == 0 { b"[" } else { b"," })?;
        serde_json::to_writer(&mut *to, value)?;
        self.written += 1;
        Ok(())
    }

    /// Closes it (an empty one when nothing came), with a newline.
    pub(crate) fn end(self, to: &mut impl Write) -> io::Result<()> {
        to.write_all(if self.written == 0 { b"[]\n" } else { b"]\n" })
    }
}

/// A host's failure as this command reports it: the way there failed (a bad host is a
/// usage error), or the host's own failure, passed on as it said it (its JSON on stdout,
/// marked with its host) under its exit code.
pub(crate) fn host_failed(out: &Output, err: HostError) -> Result<Exit, Failure> {
    let (exit, value) = match err {
        HostError::Way(err) => return Err(Failure::from(err)),
        HostError::Said {
            ref exit,
            ref value,
            ..
        } => (*exit, value),
    };
    if out.is_json() {
        out.json(value)?;
    }
    out.warn(&err.to_string());
    Ok(Exit::of_host(exit))
}

/// Each host's answer to `args` as it printed it (its words, or JSON lines), escaped;
/// under a `== HOST ==` line when there are several. Exit 1 when a host could not be
/// asked (named on stderr), else the worst of their exit codes.
pub(crate) fn passed_on(
    out: &Output,
    hosts: &Hosts,
    args: &[std::ffi::OsString],
) -> Result<Exit, Failure> {
    let mut exit = Exit::Success;
    let several = hosts.list.len() > 1;
    for (host, answer) in hosts.ask_all_text(args) {
        let answer = match answer {
            Ok(answer) => answer,
            Err(err) => {
                out.warn(&err.to_string());
                exit = Exit::Error;
                continue;
            }
        };
        if several {
            out.text(&format!("== {} ==\n", table::field(host.as_str())))?;
        }
        out.text(&table::lines(&String::from_utf8_lossy(&answer.stdout)))?;
        if answer.exit != 0 {
            let _ = write!(io::stderr(), "{}", table::lines(&answer.stderr));
            if exit == Exit::Success {
                exit = Exit::of_host(answer.exit);
            }
        }
    }
    Ok(exit)
}
