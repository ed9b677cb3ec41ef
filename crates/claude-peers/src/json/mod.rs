//! The JSON contract, in one place: every shape the command prints and the MCP server
//! answers with (sessions, sends, settings and their effective policy, watch and mailbox
//! events, doctor's checks, failures), as typed
//! serde structs whose field order is the documented key order.

use std::path::Path;

use claude_peer_deliver::Delivered;
use claude_peer_registry::{Pid, Record, Verdict};
use claude_peer_resolve::{AddressableSession, Entry, LiveSession};
use claude_peer_sender::MailboxEvent;
use claude_peer_transcript::Summary;
use serde::Serialize;
use serde_json::Value;

use crate::error::Failure;
use crate::ops::broadcast::Outcomes;
use crate::ops::send::Via;

mod post;
mod settings;

pub(crate) use post::{QueuedJson, QueuedResultsJson};
pub(crate) use settings::{EffectivePolicyJson, SettingsJson};

/// One session as `list`, `resolve` and `watch` print it. Every key is always present;
/// absent facts are `null`.
#[derive(Debug, Serialize)]
pub(crate) struct SessionJson<'a> {
    file: String,
    pid: Option<u32>,
    session_id: Option<&'a str>,
    name: Option<&'a str>,
    name_source: Option<&'a str>,
    cwd: Option<&'a str>,
    kind: Option<&'a str>,
    entrypoint: Option<&'a str>,
    version: Option<&'a str>,
    status: Option<&'static str>,
    vendor_status: Option<&'a str>,
    waiting_for: Option<&'a str>,
    started_at_ms: Option<u64>,
    updated_at_ms: Option<u64>,
    status_updated_at_ms: Option<u64>,
    tmux: Option<&'a str>,
    socket_path: Option<&'a str>,
    addressable: bool,
    liveness: &'static str,
    reason: Option<&'a str>,
    /// The machine: `null` here, a host's name once another host's answer is merged.
    host: Option<&'a str>,
}

impl<'a> SessionJson<'a> {
    pub(crate) fn new(session: &'a Entry) -> Self {
        Self::of(
            &session.file,
            session.pid,
            session.record.as_ref(),
            &session.verdict,
            session.addressability.is_addressable(),
        )
    }

    /// A live session: as [`SessionJson::new`] shows it once it is an [`Entry`].
    pub(crate) fn live(session: &'a LiveSession) -> Self {
        Self::of(
            &session.file,
            Some(session.pid),
            Some(&session.record),
            &LiveSession::VERDICT,
            session.addressability.is_addressable(),
        )
    }

    /// A resolved session: as [`SessionJson::new`] shows it once it is an [`Entry`].
    pub(crate) fn addressable(session: &'a AddressableSession) -> Self {
        Self::of(
            &session.file,
            Some(session.pid),
            Some(&session.record),
            &LiveSession::VERDICT,
            true,
        )
    }

    fn of(
        file: &Path,
        pid: Option<Pid>,
        record: Option<&'a Record>,
        verdict: &'a Verdict,
        addressable: bool,
    ) -> Self {
        let text = |f: fn(&'a Record) -> Option<&'a str>| record.and_then(f);
        Self {
            file: file.display().to_string(),
            pid: pid.map(Pid::get),
            session_id: record.map(|r| r.session_id.as_str()),
            name: text(|r| r.name.as_deref()),
            name_source: record
                .and_then(|r| r.name_source.as_ref())
                .map(claude_peer_registry::NameSource::as_str),
            cwd: text(|r| r.cwd.as_deref()),
            kind: record
                .and_then(|r| r.kind.as_ref())
                .map(claude_peer_registry::Kind::as_str),
            entrypoint: text(|r| r.entrypoint.as_deref()),
            version: text(|r| r.version.as_deref()),
            status: record
                .and_then(Record::activity)
                .map(claude_peer_registry::Activity::as_str),
            vendor_status: record
                .and_then(|r| r.status.as_ref())
                .map(claude_peer_registry::VendorStatus::as_str),
            waiting_for: text(|r| r.waiting_for.as_deref()),
            started_at_ms: record.and_then(|r| r.started_at),
            updated_at_ms: record.and_then(|r| r.updated_at),
            status_updated_at_ms: record.and_then(|r| r.status_updated_at),
            tmux: text(|r| r.tmux.as_deref()),
            socket_path: text(|r| r.messaging_socket_path.as_deref()),
            addressable,
            liveness: verdict.liveness.as_str(),
            reason: verdict.reason.as_deref(),
            host: None,
        }
    }
}

/// `show`: the session object plus everything else the record holds.
#[derive(Debug, Serialize)]
pub(crate) struct SessionDetailJson<'a> {
    #[serde(flatten)]
    session: SessionJson<'a>,
    not_addressable_reason: Option<String>,
    name_since_ms: Option<u64>,
    former_names: Vec<FormerNameJson<'a>>,
    peer_protocol: Option<u64>,
    peer_features: Vec<&'a str>,
    pid_domain: Option<&'a str>,
    proc_start: Option<&'a str>,
    spare: bool,
    parked_job_id: Option<&'a Value>,
    transcript_path: Option<&'a Path>,
    last_prompt: Option<&'a str>,
    last_activity_ms: Option<u64>,
}

