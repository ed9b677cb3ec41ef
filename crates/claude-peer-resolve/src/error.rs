use std::fmt;
use std::io;
use std::path::PathBuf;

/// Why a target was not resolved to one live session that can be messaged. Clients
/// match on [`RefusalKind::as_str`]; the delivery gate adds its own refusals to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// No live process runs that session now.
    NotLive,
    /// The session's name (or id) is held by more than one live session.
    IdentityMismatch,
    /// Live, but it cannot be messaged.
    NotAddressable,
}

impl RefusalKind {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::NotLive => "not_live",
            Self::IdentityMismatch => "identity_mismatch",
            Self::NotAddressable => "not_addressable",
        }
    }

    /// The refusal whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::NotLive, Self::IdentityMismatch, Self::NotAddressable]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// A refusal to resolve, with a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which refusal.
    pub kind: RefusalKind,
    /// What was found, naming pids, names and paths.
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

/// The errors of discovery and resolution.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The registry directory exists but cannot be listed.
    #[error("cannot list the registry directory `{path}`: {source}", path = path.display())]
    Registry {
        /// The registry directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The session cannot be resolved safely.
    #[error("{0}")]
    Refused(Refusal),
}

impl Error {
    /// The refusal `kind`, saying `message`.
    pub(crate) const fn refused(kind: RefusalKind, message: String) -> Self {
        Self::Refused(Refusal { kind, message })
    }

    /// The refusal, when this error is one.
    #[must_use]
    pub const fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused(refusal) => Some(refusal),
            Self::Registry { .. } => None,
        }
    }
}
