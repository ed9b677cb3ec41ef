//! What a headless Claude Code sender prints: its stream-json lines, and the receipts
//! and inbound items among them.

mod notice;

use serde_json::Value;

use notice::parse_tally;
pub(crate) use notice::{Queued, Tally};

/// One stream-json line, reduced to what a relay acts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Printed {
    /// `system/init`: what this Claude Code can do.
    Init {
        version: Option<String>,
        send_message: bool,
        messaging_socket: Option<String>,
    },
    /// A tool's result (`tool_use_result` beside a `tool_result` block).
    ToolResult {
        tool_use_id: String,
        success: bool,
        msg_id: Option<String>,
        /// What Claude Code said: its result message, or the error text.
        text: String,
    },
    /// A receiver's decision about messages sent earlier, as the sender's own
    /// informational line counts them.
    Tally(Tally),
    /// A queued prompt the `user-prompt-submit` hook kept from the model: its items.
    Queued(Vec<Queued>),
    /// The end of a turn.
    Result,
    /// The conversation was cleared (`/clear`): a fresh one, in the same process, at the
    /// same address.
    Reset,
    /// Anything else.
    Other,
}

impl Printed {
    /// Parses one line; a line that is not JSON is `Other` (Claude Code prints nothing
    /// else on stdout in stream-json mode, and a relay must not trip over it).
    pub(crate) fn parse(line: &[u8]) -> Self {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            return Self::Other;
        };
        let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
        match (
            str_of(&value, "type").as_deref(),
            str_of(&value, "subtype").as_deref(),
        ) {
            (Some("system"), Some("init")) => Self::Init {
                version: str_of(&value, "claude_code_version"),
                send_message: value
                    .get("tools")
                    .and_then(Value::as_array)
                    .is_some_and(|tools| tools.iter().any(|t| t.as_str() == Some("SendMessage"))),
                messaging_socket: str_of(&value, "messaging_socket_path"),
            },
            (Some("system"), Some("informational")) => {
                let content = str_of(&value, "content").unwrap_or_default();
                if let Some(prompt) = blocked_prompt(&content) {
                    Self::Queued(Queued::parse_all(prompt))
                } else {
                    parse_tally(&content).map_or(Self::Other, Self::Tally)
                }
            }
            (Some("user"), _) => tool_result(&value).unwrap_or(Self::Other),
            (Some("result"), _) => Self::Result,
            (Some("conversation_reset"), _) => Self::Reset,
            _ => Self::Other,
        }
    }
}

fn tool_result(value: &Value) -> Option<Printed> {
    let blocks = value.pointer("/message/content")?.as_array()?;
    let block = blocks
        .iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))?;
    let tool_use_id = block.get("tool_use_id")?.as_str()?.to_owned();
    let result = value.get("tool_use_result");
    let success = block.get("is_error").and_then(Value::as_bool) != Some(true)
        && result
            .and_then(|r| r.get("success"))
            .and_then(Value::as_bool)
            == Some(true);
    let msg_id = result
        .and_then(|r| r.get("msg_id"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let text = result
        .and_then(|r| r.get("message").or_else(|| r.get("error")))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| result.and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| block_text(block.get("content")));
    Some(Printed::ToolResult {
        tool_use_id,
        success,
        msg_id,
        text,
    })
}

/// A tool result's content: a string, or text blocks.
fn block_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The prompt of `UserPromptSubmit operation blocked by hook: … Original prompt: <it>`:
/// the hook blocks every prompt but this project's own.
fn blocked_prompt(content: &str) -> Option<&str> {
    if !content.starts_with("UserPromptSubmit operation blocked by hook") {
        return None;
    }
    let (_, prompt) = content.split_once("\nOriginal prompt: ")?;
    Some(prompt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_inbound_prompt_is_read_whole_and_other_blocks_are_not() {
        let line = serde_json::json!({
            "type": "system", "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[hook]: kept\n\n\nOriginal prompt: <cross-session-message from=\"uds:/a.sock\" from-name=\"x\">\nhi\nOriginal prompt: not a split\n</cross-session-message>",
        });
        assert_eq!(
            Printed::parse(line.to_string().as_bytes()),
            Printed::Queued(vec![Queued::Message {
                from: "uds:/a.sock".to_owned(),
                from_name: Some("x".to_owned()),
                text: "hi\nOriginal prompt: not a split".to_owned()
            }])
        );
        let other = serde_json::json!({
            "type": "system", "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[hook]: no\n\n\nOriginal prompt: hello",
        });
        assert_eq!(
            Printed::parse(other.to_string().as_bytes()),
            Printed::Queued(vec![Queued::Other("hello".to_owned())])
        );
        assert_eq!(Printed::parse(b"not json"), Printed::Other);
    }

    #[test]
    fn a_cleared_conversation_is_a_reset() {
        // As 2.1.332 prints it after `/clear` in stream-json input.
        let line = r#"{"type":"conversation_reset","new_conversation_id":"7248f3f8-8cdb-4190-8ca3-2a34ace2ebd3","uuid":"7248f3f8-8cdb-4190-8ca3-2a34ace2ebd3","trigger":"clear","user_message_uuid":"f9ff5bae-a2cf-4afd-ae51-b851cb7fac57","timestamp":"2026-12-07T15:50:32.425Z","session_id":"bd295a6f-09b0-45ad-829f-70fdc3448b2d"}"#;
        assert_eq!(Printed::parse(line.as_bytes()), Printed::Reset);
    }

    #[test]
    fn a_tool_result_carries_success_and_the_msg_id() {
        let line = serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": [{"tool_use_id": "toolu_1", "type": "tool_result", "content": [{"type": "text", "text": "{…}"}]}]},
            "tool_use_result": {"success": true, "message": "in that session's inbox", "msg_id": "ff7de6b6"},
        });
        assert_eq!(
            Printed::parse(line.to_string().as_bytes()),
            Printed::ToolResult {
                tool_use_id: "toolu_1".to_owned(),
                success: true,
                msg_id: Some("ff7de6b6".to_owned()),
                text: "in that session's inbox".to_owned(),
            }
        );
        let blocked = serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": [{"tool_use_id": "toolu_1", "type": "tool_result", "is_error": true, "content": "PreToolUse:SendMessage hook error: [hook]: not_live: gone"}]},
            "tool_use_result": "Error: PreToolUse:SendMessage hook error: [hook]: not_live: gone",
        });
        assert_eq!(
            Printed::parse(blocked.to_string().as_bytes()),
            Printed::ToolResult {
                tool_use_id: "toolu_1".to_owned(),
                success: false,
                msg_id: None,
                text: "Error: PreToolUse:SendMessage hook error: [hook]: not_live: gone".to_owned(),
            }
        );
    }
}