#[derive(Debug, Serialize)]
struct FormerNameJson<'a> {
    name: &'a str,
    until_ms: Option<u64>,
    session_id: Option<&'a str>,
}

impl<'a> SessionDetailJson<'a> {
    /// `session` in full, with the end of its transcript when it has one.
    pub(crate) fn new(session: &'a Entry, transcript: Option<&'a Summary>) -> Self {
        let record = session.record.as_ref();
        Self {
            session: SessionJson::new(session),
            not_addressable_reason: match &session.addressability {
                claude_peer_resolve::Addressability::Addressable(_) => None,
                claude_peer_resolve::Addressability::NotAddressable(why) => Some(why.to_string()),
            },
            name_since_ms: record.and_then(|r| r.name_since),
            former_names: record
                .and_then(|r| r.former_names.as_ref())
                .into_iter()
                .flatten()
                .map(|f| FormerNameJson {
                    name: &f.name,
                    until_ms: f.until,
                    session_id: f.session_id.as_deref(),
                })
                .collect(),
            peer_protocol: record.and_then(|r| r.peer_protocol),
            peer_features: record
                .and_then(|r| r.peer_features.as_ref())
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect(),
            pid_domain: record.and_then(|r| r.pid_domain.as_deref()),
            proc_start: record.and_then(|r| r.proc_start.as_deref()),
            spare: record.is_some_and(|r| r.spare),
            parked_job_id: record.and_then(|r| r.parked_job_id.as_ref()),
            transcript_path: transcript.map(|t| t.path.as_path()),
            last_prompt: transcript.and_then(|t| t.last_prompt.as_deref()),
            last_activity_ms: transcript.and_then(|t| t.last_activity_ms),
        }
    }
}

/// `whoami --json` and the MCP `whoami`: an object around the session as `list --json`
/// shows it.
#[derive(Debug, Serialize)]
pub(crate) struct WhoamiJson<'a> {
    pub(crate) session: SessionJson<'a>,
}

/// `list_sessions`: an object, as MCP wants structured content to be, around `list --json`.
#[derive(Debug, Serialize)]
pub(crate) struct SessionsJson<'a> {
    pub(crate) sessions: Vec<SessionJson<'a>>,
}

/// `claude` or `program`.
impl Serialize for Via {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(match self {
            Via::Claude => "claude",
            Via::Program => "program",
        })
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct DeliveredJson<'a> {
    delivered: bool,
    session: SessionJson<'a>,
    inbound: &'static str,
    via: Via,
    receipt: Option<&'static str>,
    receipt_basis: Option<&'static str>,
    msg_id: Option<&'a str>,
}

impl<'a> DeliveredJson<'a> {
    pub(crate) fn new(delivered: &'a Delivered, via: Via) -> Self {
        Self {
            delivered: true,
            session: SessionJson::addressable(&delivered.session),
            inbound: delivered.inbound.as_str(),
            via,
            receipt: delivered.receipt.map(|r| r.outcome.as_str()),
            receipt_basis: delivered.receipt.map(|r| r.basis.as_str()),
            msg_id: delivered.msg_id.as_deref(),
        }
    }
}

