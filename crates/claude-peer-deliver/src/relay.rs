//! What a relay is handed and what it answers.

use std::fmt;
use std::path::{Path, PathBuf};

use claude_peer_registry::{ClaudeHome, Pid};
use claude_peer_resolve::{AddressableSession, Identity};
use serde::{Deserialize, Serialize};

use crate::{Receipt, RefusalKind};

/// The address of the one session a message goes to, as handed to a relay.
///
/// Built from the session as confirmed immediately before the hand-over. A name shared
/// with another live session has already been refused, so `name` alone addresses it.
/// It serializes, so a relay that checks again in another process (the sender's guard
/// hook) carries it whole and confirms it by the same rule ([`Recipient::identity`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    /// The session's name, its cross-session address; `None` when its record gives none.
    pub name: Option<String>,
    /// The session id.
    pub session_id: String,
    /// The pid of the Claude Code process running it.
    pub pid: Pid,
    /// Its messaging socket (`messagingSocketPath`). Relays send through Claude Code's
    /// own messaging; this project never writes to the socket.
    pub socket: PathBuf,
    /// Its working directory.
    pub cwd: PathBuf,
    /// The start token its record names (`procStart`), when it names one.
    pub proc_start: Option<String>,
    /// The Claude home whose registry lists it, where a last check can find it again.
    pub home: PathBuf,
}

impl Recipient {
    /// `session` of `home` as a recipient, whose inbound policy was read for `cwd`, its
    /// absolute working directory.
    pub(crate) fn new(home: &ClaudeHome, session: &AddressableSession, cwd: &Path) -> Self {
        let record = &session.record;
        Self {
            name: record.name.clone(),
            session_id: record.session_id.clone(),
            pid: session.pid,
            socket: session.socket.clone(),
            cwd: cwd.to_path_buf(),
            proc_start: record.start_token().map(str::to_owned),
            home: home.root().to_path_buf(),
        }
    }

    /// What [`Discovery::confirm`](claude_peer_resolve::Discovery::confirm) compares to
    /// tell that this recipient still runs, unchanged.
    #[must_use]
    pub fn identity(&self) -> Identity<'_> {
        Identity {
            session_id: &self.session_id,
            pid: self.pid,
            proc_start: self.proc_start.as_deref(),
            name: self.name.as_deref(),
            socket: &self.socket,
        }
    }
}

/// A relay's confirmation that it sent the message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confirmation {
    /// What the relay said about the send, if anything.
    pub detail: Option<String>,
    /// What the receiver did with it and how that is known, when the relay can tell;
    /// `None` for a relay that cannot see receipts.
    pub receipt: Option<Receipt>,
    /// Claude Code's id of the sent message, when the relay knows it.
    pub msg_id: Option<String>,
}

/// A relay's failure to confirm a send, in its own words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayFailure {
    kind: RefusalKind,
    message: String,
    uncertain: bool,
}

impl RelayFailure {
    /// A failure saying `message`: the refusal `delivery_failed`.
    pub fn new(message: impl Into<String>) -> Self {
        Self::refused(RefusalKind::DeliveryFailed, message)
    }

    /// A refusal the relay learned of itself: the receiver refused the message
    /// (`inbound_refused`), or the target changed at the last moment (`not_live`, …).
    pub fn refused(kind: RefusalKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            uncertain: false,
        }
    }

    /// A failure after which the message may have gone all the same (the relay timed
    /// out, crashed or ended mid-send): `delivery_failed`, but sending it again could
    /// deliver it twice.
    pub fn uncertain(message: impl Into<String>) -> Self {
        Self {
            uncertain: true,
            ..Self::new(message)
        }
    }

    /// Whether the message may have gone despite the failure.
    #[must_use]
    pub const fn is_uncertain(&self) -> bool {
        self.uncertain
    }

    /// Which refusal this failure is.
    #[must_use]
    pub const fn kind(&self) -> RefusalKind {
        self.kind
    }

    /// What the relay said.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for RelayFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Hands one message to one session, through Claude Code's own messaging.
///
/// This project decides whether a send may happen and to whom; a relay (owned by the
/// harness) does the sending. [`CommandRelay`](crate::CommandRelay) runs a program.
pub trait Relay {
    /// Sends `message` to `target`, returning once the send is confirmed or has failed.
    /// Implementations must return in bounded time: nothing else interrupts them.
    fn send(&self, target: &Recipient, message: &str) -> Result<Confirmation, RelayFailure>;
}

impl<R: Relay + ?Sized> Relay for &R {
    fn send(&self, target: &Recipient, message: &str) -> Result<Confirmation, RelayFailure> {
        (**self).send(target, message)
    }
}
