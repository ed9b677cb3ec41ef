//! The crate's one error type.

use std::io;
use std::path::PathBuf;

use claude_peer_deliver::Refusal;

/// Why a sender could not start or serve a send, or why a mailbox's send was not
/// delivered.
///
/// Clients match on [`Error::as_str`]: a delivery's own name (a refusal such as
/// `not_live`, or `empty_message`, …) for [`Error::Delivery`], `sender_failed` for the
/// rest.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The gate refused the send, or the relay did not confirm it.
    #[error(transparent)]
    Delivery(#[from] claude_peer_deliver::Error),
    /// No base directory for the private sender home.
    #[error("no sender home: set XDG_RUNTIME_DIR, XDG_CACHE_HOME or HOME")]
    NoHome,
    /// The private sender home could not be made ready.
    #[error("cannot prepare the sender home `{}`: {source}", path.display())]
    Home {
        /// The home.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// No directory for this run's plans could be created.
    #[error("cannot create a run directory in `{}`: {source}", path.display())]
    RunDir {
        /// The sender home it was to be made in.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// The per-run secret could not be drawn.
    #[error("cannot read /dev/urandom: {0}")]
    Random(io::Error),
    /// The scripted model endpoint could not listen.
    #[error("cannot start the scripted model endpoint: {0}")]
    Endpoint(io::Error),
    /// Claude Code could not be started.
    #[error("cannot start Claude Code `{}`: {source}", claude.display())]
    Spawn {
        /// The Claude Code binary.
        claude: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// A send's plan could not be written for the guard hook.
    #[error("cannot write the plan of the send: {0}")]
    Plan(io::Error),
    /// Claude Code did not take the send request on its stdin.
    #[error("Claude Code did not take the send request on its stdin: {0}")]
    Stdin(io::Error),
    /// Claude Code did not begin a turn, so what it can do is unknown.
    #[error("Claude Code did not begin a turn: {0}")]
    NoTurn(String),
    /// Managed settings keep the hooks that guard the sender from running.
    #[error(
        "the managed settings `{}` set `{setting}`, which keeps the hooks that guard the sender from running; nothing was sent",
        path.display()
    )]
    HooksOff {
        /// The managed settings document.
        path: PathBuf,
        /// The setting.
        setting: &'static str,
    },
    /// The sender's name cannot be shown to receivers as it is.
    #[error("the sender name `{name}` is not allowed: {why}")]
    SenderName {
        /// The name, escaped.
        name: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The mailbox's sender has ended; nothing more can be sent through it.
    #[error("the mailbox's sender has ended")]
    Ended,
}

impl Error {
    /// The refusal, when this error is one.
    #[must_use]
    pub const fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Delivery(err) => err.refusal(),
            _ => None,
        }
    }

    /// The stable machine name of this error.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Delivery(err) => err.as_str(),
            Self::SenderName { .. } => "invalid_sender_name",
            Self::HooksOff { .. } => "hooks_disabled",
            _ => "sender_failed",
        }
    }
}
