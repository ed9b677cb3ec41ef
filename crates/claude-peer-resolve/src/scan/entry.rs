//! Judging one record entry: the facts about its pid and its file, and the verdict
//! `claude_peer_registry::judge` gives them.
//!
//! A scan's records, its threaded batches and [`Discovery::entry`] all come here, so an
//! entry is judged the same however it was found. What costs least is looked at first:
//! an entry its listed kind decides is never opened, and a live-only scan opens only the
//! files of pids that answer `kill(pid, 0)`. A live session's messaging socket is looked
//! at with `lstat` only, never connected to.

use std::path::{Path, PathBuf};

use claude_peer_probe::{DirStatus, FileKind, ProcessTable, Reader, RegistryFs, SocketStatus};
use claude_peer_registry::{
    Contents, Liveness, Pid, ProcessFacts, Record, Rejection, Signal, Verdict, judge,
};

use super::read::{At, Unread, not_regular};
use crate::{Addressability, Discovery, Entries, Entry, Scope, Unaddressable};

impl<P: ProcessTable, F: RegistryFs> Entries<'_, P, F> {
    /// A listed record's entry, its pid having answered `signal`, judged in this scan's
    /// directory and scope; `None` when it is no entry (see [`Discovery::judge_entry`]).
    pub(super) fn judge_record(
        &self,
        pid: Pid,
        kind: FileKind,
        signal: Signal,
        status: DirStatus,
    ) -> Option<Entry> {
        let at = At {
            dir: &self.dir,
            handle: self.handle.as_ref(),
        };
        self.discovery
            .judge_entry(at, pid, kind, signal, &status, &self.reader, self.scope)
    }
}

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// One record entry's verdict, its pid having answered `signal`; `None` when
    /// `scope` is live-only and it is not live, or when its file is missing.
    #[allow(
        clippy::too_many_arguments,
        reason = "one entry's facts, each from the scan that lists it"
    )]
    pub(super) fn judge_entry(
        &self,
        at: At<'_, F::Dir>,
        pid: Pid,
        listed_kind: FileKind,
        signal: Signal,
        dir: &DirStatus,
        reader: &Reader,
        scope: Scope,
    ) -> Option<Entry> {
        let live_only = scope == Scope::Live;
        if skipped(scope, listed_kind, signal) {
            return None;
        }
        let name = format!("{pid}.json");
        if !is_readable_kind(listed_kind) {
            return Some(invalid(
                at.dir.join(name),
                Some(pid),
                &not_regular(listed_kind),
            ));
        }
        let file = at.dir.join(&name);
        let facts = if signal == Signal::Alive {
            self.processes.facts(pid, signal)
        } else {
            ProcessFacts::with_signal(signal)
        };
        let domain = reader.pid_domain.as_deref();
        let read_once = || {
            let read = self.read_checked(at, &file, dir)?;
            Ok((Record::parse(pid, &read.bytes), read.modified))
        };
        // A live pid's record may be caught mid-rewrite: it is read again, with growing
        // waits, for as long as it would be `unreadable` (a torn file its pid's previous
        // owner left is not waited for).
        let mid_rewrite = |(parsed, modified): &(Result<Record, Rejection>, _)| {
            parsed.as_ref().is_err_and(|rejection| {
                let contents = Contents::Torn {
                    rejection,
                    modified: *modified,
                };
                rejection.is_torn()
                    && judge(contents, &facts, domain).liveness == Liveness::Unreadable
            })
        };
        let (parsed, modified) = match self.until_whole(read_once, mid_rewrite) {
            Ok(read) => read,
            Err(unread) => {
                let verdict = judge_unread(&unread, &file, &facts, domain)?;
                return (!live_only).then(|| Entry::unlisted(file, Some(pid), None, verdict));
            }
        };
        let (contents, record) = match &parsed {
            Ok(record) => (Contents::Parsed(record), Some(record)),
            Err(rejection) if rejection.is_torn() => (
                Contents::Torn {
                    rejection,
                    modified,
                },
                None,
            ),
            Err(rejection) => (Contents::Rejected(rejection), None),
        };
        let verdict = judge(contents, &facts, domain);
        if live_only && verdict.liveness != Liveness::Live {
            return None;
        }
        let addressability = match record {
            Some(record) if verdict.liveness == Liveness::Live => {
                self.addressability(record, reader.uid)
            }
            _ => Addressability::NotAddressable(Unaddressable::NotLive(verdict.liveness)),
        };
        Some(Entry {
            file,
            pid: Some(pid),
            record: parsed.ok(),
            verdict,
            addressability,
        })
    }

    /// Whether a live record can be messaged: its own socket, owned by this user, and
    /// not a spare or parked process. The socket is looked at with `lstat` only.
    fn addressability(&self, record: &Record, uid: u32) -> Addressability {
        use Addressability::NotAddressable;
        if record.spare {
            return NotAddressable(Unaddressable::Spare);
        }
        if let Some(job) = &record.parked_job_id {
            return NotAddressable(Unaddressable::Parked {
                job: job.to_string(),
            });
        }
        let Some(socket) = &record.messaging_socket_path else {
            return NotAddressable(Unaddressable::NoSocket);
        };
        let socket_owned = socket.clone();
        NotAddressable(match self.fs.socket_status(Path::new(socket)) {
            Ok(SocketStatus::Present {
                kind: FileKind::Socket,
                owner,
                dir,
            }) if owner == uid => match dir {
                Some(dir) if dir.owner == uid && !dir.shared => {
                    return Addressability::Addressable(PathBuf::from(socket));
                }
                dir => Unaddressable::SocketDirUnsafe {
                    socket: socket_owned,
                    why: dir.map_or_else(
                        || "is no directory".to_owned(),
                        |dir| {
                            if dir.owner == uid {
                                "may be written by others".to_owned()
                            } else {
                                format!(
                                    "belongs to uid {}, not to this user (uid {uid})",
                                    dir.owner
                                )
                            }
                        },
                    ),
                },
            },
            Ok(SocketStatus::Missing) => Unaddressable::SocketMissing {
                socket: socket_owned,
            },
            Ok(SocketStatus::Present {
                kind: FileKind::Socket,
                owner,
                ..
            }) => Unaddressable::SocketNotOwned {
                socket: socket_owned,
                owner,
                uid,
            },
            Ok(SocketStatus::Present { kind, .. }) => Unaddressable::NotASocket {
                socket: socket_owned,
                kind,
            },
            Err(err) => Unaddressable::SocketUnreadable {
                socket: socket_owned,
                error: err.to_string(),
            },
        })
    }
}

