//! The crate's one error type.

use crate::{Refusal, RefusalKind};

/// Why a message was not delivered.
///
/// Clients match on [`Error::as_str`]: a refusal's kind (`not_live`, `identity_mismatch`,
/// `not_addressable`, `inbound_refused`, `delivery_failed`) or one of this crate's own
/// names (`empty_message`, `message_too_large`, `registry`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The message is empty or only whitespace; nothing was resolved or relayed.
    #[error("the message is empty; nothing was relayed")]
    EmptyMessage,
    /// The message is above [`MAX_MESSAGE_BYTES`](crate::MAX_MESSAGE_BYTES); nothing was
    /// resolved or relayed.
    #[error(
        "the message is {len} bytes, above the limit of {limit} bytes (64 KiB); nothing was relayed"
    )]
    MessageTooLarge {
        /// The message's length in bytes.
        len: usize,
        /// The limit in bytes.
        limit: usize,
    },
    /// The send was refused: the session is not the one asked for, cannot be messaged,
    /// refuses messages, or the relay did not confirm.
    #[error("{0}")]
    Refused(Refusal),
    /// The registry could not be read (never a refusal: those are [`Error::Refused`]).
    #[error(transparent)]
    Discovery(claude_peer_resolve::Error),
}

impl Error {
    /// The refusal, when this error is one.
    #[must_use]
    pub const fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused(refusal) => Some(refusal),
            _ => None,
        }
    }

    /// The refusal's kind, when this error is one.
    #[must_use]
    pub fn refusal_kind(&self) -> Option<RefusalKind> {
        self.refusal().map(|refusal| refusal.kind)
    }

    /// The stable machine name of this error.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::EmptyMessage => "empty_message",
            Self::MessageTooLarge { .. } => "message_too_large",
            Self::Refused(refusal) => refusal.kind.as_str(),
            Self::Discovery(_) => "registry",
        }
    }

    pub(crate) fn refused(kind: RefusalKind, message: String) -> Self {
        Self::Refused(Refusal {
            kind,
            message,
            standing: false,
            uncertain: false,
        })
    }
}

impl From<claude_peer_resolve::Error> for Error {
    fn from(err: claude_peer_resolve::Error) -> Self {
        match err {
            claude_peer_resolve::Error::Refused(refusal) => Self::Refused(refusal.into()),
            other => Self::Discovery(other),
        }
    }
}
