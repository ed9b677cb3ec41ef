use std::fmt;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::{Record, Rejection};

/// How long after a file's last write its pid's process must have started for the
/// file to count as left behind by the pid's previous owner (Claude Code's rule).
pub const PREVIOUS_OWNER_GRACE: Duration = Duration::from_secs(2);

/// The verdict on one registry entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Liveness {
    /// The session's own process runs now.
    Live,
    /// No process has that pid any more (or only a zombie): a leftover record.
    Gone,
    /// A live process has the pid, but not the one that wrote the record.
    Recycled,
    /// The record was written in another pid namespace or machine; the pid means nothing here.
    Foreign,
    /// A process may run it, but this reader cannot check (not permitted, or facts unknown).
    Unverifiable,
    /// Not a record Claude Code would accept: bad name, not a regular file, wrong owner, bad content.
    Invalid,
    /// Its live pid's record does not parse, even when read again over a short while; or
    /// its file cannot be read at all.
    Unreadable,
}

impl Liveness {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Gone => "gone",
            Self::Recycled => "recycled",
            Self::Foreign => "foreign",
            Self::Unverifiable => "unverifiable",
            Self::Invalid => "invalid",
            Self::Unreadable => "unreadable",
        }
    }
}

/// The wire name is [`Liveness::as_str`]: one spelling list.
impl Serialize for Liveness {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl fmt::Display for Liveness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A verdict and, unless live, the reason a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What the entry is.
    pub liveness: Liveness,
    /// Why, when it is not live.
    pub reason: Option<String>,
}

impl Verdict {
    fn live() -> Self {
        Self {
            liveness: Liveness::Live,
            reason: None,
        }
    }

    fn not_live(liveness: Liveness, reason: impl Into<String>) -> Self {
        Self {
            liveness,
            reason: Some(reason.into()),
        }
    }
}

/// The outcome of `kill(pid, 0)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// A process (or thread) with that id exists.
    Alive,
    /// `ESRCH`: nothing has that id.
    NoSuchProcess,
    /// `EPERM`: something has that id, but this reader may not signal it.
    NotPermitted,
}

/// The scheduler state of a process, as far as liveness cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessState {
    /// Running, sleeping, stopped: anything but the two below.
    Running,
    /// Exited, waiting to be reaped: its session is over.
    Zombie,
    /// Being torn down.
    Dead,
}

/// What a probe reports about one pid. `None` means the fact could not be learned
/// (another OS, a vanished `/proc` entry): unknown, never guessed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ProcessFacts {
    /// The `kill(pid, 0)` outcome.
    pub signal: Signal,
    /// The process state.
    pub state: Option<ProcessState>,
    /// Whether the pid is a process (thread-group leader) rather than a thread of one.
    pub thread_group_leader: Option<bool>,
    /// The process's current start token, in the form records hold.
    pub start_token: Option<String>,
    /// When the process started, as wall-clock time.
    pub started_at: Option<SystemTime>,
}

impl ProcessFacts {
    /// Facts about a pid nothing has.
    #[must_use]
    pub const fn gone() -> Self {
        Self::with_signal(Signal::NoSuchProcess)
    }

    /// Only the signal outcome is known.
    #[must_use]
    pub const fn with_signal(signal: Signal) -> Self {
        Self {
            signal,
            state: None,
            thread_group_leader: None,
            start_token: None,
            started_at: None,
        }
    }
}

