//! What a tool answers: a command's JSON as the result's text and structured content,
//! or a failure as a tool error.

use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::Value;
use tokio::task::JoinError;

use crate::error::Failure;

pub(crate) fn to_json(value: &impl Serialize) -> Result<String, Failure> {
    serde_json::to_string(value).map_err(|err| Failure::error("internal", err.to_string()))
}

/// Runs a command's blocking work off the protocol loop, as [`tool_result`].
pub(super) async fn blocking(
    work: impl FnOnce() -> Result<String, Failure> + Send + 'static,
) -> CallToolResult {
    tool_result(joined(tokio::task::spawn_blocking(work).await))
}

/// Blocking work's result, or why it has none.
fn joined(done: Result<Result<String, Failure>, JoinError>) -> Result<String, Failure> {
    done.unwrap_or_else(|err| {
        Err(Failure::error(
            "internal",
            format!("the tool's work failed: {err}"),
        ))
    })
}

/// A command's JSON, in its key order, as the result's text and, parsed, its structured
/// content; a failure is a tool error carrying the failure's JSON.
pub(super) fn tool_result(result: Result<String, Failure>) -> CallToolResult {
    let (text, is_error) = match result {
        Ok(text) => (text, false),
        Err(failure) => (failure.json(), true),
    };
    let mut result = if is_error {
        CallToolResult::structured_error(serde_json::from_str(&text).unwrap_or(Value::Null))
    } else {
        CallToolResult::structured(serde_json::from_str(&text).unwrap_or(Value::Null))
    };
    result.content = vec![ContentBlock::text(text)];
    result
}
