//! Why a transcript cannot be found or followed. Each is reported, never skipped: the
//! caller then rests its answer on other evidence.

use std::io;
use std::path::PathBuf;

/// A transcript that cannot be found or followed (any more).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Not a session id (ASCII letters, digits and `-`): never made into a path.
    #[error("`{0}` is not a session id (ASCII letters, digits and `-`)")]
    SessionId(String),
    /// The file is now shorter than what was read: rewritten in place, not appended.
    #[error("the transcript `{path}` shrank below what was already read", path = path.display())]
    Truncated {
        /// The transcript.
        path: PathBuf,
    },
    /// The path now names another file than the one followed, or none.
    #[error("the transcript `{path}` was replaced or removed", path = path.display())]
    Replaced {
        /// The transcript.
        path: PathBuf,
    },
    /// A symbolic link, not a regular file, or owned by another user.
    #[error("`{path}` is not this user's transcript: {why}", path = path.display())]
    NotOurs {
        /// What was found where a transcript (or the `projects` directory) was looked for.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// Reading the transcript or its directory failed.
    #[error("cannot read `{path}`: {source}", path = path.display())]
    Io {
        /// What was being read.
        path: PathBuf,
        /// The failure.
        source: io::Error,
    },
}

impl Error {
    /// A stable machine name for the error, for clients that match on it.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::SessionId(_) => "session_id",
            Self::Truncated { .. } => "truncated",
            Self::Replaced { .. } => "replaced",
            Self::NotOurs { .. } => "not_ours",
            Self::Io { .. } => "io",
        }
    }

    /// The same error again: a follower that failed keeps failing the same way.
    pub(crate) fn again(&self) -> Self {
        match self {
            Self::SessionId(id) => Self::SessionId(id.clone()),
            Self::Truncated { path } => Self::Truncated { path: path.clone() },
            Self::Replaced { path } => Self::Replaced { path: path.clone() },
            Self::NotOurs { path, why } => Self::NotOurs {
                path: path.clone(),
                why: why.clone(),
            },
            Self::Io { path, source } => Self::Io {
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: impl Into<io::Error>) -> Self {
        Self::Io {
            path: path.into(),
            source: source.into(),
        }
    }
}
