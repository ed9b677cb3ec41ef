//! A message in the post office: whom it is for, where it stands, and every change.

use std::fmt;

use claude_peer_deliver::{Outcome, Receipt};

/// Whom a message is for, resolved afresh at each attempt through the gate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Address {
    /// One session, by its id.
    SessionId(String),
    /// Whichever live session holds this name at delivery time: a stable address across
    /// restarts of a session started with `claude --name`.
    Name(String),
    /// The one live session whose working directory is this (absolute) directory.
    Cwd(String),
}

impl Address {
    /// What kind of address this is.
    #[must_use]
    pub const fn kind(&self) -> AddressKind {
        match self {
            Self::SessionId(_) => AddressKind::SessionId,
            Self::Name(_) => AddressKind::Name,
            Self::Cwd(_) => AddressKind::Cwd,
        }
    }

    /// The id, name or directory.
    #[must_use]
    pub fn value(&self) -> &str {
        match self {
            Self::SessionId(value) | Self::Name(value) | Self::Cwd(value) => value,
        }
    }

    /// The address of `kind` with `value`.
    #[must_use]
    pub fn new(kind: AddressKind, value: String) -> Self {
        match kind {
            AddressKind::SessionId => Self::SessionId(value),
            AddressKind::Name => Self::Name(value),
            AddressKind::Cwd => Self::Cwd(value),
        }
    }
}

/// The kinds of [`Address`], by their wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddressKind {
    /// `session_id`.
    SessionId,
    /// `name`.
    Name,
    /// `cwd`.
    Cwd,
}

impl AddressKind {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::SessionId => "session_id",
            Self::Name => "name",
            Self::Cwd => "cwd",
        }
    }

    /// The kind whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::SessionId, Self::Name, Self::Cwd]
            .into_iter()
            .find(|kind| kind.as_str() == name)
    }
}

/// Where a message stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Not sent yet: its address does not resolve now, or the last attempt failed for a
    /// while; the reason says which.
    Waiting,
    /// An attempt is under way: recorded before the sender is asked, so a post office
    /// killed during it can tell, once restarted, that the message may have gone.
    Sending,
    /// Claude Code took it; its receipt says what the receiver did with it.
    Delivered,
    /// The receiver's policy refuses it: final, never retried.
    Refused,
    /// Not delivered before its expiry: final.
    Expired,
    /// Cancelled by its sender before it went: final.
    Cancelled,
    /// An attempt's outcome cannot be told (the receiver's transcript could not be read):
    /// never sent again by itself, only when asked (`outbox retry`).
    Unknown,
    /// A message in: another session sent it to one of our senders. Final.
    Received,
}

