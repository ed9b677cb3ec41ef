use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;

use crate::{AddressableSession, Discovery, Error, LiveSession, RefusalKind, Scope};

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// The one live, addressable session running `session_id` now.
    ///
    /// Reads the registry afresh on every call: an earlier scan says nothing about now.
    /// Refuses with `not_live` when no live process runs the id (after a `/clear`, a
    /// crash, a reused pid), `identity_mismatch` when its name is also held by another
    /// live session (a message by name could reach the wrong reader), and
    /// `not_addressable` when it is live but cannot be messaged.
    pub fn resolve_live_session(
        &self,
        home: &ClaudeHome,
        session_id: &str,
    ) -> Result<AddressableSession, Error> {
        let live = self.live(home)?.sessions;
        let mut holders = live.iter().filter(|s| s.record.session_id == session_id);
        let Some(session) = holders.next() else {
            return Err(Error::refused(
                RefusalKind::NotLive,
                self.why_not_live(home, session_id),
            ));
        };
        if holders.next().is_some() {
            let all: Vec<_> = live
                .iter()
                .filter(|s| s.record.session_id == session_id)
                .collect();
            return Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {session_id} is claimed by {} live processes: {}",
                    all.len(),
                    describe(&all)
                ),
            ));
        }
        if let Some(name) = session.record.name.as_deref() {
            let others: Vec<_> = live
                .iter()
                .filter(|s| s.pid != session.pid && name_of(s) == Some(name))
                .collect();
            if !others.is_empty() {
                return Err(Error::refused(
                    RefusalKind::IdentityMismatch,
                    format!(
                        "its name `{name}` is also held by {}; a message by name could reach the wrong session",
                        describe(&others)
                    ),
                ));
            }
        }
        addressable_or_refused(session.clone())
    }

    /// The one live, addressable session named `name` now; a refusal listing every
    /// holder when more than one live session has that name.
    pub fn resolve_by_name(
        &self,
        home: &ClaudeHome,
        name: &str,
    ) -> Result<AddressableSession, Error> {
        let live = self.live(home)?.sessions;
        let holders: Vec<&LiveSession> = live.iter().filter(|s| name_of(s) == Some(name)).collect();
        match holders.as_slice() {
            [] => Err(Error::refused(
                RefusalKind::NotLive,
                format!("no live session is named `{name}`"),
            )),
            [session] => addressable_or_refused((*session).clone()),
            several => Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "{} live sessions are named `{name}`: {}",
                    several.len(),
                    describe(several)
                ),
            )),
        }
    }

    /// Explains a `not_live` refusal from everything the registry holds about the id.
    fn why_not_live(&self, home: &ClaudeHome, session_id: &str) -> String {
        let Ok(scan) = self.scan(home, Scope::All) else {
            return format!("no live process runs session {session_id}");
        };
        if let Some(entry) = scan
            .sessions
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
        let renamed = scan
            .sessions
            .into_iter()
            .filter_map(|s| LiveSession::try_from(s).ok())
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
}

fn name_of(session: &LiveSession) -> Option<&str> {
    session.record.name.as_deref()
}

fn describe(sessions: &[&LiveSession]) -> String {
    sessions
        .iter()
        .map(|s| format!("pid {} (session {})", s.pid, s.record.session_id))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The session with its socket, or a `not_addressable` refusal saying why not.
fn addressable_or_refused(session: LiveSession) -> Result<AddressableSession, Error> {
    let id = session.record.session_id.clone();
    session.addressable().map_err(|why| {
        Error::refused(
            RefusalKind::NotAddressable,
            format!("session {id} is live but cannot be messaged: {why}"),
        )
    })
}
