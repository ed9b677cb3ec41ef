//! The arguments of the MCP tools, as their schemas show them to a client.

use rmcp::schemars;
use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct ListArgs {
    /// Every record in the registry with its liveness verdict and reason, not only the live sessions.
    #[serde(default)]
    pub(super) all: bool,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct ShowArgs {
    /// A session id, or the name of exactly one live session.
    pub(super) session: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct PolicyArgs {
    /// The session's working directory, an absolute path (default: the server's).
    pub(super) cwd: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct SendArgs {
    /// The receiving session: its id (from `list_sessions`) or the name of one live session.
    pub(super) session_id: Option<String>,
    /// Instead of `session_id`: several receiving sessions (ids or names), each sent once.
    pub(super) session_ids: Option<Vec<String>>,
    /// The text to deliver, at most 65536 bytes.
    pub(super) message: String,
    /// The sender's name, which the receiver sees (default: claude-peers); the server's
    /// one sender takes the first send's, and later calls must give the same or none.
    pub(super) from: Option<String>,
    /// Also subscribe to the receiver's next idle moment: an `idle` event follows.
    #[serde(default)]
    pub(super) notify_when_idle: bool,
    /// Hand it to this user's post office instead (started when none runs), which keeps
    /// it until its receiver can take it and answers at once with its post id; it is
    /// sent under `from` (default: this server's sender name) by the post office's own
    /// sender, so replies to it do not come back here.
    #[serde(default)]
    pub(super) queue: bool,
    /// With `queue`: how long it may wait to be delivered, in seconds, at most 30 days
    /// (default: 1 day).
    pub(super) expire_s: Option<u64>,
    /// With `queue`: an idempotency key: a call with a key this sender name already used
    /// answers the first message's record and queues nothing.
    pub(super) id: Option<String>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct OutboxArgs {
    /// Cancel these waiting or unknown messages (post ids): they are never delivered.
    pub(super) cancel: Option<Vec<String>>,
    /// Try these unknown messages again (their earlier attempt may have been delivered).
    pub(super) retry: Option<Vec<String>>,
    /// Without `cancel` or `retry`: list at most this many, from 1 to 1000 (default: 100).
    pub(super) limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct WaitArgs {
    /// How long to wait for an event, in seconds, from 0 to 300 (default: 30).
    #[schemars(with = "Option<f64>")]
    pub(super) timeout_s: Option<Value>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct HistoryArgs {
    /// The conversation with one session (its id or name), both ways, oldest first.
    pub(super) with: Option<String>,
    /// Full-text search of the texts, newest first: words, "a phrase", word*, AND, OR,
    /// NOT, brackets.
    pub(super) search: Option<String>,
    /// A message (post id) and everything that answered it, transitively, oldest first.
    pub(super) thread: Option<String>,
    /// Only messages `in` (sent to our senders) or `out`.
    pub(super) direction: Option<String>,
    /// At most this many, the newest, from 1 to 1000 (default: 50).
    pub(super) limit: Option<u32>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub(super) struct ReplyArgs {
    /// The post id of the message to answer: one that came in (an event `message`'s
    /// `id`, or a `history` record's with direction `in`).
    pub(super) id: String,
    /// The reply, at most 65536 bytes.
    pub(super) message: String,
}
