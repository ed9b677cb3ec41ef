//! The history as MCP tools: `history` (what `log --json` lists) and `reply`.

use std::sync::Arc;

use claude_peer_deliver::check_message;
use claude_peer_post::protocol::Record;
use claude_peer_post::{Direction, LogFilter, Order, Store, default_store_path};
use claude_peer_sender::Idle;
use rmcp::ErrorData;
use rmcp::model::CallToolResult;
use serde::Serialize;

use super::args::{HistoryArgs, ReplyArgs};
use super::inbox::Whom;
use super::post::MAX_LIMIT;
use super::{Peers, blocking, post, to_json, tool_result};
use crate::cmd::queue;
use crate::error::Failure;
use crate::ops::{self, history};

/// `history`: the records the call picks, or a JSON-RPC error for a malformed call (a
/// search the index cannot run among them).
pub(super) async fn history(args: HistoryArgs) -> Result<CallToolResult, ErrorData> {
    let filter = filter(args)?;
    match tokio::task::spawn_blocking(move || read(&filter)).await {
        Ok(Ok(answer)) => Ok(tool_result(answer)),
        Ok(Err(malformed)) => Err(malformed),
        Err(err) => Ok(tool_result(Err(Failure::error(
            "internal",
            format!("the tool's work failed: {err}"),
        )))),
    }
}

/// `reply`: sent through the server's sender to the live session the message came
/// from, else queued for its name.
pub(super) async fn reply(
    peers: &Peers,
    args: ReplyArgs,
    cancelled: Box<dyn Fn() -> bool + Send>,
) -> Result<CallToolResult, ErrorData> {
    if let Err(err @ claude_peer_deliver::Error::MessageTooLarge { .. }) =
        check_message(&args.message)
    {
        return Err(ErrorData::invalid_params(err.to_string(), None));
    }
    let config = Arc::clone(&peers.config);
    let id = args.id.clone();
    let to = tokio::task::spawn_blocking(move || history::reply_to(&config.ctx, &id)).await;
    let to = match to {
        Ok(Ok(to)) => to,
        Ok(Err(err)) => return Ok(tool_result(Err(Failure::from(err)))),
        Err(err) => {
            return Ok(tool_result(Err(Failure::error(
                "internal",
                format!("the tool's work failed: {err}"),
            ))));
        }
    };
    if to.queue {
        let order = queue::Order {
            targets: vec![to.target],
            cwd: None,
            from: peers.sender_name().await,
            text: args.message,
            expire: claude_peer_post::DEFAULT_EXPIRY,
            key: None,
            in_reply_to: Some(to.answers),
        };
        let config = Arc::clone(&peers.config);
        return Ok(blocking(move || post::queue(&config.ctx, config.claude.clone(), &order)).await);
    }
    let inbox = match peers.inbox(None).await {
        Ok(inbox) => inbox?,
        Err(failure) => return Ok(tool_result(Err(failure))),
    };
    let message = (args.message, Some(to.answers));
    Ok(tool_result(
        inbox
            .send(Whom::One(to.target), message, Idle::Ignore, cancelled)
            .await,
    ))
}

/// How many records `history` lists when the call does not say.
const DEFAULT_HISTORY_LIMIT: u32 = 50;

/// What a `history` call reads, or why the call is malformed.
pub(super) fn filter(args: HistoryArgs) -> Result<LogFilter, ErrorData> {
    let limit = args.limit.unwrap_or(DEFAULT_HISTORY_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ErrorData::invalid_params(
            format!("limit must be from 1 to {MAX_LIMIT}, not {limit}"),
            None,
        ));
    }
    let direction = match args.direction.as_deref() {
        None => None,
        Some(word) => Some(Direction::from_name(word).ok_or_else(|| {
            ErrorData::invalid_params(format!("direction is `in` or `out`, not `{word}`"), None)
        })?),
    };
    let chat = args.with.is_some() || args.thread.is_some();
    Ok(LogFilter {
        with: args.with,
        search: args.search,
        thread: args.thread,
        direction,
        limit: Some(u64::from(limit)),
        order: if chat {
            Order::OldestFirst
        } else {
            Order::NewestFirst
        },
        ..LogFilter::default()
    })
}

#[derive(Debug, Serialize)]
struct HistoryJson<'a> {
    messages: &'a [Record],
}

/// The records `filter` picks from the user's history, as `log --json` lists them; a
/// search the index cannot run is a malformed call.
fn read(filter: &LogFilter) -> Result<Result<String, Failure>, ErrorData> {
    let read = || -> Result<Vec<Record>, claude_peer_post::Error> {
        let store = Store::open(&default_store_path()?)?;
        let mut messages = Vec::new();
        store.log(filter, |logged| {
            messages.push(Record::from(&logged.message));
            std::ops::ControlFlow::Continue(())
        })?;
        Ok(messages)
    };
    match read() {
        Ok(messages) => Ok(to_json(&HistoryJson {
            messages: &messages,
        })),
        Err(err @ claude_peer_post::Error::Search { .. }) => {
            Err(ErrorData::invalid_params(err.to_string(), None))
        }
        Err(err) => Ok(Err(Failure::from(ops::Error::from(err)))),
    }
}