/// `send` to several targets: each target's outcome, as a single send answers it, with
/// the target as given, and the counts.
#[derive(Debug, Serialize)]
pub(crate) struct BroadcastJson<'a> {
    results: Vec<TargetJson<'a>>,
    delivered: usize,
    failed: usize,
}

#[derive(Debug, Serialize)]
struct TargetJson<'a> {
    target: &'a str,
    #[serde(flatten)]
    outcome: TargetOutcomeJson<'a>,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum TargetOutcomeJson<'a> {
    Delivered(Box<DeliveredJson<'a>>),
    Failed(FailureJson),
}

impl<'a> BroadcastJson<'a> {
    pub(crate) fn new(outcomes: &'a Outcomes, via: Via) -> Self {
        let results: Vec<TargetJson<'a>> = outcomes
            .iter()
            .map(|o| TargetJson {
                target: o.target,
                outcome: match o.result {
                    Ok(delivered) => {
                        TargetOutcomeJson::Delivered(Box::new(DeliveredJson::new(delivered, via)))
                    }
                    Err(err) => TargetOutcomeJson::Failed(Failure::from(err).into()),
                },
            })
            .collect();
        Self {
            delivered: outcomes.delivered(),
            failed: outcomes.failed(),
            results,
        }
    }
}

/// One line of `watch --json`.
#[derive(Debug, Serialize)]
pub(crate) struct WatchEventJson<'a> {
    pub(crate) event: &'static str,
    pub(crate) session: SessionJson<'a>,
}

/// `wait_for_messages` (MCP): what the server's mailbox heard since the last call, each
/// event as the `mailbox` command prints it.
#[derive(Debug, Serialize)]
pub(crate) struct EventsJson<'a> {
    pub(crate) events: &'a [Value],
}

/// One line of the mailbox's stdout: the answer to a request, or something it heard.
#[derive(Debug, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum MailboxEventJson<'a> {
    /// Claude Code sent the message of request `id` (to its `target`, for a request of
    /// several sessions; absent otherwise, so a single send's shape stays as it was).
    Sent {
        id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<&'a str>,
        msg_id: Option<&'a str>,
        session: Box<SessionJson<'a>>,
    },
    /// Nothing was sent for request `id` (or its `target`).
    Refused {
        id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<&'a str>,
        refusal: &'static str,
        message: &'a str,
    },
    /// The message of request `id` (to its `target`, for several) was handed to the post
    /// office, as `post_id`.
    Queued {
        id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<&'a str>,
        post_id: &'a str,
        state: &'a str,
        reason: Option<&'a str>,
        expires_at_ms: u64,
    },
    /// A request (or its `target`) read but not sent: a signal stopped the mailbox first.
    Cancelled {
        id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<&'a str>,
    },
    /// A request (or its `target`) that could not be served; the mailbox goes on.
    Error {
        id: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        target: Option<&'a str>,
        message: &'a str,
    },
    Receipt {
        outcome: &'static str,
        basis: &'static str,
        msg_ids: &'a [String],
        count: usize,
        recipient: &'a str,
    },
    /// A message in; `id` and `in_reply_to` are its record's in the history, when it
    /// was recorded.
    Message {
        id: Option<&'a str>,
        from: &'a str,
        from_name: Option<&'a str>,
        session_id: Option<&'a str>,
        in_reply_to: Option<&'a str>,
        text: &'a str,
    },
    Idle {
        recipient: &'a str,
        session_id: Option<&'a str>,
    },
    Notice {
        text: &'a str,
    },
    Closed {
        unknown: &'a [String],
        reason: Option<&'a str>,
    },
    /// `wait_for_messages` (MCP) only: this many older events were dropped unread, the
    /// server keeping the newest.
    Dropped {
        count: usize,
    },
}

