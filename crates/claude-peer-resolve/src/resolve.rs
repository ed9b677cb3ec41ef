//! Resolving one session afresh, and the words of its refusals.

use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;

use crate::{AddressableSession, Discovery, Entry, Error, LiveSession, RefusalKind, Scope};

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// The one live, addressable session `session` names now: its id, or else the name
    /// of exactly one live session ([`crate::Roster::resolve`], with its refusals).
    ///
    /// Reads the registry afresh on every call: an earlier scan says nothing about now.
    pub fn resolve_live_session(
        &self,
        home: &ClaudeHome,
        session: &str,
    ) -> Result<AddressableSession, Error> {
        self.roster(home, Scope::Live)?.resolve(session)
    }
}

/// Explains why no live process runs `session_id`, from every entry of the registry.
pub(crate) fn why_not_live(all: &[Entry], session_id: &str) -> String {
    if let Some(entry) = all
        .iter()
        .find(|s| s.record.as_ref().map(|r| r.session_id.as_str()) == Some(session_id))
    {
        let pid = entry.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
        let reason = entry.verdict.reason.as_deref().unwrap_or("not live");
        return format!(
            "no live process runs session {session_id}: its record for pid {pid} is {} ({reason})",
            entry.verdict.liveness
        );
    }
    let renamed = all
        .iter()
        .filter_map(|s| LiveSession::try_from(s.clone()).ok())
        .find(|s| {
            s.record
                .former_names
                .iter()
                .flatten()
                .any(|f| f.session_id.as_deref() == Some(session_id))
        });
    match renamed {
        Some(live) => format!(
            "no live process runs session {session_id}: pid {} ran it but now runs session {} (after /clear or resume)",
            live.pid, live.record.session_id
        ),
        None => format!("no live process runs session {session_id}, and no record names it"),
    }
}

/// The sessions as a refusal lists them.
pub(crate) fn describe(sessions: &[&LiveSession]) -> String {
    sessions
        .iter()
        .map(|s| format!("pid {} (session {})", s.pid, s.record.session_id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The session with its socket, or a `not_addressable` refusal saying why not.
pub(crate) fn addressable_or_refused(session: LiveSession) -> Result<AddressableSession, Error> {
    let id = session.record.session_id.clone();
    session.addressable().map_err(|why| {
        Error::refused(
            RefusalKind::NotAddressable,
            format!("session {id} is live but cannot be messaged: {why}"),
        )
    })
}
