use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Liveness};

use crate::{Addressability, Discovery, Error, Refusal, RefusalKind, Scope, Session};

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
    ) -> Result<Session, Error> {
        let live = self.scan(home, Scope::Live)?.sessions;
        let mut holders = live.iter().filter(|s| session_id_of(s) == Some(session_id));
        let Some(session) = holders.next() else {
            return Err(refuse(
                RefusalKind::NotLive,
                self.why_not_live(home, session_id),
            ));
        };
        if holders.next().is_some() {
            let all: Vec<_> = live
                .iter()
                .filter(|s| session_id_of(s) == Some(session_id))
                .collect();
            return Err(refuse(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {session_id} is claimed by {} live processes: {}",
                    all.len(),
                    describe(&all)
                ),
            ));
        }
        if let Some(name) = session.record.as_ref().and_then(|r| r.name.as_deref()) {
            let others: Vec<_> = live
                .iter()
                .filter(|s| s.pid != session.pid && name_of(s) == Some(name))
                .collect();
            if !others.is_empty() {
                return Err(refuse(
                    RefusalKind::IdentityMismatch,
                    format!(
                        "its name `{name}` is also held by {}; a message by name could reach the wrong session",
                        describe(&others)
                    ),
                ));
            }
        }
        addressable(session.clone())
    }

    /// The one live, addressable session named `name` now; a refusal listing every
    /// holder when more than one live session has that name.
    pub fn resolve_by_name(&self, home: &ClaudeHome, name: &str) -> Result<Session, Error> {
        let live = self.scan(home, Scope::Live)?.sessions;
        let holders: Vec<&Session> = live.iter().filter(|s| name_of(s) == Some(name)).collect();
        match holders.as_slice() {
            [] => Err(refuse(
                RefusalKind::NotLive,
                format!("no live session is named `{name}`"),
            )),
            [session] => addressable((*session).clone()),
            several => Err(refuse(
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
            .find(|s| session_id_of(s) == Some(session_id))
        {
            let pid = entry.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
            let reason = entry.verdict.reason.as_deref().unwrap_or("not live");
            return format!(
                "no live process runs session {session_id}: its record for pid {pid} is {} ({reason})",
                entry.verdict.liveness
            );
        }
        let renamed = scan.sessions.iter().find(|s| {
            s.verdict.liveness == Liveness::Live
                && s.record.as_ref().is_some_and(|r| {
                    r.former_names
                        .iter()
                        .flatten()
                        .any(|f| f.session_id.as_deref() == Some(session_id))
                })
        });
        match renamed.and_then(|s| Some((s.pid?, s.record.as_ref()?))) {
            Some((pid, record)) => format!(
                "no live process runs session {session_id}: pid {pid} ran it but now runs session {} (after /clear or resume)",
                record.session_id
            ),
            None => format!("no live process runs session {session_id}, and no record names it"),
        }
    }
}

fn session_id_of(session: &Session) -> Option<&str> {
    session.record.as_ref().map(|r| r.session_id.as_str())
}

fn name_of(session: &Session) -> Option<&str> {
    session.record.as_ref().and_then(|r| r.name.as_deref())
}

fn describe(sessions: &[&Session]) -> String {
    sessions
        .iter()
        .map(|s| {
            let pid = s.pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
            format!("pid {pid} (session {})", session_id_of(s).unwrap_or("?"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn addressable(session: Session) -> Result<Session, Error> {
    match &session.addressability {
        Addressability::Addressable => Ok(session),
        Addressability::NotAddressable(why) => Err(refuse(
            RefusalKind::NotAddressable,
            format!(
                "session {} is live but cannot be messaged: {why}",
                session_id_of(&session).unwrap_or("?")
            ),
        )),
    }
}

fn refuse(kind: RefusalKind, message: String) -> Error {
    Error::Refused(Refusal { kind, message })
}
