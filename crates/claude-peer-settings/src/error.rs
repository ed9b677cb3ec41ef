//! The crate's one error type.

use std::io;
use std::path::PathBuf;

use crate::revision::{InvalidRevision, Revision};

/// Everything that can go wrong reading or changing a settings file.
///
/// Messages are lower-case, name the path, and quote a bad value; [`Error::as_str`] gives a
/// stable machine name for clients that match on the kind (e.g. `conflict`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file (or its directory, or the lock file) could not be read or opened.
    #[error("cannot read `{path}`: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The file is not valid JSON; it was left untouched.
    #[error("`{path}` is not valid JSON: {message}")]
    InvalidJson {
        /// The file.
        path: PathBuf,
        /// The parser's description, with line and column.
        message: String,
    },
    /// The file's top level is valid JSON but not an object; it was left untouched.
    #[error("`{path}` holds {found} at the top level, not an object")]
    NotAnObject {
        /// The file.
        path: PathBuf,
        /// What it holds instead (`an array`, `a string`, `a number`, `a boolean`, `null`).
        found: &'static str,
    },
    /// `crossSessionInbound` holds something other than `"accept"`, `"hold"` or `"refuse"`.
    #[error(
        "`{path}`: crossSessionInbound is `{value}`, expected \"accept\", \"hold\" or \"refuse\""
    )]
    InvalidValue {
        /// The file.
        path: PathBuf,
        /// The value's JSON text, as written in the file.
        value: String,
    },
    /// The file is over 16 MiB; it was not read (beyond the limit).
    #[error(
        "refusing `{path}`: it is {size} bytes, over the {limit} bytes a settings file may have"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes (at least this much).
        size: u64,
        /// The limit, 16 MiB.
        limit: u64,
    },
    /// The settings path is a symbolic link; it and its target were left untouched.
    #[error("refusing to update `{path}`: it is a symbolic link")]
    Symlink {
        /// The settings path.
        path: PathBuf,
    },
    /// The settings path exists but is not a regular file.
    #[error("refusing to update `{path}`: it is {kind}, not a regular file")]
    NotRegularFile {
        /// The settings path.
        path: PathBuf,
        /// What it is (`a directory`, `a fifo`, ...).
        kind: &'static str,
    },
    /// The file changed since `expected` was read (by the caller, or by us just before the
    /// rename); nothing was written.
    #[error("`{path}` changed: expected revision {expected}, found {found}; nothing was written")]
    Conflict {
        /// The settings path.
        path: PathBuf,
        /// The revision the update was based on.
        expected: Revision,
        /// The revision the file had when the change was seen.
        found: Revision,
    },
    /// Writing failed before the settings file was replaced; it holds its old bytes.
    #[error("cannot {action} `{path}`: {source}")]
    Write {
        /// What was being done (`lock`, which creates a missing directory too,
        /// `write temporary file`, `rename to`).
        action: &'static str,
        /// The path acted on.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The settings file was replaced with the new bytes, but its directory could not be
    /// fsynced, so the change may not survive a power loss.
    #[error("updated `{path}` but cannot sync its directory: {source}")]
    NotDurable {
        /// The settings path.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A `managed-settings.d` folder holds more drop-in documents than are read; none of
    /// them was read.
    #[error("refusing `{dir}`: it holds more than {limit} drop-in documents (*.json)")]
    TooManyDropIns {
        /// The drop-in folder.
        dir: PathBuf,
        /// The most drop-ins read.
        limit: usize,
    },
    /// A policy name other than `accept`, `hold` or `refuse`.
    #[error("unknown inbound policy `{value}`, expected accept, hold or refuse")]
    UnknownPolicy {
        /// The text given.
        value: String,
    },
    /// A revision that is not 64 lower-case hex digits.
    #[error(transparent)]
    InvalidRevision(#[from] InvalidRevision),
}

impl Error {
    /// A stable `snake_case` name for the kind of error.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Error::Read { .. } => "read_failed",
            Error::InvalidJson { .. } => "invalid_json",
            Error::NotAnObject { .. } => "not_an_object",
            Error::InvalidValue { .. } => "invalid_value",
            Error::TooLarge { .. } => "too_large",
            Error::Symlink { .. } => "symlink",
            Error::NotRegularFile { .. } => "not_a_regular_file",
            Error::Conflict { .. } => "conflict",
            Error::Write { .. } => "write_failed",
            Error::NotDurable { .. } => "not_durable",
            Error::TooManyDropIns { .. } => "too_many_drop_ins",
            Error::UnknownPolicy { .. } => "unknown_policy",
            Error::InvalidRevision(_) => "invalid_revision",
        }
    }
}
