//! Whether a live session can be messaged, and if not, why: a reason per cause, each
//! with a stable name for clients to match on and the words a person reads.

use std::fmt;
use std::path::PathBuf;

use claude_peer_probe::FileKind;
use claude_peer_registry::Liveness;

/// Whether a live session can be messaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addressability {
    /// A live session with its own messaging socket (this path), owned by this user.
    Addressable(PathBuf),
    /// Why it cannot be messaged.
    NotAddressable(Unaddressable),
}

impl Addressability {
    /// True when the session can be messaged.
    #[must_use]
    pub const fn is_addressable(&self) -> bool {
        matches!(self, Self::Addressable(_))
    }
}

/// Why a session cannot be messaged. Clients match on [`Unaddressable::as_str`]; it
/// prints the words a refusal quotes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unaddressable {
    /// The entry is not a live session at all.
    NotLive(Liveness),
    /// A pre-warmed spare process, not a user session.
    Spare,
    /// Parked as a background job, not a messaging peer.
    Parked {
        /// The job's id, as the record gives it (JSON).
        job: String,
    },
    /// Its record names no messaging socket (Claude Code before peer messaging).
    NoSocket,
    /// The socket its record names does not exist.
    SocketMissing {
        /// The socket's path, as the record names it.
        socket: String,
    },
    /// The socket belongs to another user.
    SocketNotOwned {
        /// The socket's path.
        socket: String,
        /// Its owner.
        owner: u32,
        /// This reader's uid.
        uid: u32,
    },
    /// The socket's directory is not this user's alone: another could put a socket of
    /// theirs at its path.
    SocketDirUnsafe {
        /// The socket's path.
        socket: String,
        /// What is wrong with its directory.
        why: String,
    },
    /// The path is there but is no socket.
    NotASocket {
        /// The path, as the record names it.
        socket: String,
        /// What it is instead.
        kind: FileKind,
    },
    /// `lstat` of the socket failed.
    SocketUnreadable {
        /// The socket's path.
        socket: String,
        /// What the OS said.
        error: String,
    },
}

impl Unaddressable {
    /// The stable machine name of this reason.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::NotLive(_) => "not_live",
            Self::Spare => "spare",
            Self::Parked { .. } => "parked",
            Self::NoSocket => "no_socket",
            Self::SocketMissing { .. } => "socket_missing",
            Self::SocketNotOwned { .. } => "socket_not_owned",
            Self::SocketDirUnsafe { .. } => "socket_dir_unsafe",
            Self::NotASocket { .. } => "not_a_socket",
            Self::SocketUnreadable { .. } => "socket_unreadable",
        }
    }
}

impl fmt::Display for Unaddressable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotLive(liveness) => write!(f, "not live ({liveness})"),
            Self::Spare => f.write_str("a pre-warmed spare process, not a user session"),
            Self::Parked { job } => write!(f, "parked as background job {job}"),
            Self::NoSocket => f.write_str(
                "its record names no messaging socket (Claude Code before peer messaging)",
            ),
            Self::SocketMissing { socket } => {
                write!(f, "its messaging socket `{socket}` does not exist")
            }
            Self::SocketNotOwned { socket, owner, uid } => write!(
                f,
                "its messaging socket `{socket}` belongs to uid {owner}, not to this user (uid {uid})"
            ),
            Self::SocketDirUnsafe { socket, why } => {
                write!(f, "the directory of its messaging socket `{socket}` {why}")
            }
            Self::NotASocket { socket, kind } => {
                write!(f, "`{socket}` is a {}, not a socket", kind.as_str())
            }
            Self::SocketUnreadable { socket, error } => {
                write!(f, "cannot look at its messaging socket `{socket}`: {error}")
            }
        }
    }
}
