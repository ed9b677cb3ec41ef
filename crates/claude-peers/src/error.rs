//! The command's one error type, [`Failure`], and the exit codes every failure maps to
//! (its JSON shape is `json.rs`'s).

use std::io;
use std::process::ExitCode;

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Exit {
    Success = 0,
    Error = 1,
    Refusal = 3,
    Conflict = 4,
    /// Stopped by SIGINT.
    Interrupted = 130,
    /// Stopped by SIGTERM.
    Terminated = 143,
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

    /// Whether there is nobody to tell: stdout's reader has gone.
    pub(crate) fn is_silent(&self) -> bool {
        self.exit == Exit::Success
    }

    /// The refusal `refusal`, exit 3.
    pub(crate) fn refusal(refusal: &claude_peer_resolve::Refusal) -> Self {
        Self {
            exit: Exit::Refusal,
            key: "refusal",
            name: refusal.kind.as_str(),
            message: refusal.message.clone(),
        }
    }
}

impl From<claude_peer_resolve::Error> for Failure {
    fn from(err: claude_peer_resolve::Error) -> Self {
        match err.refusal() {
            Some(refusal) => Self::refusal(refusal),
            None => Self::error("registry_unreadable", err.to_string()),
        }
    }
}

impl From<claude_peer_deliver::Error> for Failure {
    fn from(err: claude_peer_deliver::Error) -> Self {
        match err {
            claude_peer_deliver::Error::Discovery(err) => err.into(),
            err => match err.refusal() {
                Some(refusal) => Self::refusal(refusal),
                None => Self::error(err.as_str(), err.to_string()),
            },
        }
    }
}

impl From<claude_peer_sender::Error> for Failure {
    fn from(err: claude_peer_sender::Error) -> Self {
        match err {
            claude_peer_sender::Error::Delivery(err) => err.into(),
            err => Self::error(err.as_str(), err.to_string()),
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

impl From<claude_peer_watch::Error> for Failure {
    fn from(err: claude_peer_watch::Error) -> Self {
        match err {
            claude_peer_watch::Error::Scan(err) => err.into(),
            err => Self::error("watch_failed", err.to_string()),
        }
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