impl Entry {
    /// An entry that is not live, so not addressable either.
    fn unlisted(file: PathBuf, pid: Option<Pid>, record: Option<Record>, verdict: Verdict) -> Self {
        let addressability =
            Addressability::NotAddressable(Unaddressable::NotLive(verdict.liveness));
        Self {
            file,
            pid,
            record,
            verdict,
            addressability,
        }
    }
}

/// An entry rejected before its contents were read: by its name or its kind.
pub(super) fn invalid(file: PathBuf, pid: Option<Pid>, rejection: &Rejection) -> Entry {
    Entry::unlisted(file, pid, None, invalid_verdict(rejection))
}

/// The verdict on a file that gave no bytes to parse; `None` when it is missing (removed
/// since it was listed: no longer an entry).
fn judge_unread(
    unread: &Unread,
    file: &Path,
    facts: &ProcessFacts,
    domain: Option<&str>,
) -> Option<Verdict> {
    let error;
    let contents = match unread {
        Unread::Missing => return None,
        Unread::Rejected(rejection) => Contents::Rejected(rejection),
        Unread::Failed(err) => {
            error = err.to_string();
            Contents::Unread {
                file,
                error: &error,
            }
        }
    };
    Some(judge(contents, facts, domain))
}

/// The verdict on a rejected entry, which no fact about its pid can change.
pub(super) fn invalid_verdict(rejection: &Rejection) -> Verdict {
    judge(Contents::Rejected(rejection), &ProcessFacts::gone(), None)
}

/// Whether an entry listed as `kind` may be a record: a regular file, or one whose
/// kind the listing did not say (opening it tells).
pub(super) const fn is_readable_kind(kind: FileKind) -> bool {
    matches!(kind, FileKind::Regular | FileKind::Unknown)
}

/// Whether a scan of `scope` leaves the entry out without reading it: a live-only scan
/// reports live sessions, and nothing but a regular file of a live pid can be one.
pub(super) fn skipped(scope: Scope, kind: FileKind, signal: Signal) -> bool {
    scope == Scope::Live && (!is_readable_kind(kind) || signal != Signal::Alive)
}
