//! Where output goes: JSON or human text on stdout, diagnostics on stderr, and the
//! exit codes every failure maps to.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use serde::Serialize;

use crate::view::Style;

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Success = 0,
    Error = 1,
    Refusal = 3,
    Conflict = 4,
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        Self::from(exit as u8)
    }
}

/// A command that did not succeed: how to exit and what to say.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) exit: Exit,
    /// The JSON key naming the failure: `error` or `refusal`.
    pub(crate) key: &'static str,
    /// Its stable machine name.
    pub(crate) name: &'static str,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn error(name: &'static str, message: impl Into<String>) -> Self {
        Self {
            exit: Exit::Error,
            key: "error",
            name,
            message: message.into(),
        }
    }
}

impl Failure {
    /// Its JSON shape, `{"refusal"|"error": name, "message": …}`; written by hand to keep
    /// the documented key order: the name first, then the message.
    pub(crate) fn json(&self) -> String {
        format!(
            "{{{}:{},\"message\":{}}}",
            serde_json::Value::from(self.key),
            serde_json::Value::from(self.name),
            serde_json::Value::from(self.message.as_str())
        )
    }
}

impl From<claude_peer_resolve::Error> for Failure {
    fn from(err: claude_peer_resolve::Error) -> Self {
        match err.refusal() {
            Some(refusal) => Self {
                exit: Exit::Refusal,
                key: "refusal",
                name: refusal.kind.as_str(),
                message: refusal.message.clone(),
            },
            None => Self::error("registry_unreadable", err.to_string()),
        }
    }
}

impl From<claude_peer_relay::Error> for Failure {
    fn from(err: claude_peer_relay::Error) -> Self {
        match err {
            claude_peer_relay::Error::Discovery(err) => err.into(),
            err => match err.refusal() {
                Some(refusal) => Self {
                    exit: Exit::Refusal,
                    key: "refusal",
                    name: refusal.kind.as_str(),
                    message: refusal.message.clone(),
                },
                None => Self::error(err.as_str(), err.to_string()),
            },
        }
    }
}

impl From<claude_peer_settings::Error> for Failure {
    fn from(err: claude_peer_settings::Error) -> Self {
        let exit = if matches!(err, claude_peer_settings::Error::Conflict { .. }) {
            Exit::Conflict
        } else {
            Exit::Error
        };
        Self {
            exit,
            key: "error",
            name: err.as_str(),
            message: err.to_string(),
        }
    }
}

/// The output channel of one invocation.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) json: bool,
    pub(crate) style: Style,
}

#[allow(
    clippy::unused_self,
    reason = "all output goes through the invocation's Output, whatever it needs of it"
)]
impl Output {
    pub(crate) fn new(json: bool) -> Self {
        let color = !json
            && io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Self {
            json,
            style: Style { color },
        }
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

    /// Prints human text as is.
    pub(crate) fn text(&self, text: &str) -> io::Result<()> {
        let mut stdout = io::stdout().lock();
        stdout.write_all(text.as_bytes())?;
        stdout.flush()
    }

    /// A warning on stderr, in both modes.
    pub(crate) fn warn(&self, message: &str) {
        let _ = writeln!(io::stderr(), "{}: {message}", self.style_stderr("warning"));
    }

    fn style_stderr(&self, word: &str) -> String {
        if io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) {
            format!("\x1b[33m{word}\x1b[0m")
        } else {
            word.to_owned()
        }
    }

    /// Reports a failure: its JSON shape on stdout with `--json`, a sentence on stderr always.
    pub(crate) fn fail(&self, failure: &Failure) -> ExitCode {
        if self.json {
            let _ = self.text(&format!("{}\n", failure.json()));
        }
        let _ = writeln!(
            io::stderr(),
            "claude-peers: {}: {}",
            failure.name,
            failure.message
        );
        failure.exit.into()
    }
}