impl<'a> MailboxEventJson<'a> {
    /// `event` as heard, with the history's record of a message in.
    pub(crate) fn heard(
        event: &'a MailboxEvent,
        logged: Option<&'a claude_peer_post::Message>,
    ) -> Self {
        match (Self::from(event), logged) {
            (
                Self::Message {
                    from,
                    from_name,
                    session_id,
                    text,
                    ..
                },
                Some(logged),
            ) => Self::Message {
                id: Some(&logged.id),
                from,
                from_name,
                session_id,
                in_reply_to: logged.in_reply_to.as_deref(),
                text,
            },
            (json, _) => json,
        }
    }
}

impl<'a> From<&'a MailboxEvent> for MailboxEventJson<'a> {
    fn from(event: &'a MailboxEvent) -> Self {
        match event {
            MailboxEvent::Receipt(receipt) => Self::Receipt {
                outcome: receipt.outcome.as_str(),
                basis: receipt.basis.as_str(),
                msg_ids: &receipt.msg_ids,
                count: receipt.count,
                recipient: &receipt.recipient,
            },
            MailboxEvent::Message {
                from,
                from_name,
                session_id,
                text,
            } => Self::Message {
                id: None,
                from,
                from_name: from_name.as_deref(),
                session_id: session_id.as_deref(),
                in_reply_to: None,
                text,
            },
            MailboxEvent::Idle {
                recipient,
                session_id,
            } => Self::Idle {
                recipient,
                session_id: session_id.as_deref(),
            },
            MailboxEvent::Notice(text) => Self::Notice { text },
            MailboxEvent::Closed { unknown, reason } => Self::Closed {
                unknown,
                reason: reason.as_deref(),
            },
        }
    }
}

/// `doctor`: whether every check passed, and each check.
#[derive(Debug, Serialize)]
pub(crate) struct DoctorJson<'a> {
    pub(crate) ok: bool,
    pub(crate) checks: Vec<CheckJson<'a>>,
}

/// One check of `doctor`; `fix` is `null` when it passed.
#[derive(Debug, Serialize)]
pub(crate) struct CheckJson<'a> {
    pub(crate) check: &'static str,
    pub(crate) ok: bool,
    pub(crate) detail: &'a str,
    pub(crate) fix: Option<&'a str>,
}

impl Failure {
    /// Its JSON shape as text, `{"refusal"|"error": name, "message": …}`.
    pub(crate) fn json(&self) -> String {
        serde_json::to_string(&FailureJson::from(self.clone())).unwrap_or_default()
    }
}

/// A failure: `{"error"|"refusal": <stable name>, "message": …}`, the name first.
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum FailureJson {
    Error {
        error: &'static str,
        message: String,
    },
    Refusal {
        refusal: &'static str,
        message: String,
    },
}

impl From<Failure> for FailureJson {
    fn from(failure: Failure) -> Self {
        let (name, message) = (failure.name, failure.message);
        if failure.key == "refusal" {
            Self::Refusal {
                refusal: name,
                message,
            }
        } else {
            Self::Error {
                error: name,
                message,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use claude_peer_registry::{Pid, Record};
    use claude_peer_resolve::{
        Addressability, AddressableSession, Entry, LiveSession, Unaddressable,
    };

    use super::SessionJson;

    #[test]
    fn a_live_or_resolved_session_shows_as_the_session_it_converts_to() {
        let pid = Pid::new(4242).unwrap();
        let body =
            br#"{"sessionId":"s-1","name":"ada","cwd":"/w","messagingSocketPath":"/run/s.sock"}"#;
        let resolved = AddressableSession {
            file: "/h/sessions/4242.json".into(),
            pid,
            record: Record::parse(pid, body).unwrap(),
            socket: "/run/s.sock".into(),
        };
        let not_addressable = LiveSession {
            addressability: Addressability::NotAddressable(Unaddressable::Parked {
                job: "\"job-7\"".into(),
            }),
            ..resolved.clone().into()
        };
        let json = |view: SessionJson<'_>| serde_json::to_value(view).unwrap();
        assert_eq!(
            json(SessionJson::addressable(&resolved)),
            json(SessionJson::new(&resolved.clone().into()))
        );
        for live in [resolved.clone().into(), not_addressable] {
            let shown = Entry::from(live.clone());
            assert_eq!(
                json(SessionJson::live(&live)),
                json(SessionJson::new(&shown))
            );
        }
    }
}
