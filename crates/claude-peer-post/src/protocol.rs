//! The post office's protocol: JSON lines on its Unix socket, one request a line, and
//! the shape of a message record everywhere it is shown.

use serde::{Deserialize, Serialize};

use crate::{Address, AddressKind, Change, Error, Message};

/// The longest request line: a message of 64 KiB, escaped as JSON at its worst (six
/// bytes a byte), and room for the rest.
pub const MAX_REQUEST_BYTES: usize = 6 * claude_peer_deliver::MAX_MESSAGE_BYTES + 4096;

/// One request: `{"op": …, …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// Store a message: answered with its record (the first one's, for a key used before).
    Post {
        /// The sender's name.
        from: String,
        /// An idempotency key.
        #[serde(default)]
        key: Option<String>,
        /// `session_id`, `name` or `cwd`.
        to_kind: String,
        /// The id, name or directory.
        to: String,
        /// The exact text.
        text: String,
        /// How long it may wait, in ms.
        expire_ms: u64,
        /// The post id of the message it answers.
        #[serde(default)]
        in_reply_to: Option<String>,
    },
    /// One message's record.
    Get {
        /// Its post id.
        id: String,
    },
    /// Every message not yet final, oldest first: a record a line, then the end.
    Outbox,
    /// Cancel a waiting or unknown message.
    Cancel {
        /// Its post id.
        id: String,
    },
    /// Try an unknown message again.
    Retry {
        /// Its post id.
        id: String,
    },
    /// Send a message at once through the post office's warm sender, ahead of the
    /// queue, and wait for its receipt as a one-shot send does: answered with its
    /// record and what the send came to. Any refusal is final for it.
    Send {
        /// The sender's name.
        from: String,
        /// The receiving session's id.
        to: String,
        /// The exact text.
        text: String,
        /// The post id of the message it answers.
        #[serde(default)]
        in_reply_to: Option<String>,
    },
    /// Whether the post office answers: its pid and the Claude home it delivers to.
    Ping,
}

/// One answer line: the end of an answer, which says whether it succeeded, or one record
/// of several (for `outbox` and `log`) before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Answer {
    /// The end: the request failed, nothing was changed.
    Failed {
        /// Always `false`.
        ok: bool,
        /// The error's stable name.
        error: String,
        /// What went wrong, naming the file or the message.
        message: String,
    },
    /// The end of a `send`: the message's record, and what the send came to.
    Sent {
        /// Always `true`: the request was carried out, whatever the send came to.
        ok: bool,
        /// The message's record after it.
        record: Record,
        /// What the send came to.
        sent: SentRecord,
    },
    /// The end: success, with the record asked for, or the post office's pid and the
    /// Claude home it delivers to.
    Done {
        /// Always `true`.
        ok: bool,
        /// The record of a `post`, `get`, `cancel` or `retry`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        record: Option<Record>,
        /// The post office's pid, for `ping`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pid: Option<u32>,
        /// The Claude home whose sessions it delivers to, for `ping`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        home: Option<String>,
    },
    /// One of the records of the answer.
    Record {
        /// The record.
        record: Record,
    },
}

/// What a `send` came to: delivered (its receipt and `msg_id` are the record's), or the
/// gate's refusal, as the deliver crate's refusal has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentRecord {
    /// Whether Claude Code took it.
    pub delivered: bool,
    /// The relay's note on a delivered message (an idle subscription that failed…).
    pub detail: Option<String>,
    /// The refusal's kind, by its wire name (`not_live`, `delivery_failed`…).
    pub refusal: Option<String>,
    /// The refusal's words.
    pub message: Option<String>,
    /// Whether the refusal stands until a person changes something.
    pub standing: bool,
    /// Whether it may have gone all the same.
    pub uncertain: bool,
}

impl SentRecord {
    /// What `sent` came to.
    #[must_use]
    pub fn new(
        sent: &Result<Box<claude_peer_deliver::Delivered>, claude_peer_deliver::Error>,
    ) -> Self {
        match sent {
            Ok(delivered) => Self {
                delivered: true,
                detail: delivered.detail.clone(),
                refusal: None,
                message: None,
                standing: false,
                uncertain: false,
            },
            Err(err) => {
                let refusal = err.refusal();
                Self {
                    delivered: false,
                    detail: None,
                    refusal: Some(err.as_str().to_owned()),
                    message: Some(refusal.map_or_else(|| err.to_string(), |r| r.message.clone())),
                    standing: refusal.is_some_and(|r| r.standing),
                    uncertain: refusal.is_some_and(|r| r.uncertain),
                }
            }
        }
    }
}

