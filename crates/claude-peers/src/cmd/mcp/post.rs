//! The post office as MCP tools: `send_message` with `queue`, and `outbox`. Each answers
//! what the command of the same job prints with `--json`, from the same code.

use std::path::PathBuf;
use std::time::Duration;

use claude_peer_post::protocol::{Record, Request};
use rmcp::ErrorData;
use serde::Serialize;

use crate::cmd::queue;
use crate::error::Failure;
use crate::json::{QueuedJson, QueuedResultsJson};
use crate::ops::post::{self, Start};
use crate::ops::{self, Context};

use super::args::{OutboxArgs, SendArgs};
use super::to_json;

/// How many records `outbox` lists when the call does not say.
pub(super) const DEFAULT_LIMIT: u32 = 100;
/// The most records one `outbox` answer lists: a result is one message to the client.
pub(super) const MAX_LIMIT: u32 = 1000;

/// Hands `order` to the post office: `send --queue --json`'s answer, one record for one
/// target, the `results` shape for several.
pub(super) fn queue(
    ctx: &Context,
    claude: Option<PathBuf>,
    order: &queue::Order,
) -> Result<String, Failure> {
    let results = queue::post_all(ctx, order, claude)?;
    if let [(_, only)] = results.as_slice() {
        return to_json(&QueuedJson::new(only.as_ref().map_err(Clone::clone)?));
    }
    to_json(&QueuedResultsJson::new(&results))
}

/// What an `outbox` call does.
#[derive(Debug)]
pub(super) enum Action {
    List { limit: u32 },
    Cancel(Vec<String>),
    Retry(Vec<String>),
}

impl Action {
    /// What the arguments ask for: a non-empty `cancel` or `retry`, or else a listing.
    pub(super) fn of(args: OutboxArgs) -> Result<Self, ErrorData> {
        match (args.cancel, args.retry, args.limit) {
            (None, None, limit) => match limit.unwrap_or(DEFAULT_LIMIT) {
                limit @ 1..=MAX_LIMIT => Ok(Self::List { limit }),
                other => Err(ErrorData::invalid_params(
                    format!("limit must be from 1 to {MAX_LIMIT}, not {other}"),
                    None,
                )),
            },
            (Some(ids), None, None) if !ids.is_empty() => Ok(Self::Cancel(ids)),
            (None, Some(ids), None) if !ids.is_empty() => Ok(Self::Retry(ids)),
            _ => Err(ErrorData::invalid_params(
                "pass a non-empty `cancel` or `retry`, or neither to list (with `limit`)",
                None,
            )),
        }
    }
}

/// The outbox tool's answer: the records listed or changed, how many are not final (when
/// listing), and each id that could not be changed.
#[derive(Debug, Serialize)]
struct OutboxJson<'a> {
    messages: &'a [Record],
    waiting: Option<usize>,
    failed: &'a [FailedJson],
}

#[derive(Debug, Serialize)]
struct FailedJson {
    id: String,
    error: &'static str,
    message: String,
}

/// Lists the messages not yet final, oldest first (the first `limit`; `waiting` counts
/// them all), or cancels or retries messages by id, through the post office (started,
/// with `claude` as its sender's Claude Code, when none runs).
pub(super) fn outbox(
    ctx: &Context,
    claude: Option<PathBuf>,
    action: Action,
) -> Result<String, Failure> {
    let mut client = post::connect(ctx, Some(&Start { claude }))?;
    let (ids, step): (Vec<String>, fn(String) -> Request) = match action {
        Action::List { limit } => {
            let (mut messages, mut waiting) = (Vec::new(), 0);
            client
                .request(&Request::Outbox, |record| {
                    waiting += 1;
                    if messages.len() < limit as usize {
                        messages.push(record);
                    }
                })
                .map_err(ops::Error::from)?;
            return to_json(&OutboxJson {
                messages: &messages,
                waiting: Some(waiting),
                failed: &[],
            });
        }
        Action::Cancel(ids) => (ids, |id| Request::Cancel { id }),
        Action::Retry(ids) => (ids, |id| Request::Retry { id }),
    };
    let (mut messages, mut failed) = (Vec::new(), Vec::new());
    for id in ids {
        match client.request(&step(id.clone()), |_| {}) {
            Ok(done) => messages.extend(done.record),
            Err(err) => {
                let failure = Failure::from(ops::Error::from(err));
                failed.push(FailedJson {
                    id,
                    error: failure.name,
                    message: failure.message,
                });
            }
        }
    }
    to_json(&OutboxJson {
        messages: &messages,
        waiting: None,
        failed: &failed,
    })
}

/// What `send_message` with `queue` hands over: sent under `from`, else the server's
/// sender name `inbox_from` once it has one (the post office has a sender of each name).
pub(super) fn order(args: SendArgs, inbox_from: Option<String>) -> Result<queue::Order, ErrorData> {
    let expire = expiry(args.expire_s)?;
    let targets = match (args.session_id, args.session_ids) {
        (Some(target), None) => vec![target],
        (None, Some(targets)) if !targets.is_empty() => targets,
        _ => {
            return Err(ErrorData::invalid_params(
                "pass `session_id`, or a non-empty `session_ids` for several sessions; nothing was queued",
                None,
            ));
        }
    };
    Ok(queue::Order {
        targets,
        cwd: None,
        from: args
            .from
            .or(inbox_from)
            .unwrap_or_else(|| claude_peer_sender::DEFAULT_SENDER_NAME.to_owned()),
        text: args.message,
        expire,
        key: args.id,
        in_reply_to: None,
    })
}

/// `expire_s` as a duration, when it is one the post office takes.
fn expiry(expire_s: Option<u64>) -> Result<Duration, ErrorData> {
    let Some(seconds) = expire_s else {
        return Ok(claude_peer_post::DEFAULT_EXPIRY);
    };
    let expiry = Duration::from_secs(seconds);
    if seconds == 0 || expiry > claude_peer_post::MAX_EXPIRY {
        let message = format!(
            "expire_s must be from 1 to {} seconds (30 days), not {seconds}",
            claude_peer_post::MAX_EXPIRY.as_secs()
        );
        return Err(ErrorData::invalid_params(message, None));
    }
    Ok(expiry)
}
