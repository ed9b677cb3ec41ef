//! The last look before a hand-over: one record and one pid, read again.

use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Signal};

use crate::{AddressableSession, Discovery, Error, LiveSession, RefusalKind, Scope};

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
    pub fn confirm(
        &self,
        home: &ClaudeHome,
        session: &AddressableSession,
    ) -> Result<AddressableSession, Error> {
        let (pid, before) = (session.pid, &session.record);
        let id = before.session_id.as_str();
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
        if now.record.session_id != before.session_id {
            return Err(Error::refused(
                RefusalKind::NotLive,
                format!(
                    "pid {pid} now runs session {} instead of {id} (after /clear or resume)",
                    now.record.session_id
                ),
            ));
        }
        if now.record.start_token() != before.start_token() {
            return Err(Error::refused(
                RefusalKind::NotLive,
                format!(
                    "the record of pid {pid} now names start token {}, not {}: another process wrote it",
                    now.record.start_token().unwrap_or("(none)"),
                    before.start_token().unwrap_or("(none)")
                ),
            ));
        }
        if now.record.name != before.name {
            return Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {id} was renamed from `{}` to `{}` since it was resolved; resolve it again",
                    before.name.as_deref().unwrap_or(""),
                    now.record.name.as_deref().unwrap_or("")
                ),
            ));
        }
        if now.record.messaging_socket_path != before.messaging_socket_path {
            return Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {id} now names the messaging socket `{}` instead of `{}`",
                    now.record.messaging_socket_path.as_deref().unwrap_or(""),
                    before.messaging_socket_path.as_deref().unwrap_or("")
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
