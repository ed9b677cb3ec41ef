/// Why a registry entry is not a usable record.
///
/// Every variant has a stable `snake_case` name ([`Rejection::as_str`]) that clients
/// may match on; the `Display` text is for people and says what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// A `*.json` name whose stem is not a decimal number (`abc.json`, `-1.json`).
    #[error("`{name}` is not named `<pid>.json` with a decimal pid")]
    NameNotDecimal {
        /// The file name, lossily decoded.
        name: String,
    },
    /// A decimal stem with a leading zero (`007.json`): not the name Claude Code writes.
    #[error("`{name}` has a leading zero; Claude Code names records by canonical pid")]
    NameLeadingZero {
        /// The file name.
        name: String,
    },
    /// A decimal stem outside `2..=2147483647` (`0.json`, `1.json`, `4294967295.json`).
    #[error("`{name}` names a pid outside 2..=2147483647")]
    NamePidOutOfRange {
        /// The file name.
        name: String,
    },
    /// The entry is not a regular file (a directory, FIFO, device, socket or symlink).
    #[error("not a regular file but a {file_type}; only regular files are records")]
    NotRegularFile {
        /// What the entry is, e.g. `fifo` or `symlink`.
        file_type: String,
    },
    /// The file is owned by another user than the registry directory.
    #[error("owned by uid {owner}, but the registry directory belongs to uid {expected}")]
    OwnerMismatch {
        /// The file's owner.
        owner: u32,
        /// The registry directory's owner.
        expected: u32,
    },
    /// More bytes than Claude Code's own reader accepts.
    #[error("larger than {limit} bytes", limit = crate::MAX_RECORD_BYTES)]
    TooLarge,
    /// An empty file: usually a record caught mid-rewrite.
    #[error("the file is empty (a record being rewritten, or left by a crash mid-write)")]
    Empty,
    /// Not JSON: a torn write, or not a record at all.
    #[error("not valid JSON: {detail}")]
    MalformedJson {
        /// The parser's message, with line and column.
        detail: String,
    },
    /// Valid JSON whose top level is not an object.
    #[error("the top level is {found}, not an object")]
    NotAnObject {
        /// The JSON type found, e.g. `an array`.
        found: &'static str,
    },
    /// No `sessionId` member, or `null`.
    #[error("no `sessionId`")]
    MissingSessionId,
    /// A `sessionId` that is not a non-empty string.
    #[error("`sessionId` is {found}, not a non-empty string")]
    InvalidSessionId {
        /// What was there, e.g. `a number` or `an empty string`.
        found: &'static str,
    },
    /// The body's `pid` differs from the pid in the file name.
    #[error("the file is named for pid {file_pid} but its body says pid {body_pid}")]
    PidMismatch {
        /// The pid from the file name, which readers trust.
        file_pid: u32,
        /// The body's `pid`, as written.
        body_pid: String,
    },
}

impl Rejection {
    /// The stable machine name of this rejection.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::NameNotDecimal { .. } => "name_not_decimal",
            Self::NameLeadingZero { .. } => "name_leading_zero",
            Self::NamePidOutOfRange { .. } => "name_pid_out_of_range",
            Self::NotRegularFile { .. } => "not_regular_file",
            Self::OwnerMismatch { .. } => "owner_mismatch",
            Self::TooLarge => "too_large",
            Self::Empty => "empty",
            Self::MalformedJson { .. } => "malformed_json",
            Self::NotAnObject { .. } => "not_an_object",
            Self::MissingSessionId => "missing_session_id",
            Self::InvalidSessionId { .. } => "invalid_session_id",
            Self::PidMismatch { .. } => "pid_mismatch",
        }
    }

    /// True when the bytes did not parse as JSON at all: what a reader sees while
    /// Claude Code truncates and rewrites a record in place. Such a record is worth
    /// reading again; any other rejection is final.
    #[must_use]
    pub const fn is_torn(&self) -> bool {
        matches!(self, Self::Empty | Self::MalformedJson { .. })
    }
}