/// A message record as every front end shows it, every key always present: also the
/// line `log --export` writes and `log --import` reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The post id.
    pub id: String,
    /// `out` (one of our senders sent it) or `in` (another session sent it to one).
    pub direction: String,
    /// The sender's name: ours for a message out, the sending session's for one in.
    pub from: String,
    /// Its idempotency key.
    pub key: Option<String>,
    /// The id, name or directory it is for.
    pub to: String,
    /// `session_id`, `name` or `cwd`.
    pub to_kind: String,
    /// The exact text.
    pub text: String,
    /// Its state.
    pub state: String,
    /// Why it waits, was refused or is unknown.
    pub reason: Option<String>,
    /// What the receiver did with it.
    pub receipt: Option<String>,
    /// What that rests on.
    pub receipt_basis: Option<String>,
    /// Claude Code's id of the sent message.
    pub msg_id: Option<String>,
    /// The other session: the receiving one (out), the sending one (in).
    pub session_id: Option<String>,
    /// That session's name, as last known.
    pub session_name: Option<String>,
    /// The post id of the message it answers.
    pub in_reply_to: Option<String>,
    /// Whether `in_reply_to` was inferred (the latest message delivered to the replying
    /// session before its reply) rather than given.
    pub inferred: bool,
    /// How many attempts began.
    pub attempts: u32,
    /// When it was posted (ms since the epoch).
    pub created_at_ms: u64,
    /// When it expires unless delivered.
    pub expires_at_ms: u64,
    /// Every change, oldest first.
    pub timeline: Vec<RecordChange>,
}

/// One change in a [`Record`]'s timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordChange {
    /// The state it moved to.
    pub state: String,
    /// When (ms since the epoch).
    pub at_ms: u64,
    /// The receipt it recorded.
    pub receipt: Option<String>,
    /// What that receipt rests on.
    pub receipt_basis: Option<String>,
    /// What happened, in words.
    pub detail: Option<String>,
}

impl From<&Message> for Record {
    fn from(message: &Message) -> Self {
        Self {
            id: message.id.clone(),
            direction: message.direction.as_str().to_owned(),
            from: message.from.clone(),
            key: message.key.clone(),
            to: message.to.value().to_owned(),
            to_kind: message.to.kind().as_str().to_owned(),
            text: message.text.clone(),
            state: message.state.as_str().to_owned(),
            reason: message.reason.clone(),
            receipt: message.receipt.map(|r| r.outcome.as_str().to_owned()),
            receipt_basis: message.receipt.map(|r| r.basis.as_str().to_owned()),
            msg_id: message.msg_id.clone(),
            session_id: message.session_id.clone(),
            session_name: message.session_name.clone(),
            in_reply_to: message.in_reply_to.clone(),
            inferred: message.inferred,
            attempts: message.attempts,
            created_at_ms: message.created_at_ms,
            expires_at_ms: message.expires_at_ms,
            timeline: message.timeline.iter().map(RecordChange::from).collect(),
        }
    }
}

impl From<&Change> for RecordChange {
    fn from(change: &Change) -> Self {
        Self {
            state: change.state.as_str().to_owned(),
            at_ms: change.at_ms,
            receipt: change.receipt.map(|r| r.outcome.as_str().to_owned()),
            receipt_basis: change.receipt.map(|r| r.basis.as_str().to_owned()),
            detail: change.detail.clone(),
        }
    }
}

/// The address a `post` request names, or why it names none.
pub(crate) fn address(kind: &str, value: String) -> Result<Address, Error> {
    AddressKind::from_name(kind)
        .map(|kind| Address::new(kind, value))
        .ok_or_else(|| {
            Error::Invalid(format!(
                "`{kind}` is no kind of address (session_id, name or cwd)"
            ))
        })
}