impl State {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "waiting",
            Self::Sending => "sending",
            Self::Delivered => "delivered",
            Self::Refused => "refused",
            Self::Expired => "expired",
            Self::Cancelled => "cancelled",
            Self::Unknown => "unknown",
            Self::Received => "received",
        }
    }

    /// The state whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|state| state.as_str() == name)
    }

    /// Every state.
    pub const ALL: [Self; 8] = [
        Self::Waiting,
        Self::Sending,
        Self::Delivered,
        Self::Refused,
        Self::Expired,
        Self::Cancelled,
        Self::Unknown,
        Self::Received,
    ];

    /// Whether nothing more will be tried for a message in this state (a delivered
    /// message's receipt may still change).
    #[must_use]
    pub const fn is_final(self) -> bool {
        matches!(
            self,
            Self::Delivered | Self::Refused | Self::Expired | Self::Cancelled | Self::Received
        )
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change of a message, as the store applies it: the one state machine of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Waiting, for this reason (its address does not resolve now, its policy is in
    /// doubt): from `waiting`, a new reason.
    Wait(String),
    /// The attempt failed in a way worth trying again (the relay did not confirm, the
    /// session changed at the last moment): from `sending`, waiting again, not to be
    /// tried before `retry_at_ms`.
    Fail {
        /// What went wrong.
        reason: String,
        /// The earliest time of the next attempt, in ms since the epoch.
        retry_at_ms: u64,
    },
    /// An attempt begins, carried as it says: only from `waiting`, so a message is
    /// claimed at most once at a time.
    Send(Attempt),
    /// Claude Code took it, from `sending`: which session got it, its `msg_id`, and the
    /// receipt as first known.
    Deliver {
        /// The receiving session's id.
        session_id: String,
        /// Its name, when it has one.
        session_name: Option<String>,
        /// Claude Code's id of the sent message, when known.
        msg_id: Option<String>,
        /// What the receiver did with it, when the relay can tell.
        receipt: Option<Receipt>,
    },
    /// A later receipt of a delivered message (`queued` → `read`, `held` → `released`…).
    Receipt(Receipt),
    /// The receiver's policy refuses it, from `waiting` or `sending`: final.
    Refuse(String),
    /// Its expiry passed while it was `waiting`: final.
    Expire,
    /// Its sender cancelled it while it was `waiting` or `unknown`: final.
    Cancel,
    /// The attempt's outcome cannot be told, from `sending`.
    Unknown(String),
    /// Asked to be tried again after `unknown`: `waiting` once more.
    Retry,
    /// Something its receiver told later that is no receipt (it finished its turn),
    /// in words: on a delivered message's timeline.
    Note(String),
}

impl Step {
    /// The state a message in `from` moves to, or `None` when this step does not apply
    /// to a message in that state.
    #[must_use]
    pub const fn from(&self, from: State) -> Option<State> {
        use State::{Cancelled, Delivered, Expired, Refused, Sending, Unknown, Waiting};
        let to = match (self, from) {
            (Self::Wait(_), Waiting) | (Self::Fail { .. }, Sending) | (Self::Retry, Unknown) => {
                Waiting
            }
            (Self::Send(_), Waiting) => Sending,
            // A receiver that refuses it on arrival makes it final as refused.
            (Self::Receipt(receipt), Delivered) if matches!(receipt.outcome, Outcome::Refused) => {
                Refused
            }
            (Self::Deliver { .. }, Sending) | (Self::Receipt(_) | Self::Note(_), Delivered) => {
                Delivered
            }
            (Self::Refuse(_), Waiting | Sending) => Refused,
            (Self::Expire, Waiting) => Expired,
            (Self::Cancel, Waiting | Unknown) => Cancelled,
            (Self::Unknown(_), Sending) => Unknown,
            _ => return None,
        };
        Some(to)
    }

    /// The step's name, for an error that says it did not apply.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::Wait(_) => "wait",
            Self::Fail { .. } => "fail",
            Self::Send(_) => "send",
            Self::Deliver { .. } => "deliver",
            Self::Receipt(_) => "receipt",
            Self::Refuse(_) => "refuse",
            Self::Expire => "expire",
            Self::Cancel => "cancel",
            Self::Unknown(_) => "unknown",
            Self::Retry => "retry",
            Self::Note(_) => "note",
        }
    }
}

/// What carries an attempt, recorded before the hand-over: what a post office started
/// after this one was killed needs to tell whether the message went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The receiving session, as the gate resolved it.
    pub session_id: String,
    /// The sender that hands it over, when the carrier can say before it does.
    pub sender: Option<SenderProcess>,
    /// How long the receiver's transcript was as the attempt began (0: it had none):
    /// what it records of this message comes after.
    pub transcript_len: Option<u64>,
}

impl Attempt {
    /// An attempt to `session_id` whose sender and transcript are not known: a post
    /// office killed during it leaves it `unknown`.
    #[must_use]
    pub fn to(session_id: impl Into<String>) -> Self {
        Self {
            session_id: session_id.into(),
            sender: None,
            transcript_len: None,
        }
    }
}

/// A sender process, told apart from a later one with the same pid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SenderProcess {
    /// Its pid, the leader of its own process group (so everything it started is found
    /// by the group).
    pub pid: u32,
    /// Its start token, as the registry's records hold them.
    pub start_token: String,
    /// Its messaging socket, `uds:<path>` as receivers record where a message came
    /// from, when known before its first turn named it.
    pub address: Option<String>,
}

/// A message to post.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMessage {
    /// The sender's name, as the receiver sees it.
    pub from: String,
    /// An idempotency key: the same key from the same sender again is the same message.
    pub key: Option<String>,
    /// Whom it is for.
    pub to: Address,
    /// The exact text.
    pub text: String,
    /// When it expires unless delivered, in ms since the epoch.
    pub expires_at_ms: u64,
    /// The message it answers, by post id.
    pub in_reply_to: Option<String>,
}

