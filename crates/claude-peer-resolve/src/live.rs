//! Live sessions as types: what a live scan, resolution and `confirm` hand over.

use std::path::PathBuf;

use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Liveness, Pid, Record, Verdict};

use crate::{Addressability, Discovery, Entry, Error, Scan, Scope, Unaddressable};

/// A live session: a process that runs now, and the record it wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSession {
    /// The entry's path.
    pub file: PathBuf,
    /// The pid of the process running it.
    pub pid: Pid,
    /// Its record.
    pub record: Record,
    /// Whether it can be messaged.
    pub addressability: Addressability,
}

impl LiveSession {
    /// The verdict on every live session, as an [`Entry`] has it.
    pub const VERDICT: Verdict = Verdict {
        liveness: Liveness::Live,
        reason: None,
    };

    /// This session with its socket when it can be messaged; why not otherwise.
    pub(crate) fn addressable(self) -> Result<AddressableSession, Unaddressable> {
        match self.addressability {
            Addressability::Addressable(socket) => Ok(AddressableSession {
                file: self.file,
                pid: self.pid,
                record: self.record,
                socket,
            }),
            Addressability::NotAddressable(reason) => Err(reason),
        }
    }
}

impl TryFrom<Entry> for LiveSession {
    /// The entry as it was, when it is not a live session.
    type Error = Entry;

    fn try_from(session: Entry) -> Result<Self, Entry> {
        match session {
            Entry {
                file,
                pid: Some(pid),
                record: Some(record),
                verdict,
                addressability,
            } if verdict.liveness == Liveness::Live => Ok(Self {
                file,
                pid,
                record,
                addressability,
            }),
            other => Err(other),
        }
    }
}

impl From<LiveSession> for Entry {
    fn from(live: LiveSession) -> Self {
        Self {
            file: live.file,
            pid: Some(live.pid),
            record: Some(live.record),
            verdict: LiveSession::VERDICT,
            addressability: live.addressability,
        }
    }
}

/// A live session that could be messaged when it was last looked at: what resolution and
/// [`Discovery::confirm`] return.
#[derive(Debug, Clone, PartialEq)]
pub struct AddressableSession {
    /// The entry's path.
    pub file: PathBuf,
    /// The pid of the process running it.
    pub pid: Pid,
    /// Its record.
    pub record: Record,
    /// Its messaging socket: a socket owned by this user.
    pub socket: PathBuf,
}

impl From<AddressableSession> for LiveSession {
    fn from(session: AddressableSession) -> Self {
        Self {
            file: session.file,
            pid: session.pid,
            record: session.record,
            addressability: Addressability::Addressable(session.socket),
        }
    }
}

impl From<AddressableSession> for Entry {
    fn from(session: AddressableSession) -> Self {
        LiveSession::from(session).into()
    }
}

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// Reads the registry afresh and gives its live sessions, as
    /// [`Discovery::scan`]`(home, Scope::Live)` judges them.
    pub fn live(&self, home: &ClaudeHome) -> Result<Scan<LiveSession>, Error> {
        let entries = self.entries(home, Scope::Live)?;
        let warnings = entries.warnings().to_vec();
        Ok(Scan {
            // A live-only scan gives live entries alone: nothing is left out here.
            entries: entries
                .filter_map(|s| LiveSession::try_from(s).ok())
                .collect(),
            warnings,
        })
    }
}
