//! The last look before a hand-over: one record and one pid, read again.

use std::io;
use std::path::Path;

use claude_peer_probe::{FileKind, ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Contents, Liveness, Pid, Record, Rejection, Signal, judge};

use crate::{Addressability, Discovery, Error, Refusal, RefusalKind, Session};

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
    ///
    /// `session` must be one that was resolved live, as [`Discovery::resolve_live_session`]
    /// returns them; anything else is refused as `not_live`.
    pub fn confirm(&self, home: &ClaudeHome, session: &Session) -> Result<Session, Error> {
        let (Some(pid), Some(before)) = (session.pid, session.record.as_ref()) else {
            return Err(refuse(
                RefusalKind::NotLive,
                format!(
                    "`{}` was not resolved as a live session",
                    session.file.display()
                ),
            ));
        };
        let id = before.session_id.as_str();
        let signal = self.processes().signal(pid);
        if signal != Signal::Alive {
            let why = match signal {
                Signal::NotPermitted => "this user may no longer signal it (EPERM)",
                Signal::NoSuchProcess | Signal::Alive => "no process has it any more",
            };
            return Err(refuse(
                RefusalKind::NotLive,
                format!("pid {pid}, which ran session {id}, no longer runs: {why}"),
            ));
        }
        let now = self.reread(home, pid, id)?;
        let reader = self.processes().reader();
        let facts = self.processes().facts(pid, signal);
        let verdict = judge(Contents::Parsed(&now), &facts, reader.pid_domain.as_deref());
        if verdict.liveness != Liveness::Live {
            return Err(refuse(
                RefusalKind::NotLive,
                format!(
                    "pid {pid} no longer runs session {id}: its record is {} ({})",
                    verdict.liveness,
                    verdict.reason.as_deref().unwrap_or("not live")
                ),
            ));
        }
        if now.session_id != before.session_id {
            return Err(refuse(
                RefusalKind::NotLive,
                format!(
                    "pid {pid} now runs session {} instead of {id} (after /clear or resume)",
                    now.session_id
                ),
            ));
        }
        if now.start_token() != before.start_token() {
            return Err(refuse(
                RefusalKind::NotLive,
                format!(
                    "the record of pid {pid} now names start token {}, not {}: another process wrote it",
                    now.start_token().unwrap_or("(none)"),
                    before.start_token().unwrap_or("(none)")
                ),
            ));
        }
        if now.name != before.name {
            return Err(refuse(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {id} was renamed from `{}` to `{}` since it was resolved; resolve it again",
                    before.name.as_deref().unwrap_or(""),
                    now.name.as_deref().unwrap_or("")
                ),
            ));
        }
        if now.messaging_socket_path != before.messaging_socket_path {
            return Err(refuse(
                RefusalKind::IdentityMismatch,
                format!(
                    "session {id} now names the messaging socket `{}` instead of `{}`",
                    now.messaging_socket_path.as_deref().unwrap_or(""),
                    before.messaging_socket_path.as_deref().unwrap_or("")
                ),
            ));
        }
        let addressability = self.addressability(&now, reader.uid);
        if let Addressability::NotAddressable(why) = &addressability {
            return Err(refuse(
                RefusalKind::NotAddressable,
                format!("session {id} is live but can no longer be messaged: {why}"),
            ));
        }
        Ok(Session {
            file: home.sessions_dir().join(format!("{pid}.json")),
            pid: Some(pid),
            record: Some(now),
            verdict,
            addressability,
        })
    }

    /// Reads `pid`'s record once more (again if it is caught mid-rewrite), accepting only
    /// a regular file owned by the registry directory's owner.
    fn reread(&self, home: &ClaudeHome, pid: Pid, id: &str) -> Result<Record, Error> {
        let dir = home.sessions_dir();
        let file = dir.join(format!("{pid}.json"));
        let gone = |why: String| {
            refuse(
                RefusalKind::NotLive,
                format!("cannot confirm that pid {pid} still runs session {id}: {why}"),
            )
        };
        let Some(status) = self
            .fs()
            .dir_status(&dir)
            .map_err(|source| Error::Registry {
                path: dir.clone(),
                source,
            })?
        else {
            return Err(gone(format!(
                "the registry `{}` no longer exists",
                dir.display()
            )));
        };
        // Claude Code rewrites records in place: a torn one is read again.
        let parsed = self
            .until_whole(
                || self.read_one(&file, pid, status.owner),
                |parsed| parsed.as_ref().is_err_and(Rejection::is_torn),
            )
            .map_err(&gone)?;
        parsed.map_err(|rejection| {
            gone(format!(
                "its record `{}` does not parse: {rejection}",
                file.display()
            ))
        })
    }

    /// One read of a record file: `Err` for what cannot be a record, else the parse.
    fn read_one(
        &self,
        file: &Path,
        pid: Pid,
        owner: u32,
    ) -> Result<Result<Record, Rejection>, String> {
        let read = self.fs().read_record(file).map_err(|err| {
            if err.kind() == io::ErrorKind::NotFound {
                format!("its record `{}` is gone", file.display())
            } else {
                format!("cannot read its record `{}`: {err}", file.display())
            }
        })?;
        if read.kind != FileKind::Regular {
            return Err(format!(
                "`{}` is now a {}, not a regular file",
                file.display(),
                read.kind.as_str()
            ));
        }
        if read.owner != owner {
            return Err(format!(
                "`{}` now belongs to uid {}, not to the registry's owner (uid {owner})",
                file.display(),
                read.owner
            ));
        }
        Ok(Record::parse(pid, &read.bytes))
    }
}

fn refuse(kind: RefusalKind, message: String) -> Error {
    Error::Refused(Refusal { kind, message })
}
