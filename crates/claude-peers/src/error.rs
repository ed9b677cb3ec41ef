//! The command's one error type, [`Failure`], and the exit codes every failure maps to
//! (its JSON shape is `json/`'s). A failure is made here, at the edge, from an
//! operation's typed error ([`ops::Error`]) or the command's own.

use std::io;
use std::process::ExitCode;

use crate::ops;

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Success = 0,
    Error = 1,
    /// A value the command cannot take, found past its parser (a search it cannot run, a
    /// `config.toml` it cannot use).
    Usage = 2,
    Refusal = 3,
    Conflict = 4,
    /// Stopped by SIGINT.
    Interrupted = 130,
    /// Stopped by SIGTERM.
    Terminated = 143,
}

impl Exit {
    /// What a host's `claude-peers` exit code means here (1 for what it cannot mean).
    pub(crate) const fn of_host(code: i32) -> Self {
        match code {
            0 => Self::Success,
            2 => Self::Usage,
            3 => Self::Refusal,
            4 => Self::Conflict,
            _ => Self::Error,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> Self {
        Self::from(exit as u8)
    }
}

/// A command that did not succeed: how to exit and what to say.
#[derive(Debug, Clone)]
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

    /// A value the command cannot take, exit 2.
    pub(crate) fn usage(name: &'static str, message: impl Into<String>) -> Self {
        Self {
            exit: Exit::Usage,
            ..Self::error(name, message)
        }
    }

    /// Whether there is nobody to tell: stdout's reader has gone.
    pub(crate) fn is_silent(&self) -> bool {
        self.exit == Exit::Success
    }

    /// The refusal `refusal`, exit 3.
    fn refusal(refusal: &claude_peer_deliver::Refusal) -> Self {
        Self {
            exit: Exit::Refusal,
            key: "refusal",
            name: refusal.kind.as_str(),
            message: refusal.message.clone(),
        }
    }
}

/// An operation's error as the command reports it: a refusal exits 3 with its kind,
/// anything else exits 1 (4 for a settings conflict, 3 outside a session) under the
/// error's stable name.
impl From<&ops::Error> for Failure {
    fn from(err: &ops::Error) -> Self {
        if let Some(refusal) = err.refusal() {
            return Self::refusal(&refusal);
        }
        let exit = match err {
            ops::Error::Settings(claude_peer_settings::Error::Conflict { .. }) => Exit::Conflict,
            ops::Error::NotInASession(_) => Exit::Refusal,
            ops::Error::Post(claude_peer_post::Error::Search { .. }) => Exit::Usage,
            _ => Exit::Error,
        };
        Self {
            exit,
            key: "error",
            name: err.as_str(),
            message: err.to_string(),
        }
    }
}

impl From<ops::Error> for Failure {
    fn from(err: ops::Error) -> Self {
        Self::from(&err)
    }
}

/// The user's `config.toml` cannot be used: a value the command cannot take, exit 2.
impl From<crate::config::Error> for Failure {
    fn from(err: crate::config::Error) -> Self {
        Self::usage("config_invalid", err.to_string())
    }
}

impl From<claude_peer_remote::Error> for Failure {
    fn from(err: claude_peer_remote::Error) -> Self {
        let make = match err {
            claude_peer_remote::Error::BadHost { .. }
            | claude_peer_remote::Error::HostsFile { .. } => Self::usage,
            _ => Self::error,
        };
        make(err.as_str(), err.to_string())
    }
}

impl From<claude_peer_sender::Error> for Failure {
    fn from(err: claude_peer_sender::Error) -> Self {
        ops::Error::from(err).into()
    }
}

impl From<claude_peer_watch::Error> for Failure {
    fn from(err: claude_peer_watch::Error) -> Self {
        ops::Error::from(err).into()
    }
}

/// Writing to stdout failed. Its reader having gone is no failure worth a word: the
/// command ends with success and says nothing (see [`Failure::is_silent`]).
impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Self {
        if err.kind() == io::ErrorKind::BrokenPipe {
            Self {
                exit: Exit::Success,
                key: "error",
                name: "reader_gone",
                message: err.to_string(),
            }
        } else {
            Self::error("output_failed", format!("cannot write to stdout: {err}"))
        }
    }
}
