//! The last look before a hand-over: one record and one pid, read again.

use std::path::Path;

use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Pid, Signal};

use crate::{AddressableSession, Discovery, Error, LiveSession, RefusalKind, Scope};

/// Who a message was resolved to reach: everything the last-moment check compares.
///
/// The one rule of [`Discovery::confirm`], for every caller: the delivery gate confirms
/// the session it resolved, and the sender's guard hook confirms the target of its plan
/// at the moment of the tool call, with the same fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity<'a> {
    /// The session id.
    pub session_id: &'a str,
    /// The pid that ran it.
    pub pid: Pid,
    /// The start token its record named (`procStart`), when it named one.
    pub proc_start: Option<&'a str>,
    /// Its name, the address a name-based send relies on.
    pub name: Option<&'a str>,
    /// Its messaging socket.
    pub socket: &'a Path,
}

impl<'a> From<&'a AddressableSession> for Identity<'a> {
    fn from(session: &'a AddressableSession) -> Self {
        Self {
            session_id: &session.record.session_id,
            pid: session.pid,
            proc_start: session.record.start_token(),
            name: session.record.name.as_deref(),
            socket: &session.socket,
        }
    }
}

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// Confirms that a session resolved a moment ago still runs, reading only its own
    /// record and its pid's facts again (no scan).
    ///
    /// Call it immediately before handing a message over: the window between resolving
    /// and sending is where a `/clear`, a resume or a crash changes the answer. Returns
    /// the session as it is now, or refuses:
    ///
    /// - `not_live` when the pid no longer runs, its record is gone or unreadable, the
    ///   process is not the one that wrote it (another start token), or the record now
    ///   names another session id or start token;
    /// - `identity_mismatch` when the record now gives another name or messaging socket,
    ///   so the earlier check that nobody else holds its name no longer applies;
    /// - `not_addressable` when it is still live but can no longer be messaged.
    pub fn confirm<'a>(
        &self,
        home: &ClaudeHome,
        expected: impl Into<Identity<'a>>,
    ) -> Result<AddressableSession, Error> {
        let before: Identity<'_> = expected.into();
        let (pid, id) = (before.pid, before.session_id);
        let signal = self.processes().signal(pid);
        if signal != Signal::Alive {
            let why = match signal {
                Signal::NotPermitted => "this user may no longer signal it (EPERM)",
                Signal::NoSuchProcess | Signal::Alive => "no process has it any more",
            };
            return Err(Error::refused(
                RefusalKind::NotLive,
                format!("pid {pid}, which ran session {id}, no longer runs: {why}"),
            ));
        }
        // Judged exactly as a scan judges it: the same read, limits and rereads.
        let file = home.sessions_dir().join(format!("{pid}.json"));
        let Some(entry) = self.entry(home, pid, Scope::All)? else {
            return Err(Error::refused(
                RefusalKind::NotLive,
                format!(
                    "cannot confirm that pid {pid} still runs session {id}: its record `{}` is gone",
                    file.display()
                ),
            ));
        };
        let now = match LiveSession::try_from(entry) {
            Ok(live) => live,
            Err(entry) => {
                return Err(Error::refused(
                    RefusalKind::NotLive,
                    format!(
                        "pid {pid} no longer runs session {id}: its record is {} ({})",
                        entry.verdict.liveness,
                        entry.verdict.reason.as_deref().unwrap_or("not live")
                    ),
                ));
            }
        };
        if now.record.session_id != id {
            return Err(Error::refused(
                RefusalKind::NotLive,
                format!(
                    "pid {pid} now runs session {} instead of {id} (after /clear or resume)",
                    now.record.session_id
                ),
            ));
        }
        if now.record.start_token() != before.proc_start {
            return Err(Error::refused(
                RefusalKind::NotLive,
                format!(
                    "the record of pid {pid} now names start token {}, not {}: another process wrote it",
                    now.record.start_token().unwrap_or("(none)"),
                    before.proc_start.unwrap_or("(none)")
                ),
            ));
        }
        if now.record.name.as_deref() != before.name {
            return Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {id} was renamed from `{}` to `{}` since it was resolved; resolve it again",
                    before.name.unwrap_or(""),
                    now.record.name.as_deref().unwrap_or("")
                ),
            ));
        }
        let socket = now.record.messaging_socket_path.as_deref().map(Path::new);
        if socket != Some(before.socket) {
            return Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {id} now names the messaging socket `{}` instead of `{}`",
                    now.record.messaging_socket_path.as_deref().unwrap_or(""),
                    before.socket.display()
                ),
            ));
        }
        now.addressable().map_err(|why| {
            Error::refused(
                RefusalKind::NotAddressable,
                format!("session {id} is live but can no longer be messaged: {why}"),
            )
        })
    }
}