/// What reading the record's file gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Contents<'a> {
    /// A record.
    Parsed(&'a Record),
    /// A final rejection (see [`Rejection::is_torn`] for the ones worth re-reading).
    Rejected(&'a Rejection),
    /// A file that exists but could not be read (`EACCES`, `EIO`, …): what it holds is
    /// unknown, whatever its pid.
    Unread {
        /// The record file.
        file: &'a Path,
        /// The OS's words for the failure.
        error: &'a str,
    },
    /// Bytes that did not parse on any read, and the file's last modification.
    Torn {
        /// Why it did not parse.
        rejection: &'a Rejection,
        /// The file's mtime, if known.
        modified: Option<SystemTime>,
    },
}

/// Decides whether a registry entry is a live session: a pure function of what was
/// read and what the probe reports about the pid.
///
/// The order is Claude Code's own, plus two checks its reader skips (zombies and
/// thread ids), each only making the answer stricter:
///
/// 1. a rejected entry is `invalid`, a file that could not be read `unreadable`;
/// 2. a record from another pid domain is `foreign` (`unverifiable` if ours is unknown);
/// 3. `ESRCH` is `gone`, `EPERM` is `unverifiable`;
/// 4. a zombie or dead process is `gone`;
/// 5. a thread id (not a thread-group leader) is `recycled`;
/// 6. bytes that never parsed are `gone` when the process started more than
///    [`PREVIOUS_OWNER_GRACE`] after the file was written (the previous owner's leftover),
///    else `unreadable`;
/// 7. a recorded start token that differs from the process's is `recycled`; one that
///    cannot be compared is `unverifiable`;
/// 8. otherwise `live`.
///
/// ```
/// use claude_peer_registry::{judge, Contents, Liveness, Pid, ProcessFacts, Record, Signal};
///
/// let record = Record::parse(Pid::new(42).unwrap(), br#"{"sessionId":"s","procStart":"100"}"#)?;
/// let mut facts = ProcessFacts::with_signal(Signal::Alive);
/// facts.start_token = Some("100".into());
/// assert_eq!(judge(Contents::Parsed(&record), &facts, None).liveness, Liveness::Live);
/// facts.start_token = Some("999".into());
/// assert_eq!(judge(Contents::Parsed(&record), &facts, None).liveness, Liveness::Recycled);
/// # Ok::<(), claude_peer_registry::Rejection>(())
/// ```
#[must_use]
pub fn judge(
    contents: Contents<'_>,
    facts: &ProcessFacts,
    our_pid_domain: Option<&str>,
) -> Verdict {
    let parsed = match contents {
        Contents::Rejected(rejection) => {
            return Verdict::not_live(Liveness::Invalid, rejection.to_string());
        }
        Contents::Unread { file, error } => {
            return Verdict::not_live(
                Liveness::Unreadable,
                format!("cannot read `{}`: {error}", file.display()),
            );
        }
        Contents::Parsed(record) => Ok(record),
        Contents::Torn {
            rejection,
            modified,
        } => Err((rejection, modified)),
    };
    if let Ok(Record {
        pid_domain: Some(theirs),
        ..
    }) = parsed
    {
        match our_pid_domain {
            Some(ours) if ours == theirs => {}
            Some(ours) => {
                return Verdict::not_live(
                    Liveness::Foreign,
                    format!("written in pid domain `{theirs}`; this reader is in `{ours}`"),
                );
            }
            None => {
                return Verdict::not_live(
                    Liveness::Unverifiable,
                    format!(
                        "written in pid domain `{theirs}`, and this reader's own domain is unknown"
                    ),
                );
            }
        }
    }
    match facts.signal {
        Signal::Alive => {}
        Signal::NoSuchProcess => {
            return Verdict::not_live(
                Liveness::Gone,
                "no process has this pid any more; the record was left behind",
            );
        }
        Signal::NotPermitted => {
            return Verdict::not_live(
                Liveness::Unverifiable,
                "a process has this pid but this user may not signal it (EPERM)",
            );
        }
    }
    match facts.state {
        Some(ProcessState::Zombie) => {
            return Verdict::not_live(
                Liveness::Gone,
                "the process has exited (zombie, not yet reaped)",
            );
        }
        Some(ProcessState::Dead) => {
            return Verdict::not_live(Liveness::Gone, "the process is exiting (dead state)");
        }
        Some(ProcessState::Running) | None => {}
    }
    if facts.thread_group_leader == Some(false) {
        return Verdict::not_live(
            Liveness::Recycled,
            "the pid now names a thread of another process, not a process",
        );
    }
    let record = match parsed {
        Ok(record) => record,
        Err((rejection, modified)) => return judge_torn(rejection, modified, facts),
    };
    match (record.start_token(), facts.start_token.as_deref()) {
        (None, _) => Verdict::live(),
        (Some(recorded), Some(current)) if recorded == current => Verdict::live(),
        (Some(recorded), Some(current)) => Verdict::not_live(
            Liveness::Recycled,
            format!(
                "the pid was reused: the record's process started at token {recorded}, the running one at {current}"
            ),
        ),
        (Some(_), None) => Verdict::not_live(
            Liveness::Unverifiable,
            "the process's start token cannot be read, so it cannot be told from a reused pid",
        ),
    }
}

fn judge_torn(
    rejection: &Rejection,
    modified: Option<SystemTime>,
    facts: &ProcessFacts,
) -> Verdict {
    let left_by_previous_owner = match (facts.started_at, modified) {
        (Some(started), Some(modified)) => started
            .duration_since(modified)
            .is_ok_and(|after| after > PREVIOUS_OWNER_GRACE),
        _ => false,
    };
    if left_by_previous_owner {
        Verdict::not_live(
            Liveness::Gone,
            format!(
                "the file predates the running process, so its pid's previous owner left it ({rejection})"
            ),
        )
    } else {
        Verdict::not_live(
            Liveness::Unreadable,
            format!("the record of a live pid did not parse, read again and again ({rejection})"),
        )
    }
}