/// A message in: what another session sent to one of our senders, as it was heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inbound {
    /// The sender name of ours it came to.
    pub to: String,
    /// The name the sending session gives itself.
    pub from_name: Option<String>,
    /// Its address, `uds:<socket path>`.
    pub from_address: String,
    /// The sending session's id, when its address is a live session's of this home.
    pub session_id: Option<String>,
    /// The exact text.
    pub text: String,
}

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sent by one of our senders.
    Out,
    /// Sent to one of our senders.
    In,
}

impl Direction {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Out => "out",
            Self::In => "in",
        }
    }

    /// The direction whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Out, Self::In]
            .into_iter()
            .find(|direction| direction.as_str() == name)
    }
}

/// A message as the store holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its post id: 16 hex digits, unique across stores.
    pub id: String,
    /// Its place in the order of posting in this store: first in, first out.
    pub seq: u64,
    /// Which way it went.
    pub direction: Direction,
    /// The sender's name: ours for a message out, the sending session's for one in.
    pub from: String,
    /// Its idempotency key, if it was given one.
    pub key: Option<String>,
    /// Whom it is for.
    pub to: Address,
    /// The exact text.
    pub text: String,
    /// Where it stands.
    pub state: State,
    /// Why it waits, was refused or is unknown; `None` once that no longer applies.
    pub reason: Option<String>,
    /// What the receiver did with it, once delivered.
    pub receipt: Option<Receipt>,
    /// Claude Code's id of the sent message, once known.
    pub msg_id: Option<String>,
    /// The other session: the receiving one once known (out), the sending one (in).
    pub session_id: Option<String>,
    /// That session's name, as last known.
    pub session_name: Option<String>,
    /// The message it answers, by post id.
    pub in_reply_to: Option<String>,
    /// Whether `in_reply_to` was inferred (the latest message delivered to the replying
    /// session before its reply) rather than given.
    pub inferred: bool,
    /// How many attempts began.
    pub attempts: u32,
    /// When it was posted, in ms since the epoch.
    pub created_at_ms: u64,
    /// When it expires unless delivered, in ms since the epoch.
    pub expires_at_ms: u64,
    /// The earliest time of its next attempt, after one that failed (0: any time).
    pub not_before_ms: u64,
    /// The last attempt, once one began.
    pub attempt: Option<Attempt>,
    /// Every change, oldest first, its posting included.
    pub timeline: Vec<Change>,
}

/// One entry of a message's timeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The state it moved to (or stayed in, for a new reason or receipt).
    pub state: State,
    /// When, in ms since the epoch.
    pub at_ms: u64,
    /// The receipt it recorded, if any (its outcome and basis).
    pub receipt: Option<Receipt>,
    /// What happened, in words: the reason, the refusal, the receiving session.
    pub detail: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_and_address_kinds_are_found_by_their_wire_names() {
        for state in State::ALL {
            assert_eq!(State::from_name(state.as_str()), Some(state));
        }
        for kind in [AddressKind::SessionId, AddressKind::Name, AddressKind::Cwd] {
            assert_eq!(AddressKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(State::from_name("Waiting"), None);
    }

    #[test]
    fn a_final_state_takes_no_step_but_a_delivered_messages_later_receipt_or_note() {
        let receipt = Receipt {
            outcome: claude_peer_deliver::Outcome::Read,
            basis: claude_peer_deliver::Basis::Transcript,
        };
        let steps = [
            Step::Wait("w".into()),
            Step::Send(Attempt::to("s")),
            Step::Fail {
                reason: "f".into(),
                retry_at_ms: 0,
            },
            Step::Deliver {
                session_id: "s".into(),
                session_name: None,
                msg_id: None,
                receipt: Some(receipt),
            },
            Step::Receipt(receipt),
            Step::Refuse("r".into()),
            Step::Expire,
            Step::Cancel,
            Step::Unknown("u".into()),
            Step::Retry,
            Step::Note("n".into()),
        ];
        for state in State::ALL.into_iter().filter(|s| s.is_final()) {
            let allowed: Vec<&str> = steps
                .iter()
                .filter(|step| step.from(state).is_some())
                .map(Step::as_str)
                .collect();
            let expected: &[&str] = if state == State::Delivered {
                &["receipt", "note"]
            } else {
                &[]
            };
            assert_eq!(allowed, expected, "from {state}");
        }
        // Only a waiting message is claimed for an attempt.
        for state in State::ALL {
            let send = Step::Send(Attempt::to("s"));
            assert_eq!(send.from(state).is_some(), state == State::Waiting);
        }
    }
}
