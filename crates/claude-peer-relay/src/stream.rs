//! What a headless Claude Code sender prints: its stream-json lines, and the receipts
//! and inbound items among them.

use serde_json::Value;

use crate::hook::is_inbound;

/// One stream-json line, reduced to what a relay acts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Line {
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
    /// A receiver's decision about a message sent earlier.
    Receipt(Receipt),
    /// A queued prompt the `user-prompt-submit` hook kept from the model.
    Inbound(String),
    /// The end of a turn.
    Result,
    /// Anything else.
    Other,
}

/// What a receiver did with a message, as its notice says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Delivered: no notice came within the receipt window.
    Accepted,
    /// Held for the receiving user's approval.
    Held,
    /// Held earlier, then approved and delivered.
    Released,
    /// Held earlier, then declined by the receiving user.
    Denied,
    /// Held earlier, and not approved before it expired.
    Expired,
    /// Refused by the receiver's policy; not delivered.
    Refused,
}

impl Outcome {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Held => "held",
            Self::Released => "released",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Refused => "refused",
        }
    }
}

/// A receiver's notice: `Cross-session message held by the receiving session
/// (recipient: uds:/…)`, or coalesced, `Cross-session messages (35) held …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Receipt {
    pub(crate) outcome: Outcome,
    /// The receiver's address as the notice gives it (`uds:<socket path>`).
    pub(crate) recipient: String,
    /// How many messages the notice covers.
    pub(crate) count: usize,
}

impl Line {
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
                    Self::Inbound(prompt.to_owned())
                } else {
                    parse_receipt(&content).map_or(Self::Other, Self::Receipt)
                }
            }
            (Some("user"), _) => tool_result(&value).unwrap_or(Self::Other),
            (Some("result"), _) => Self::Result,
            _ => Self::Other,
        }
    }
}

fn tool_result(value: &Value) -> Option<Line> {
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
    Some(Line::ToolResult {
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

/// The prompt of `UserPromptSubmit operation blocked by hook: … Original prompt: <it>`,
/// when it is an inbound item.
fn blocked_prompt(content: &str) -> Option<&str> {
    if !content.starts_with("UserPromptSubmit operation blocked by hook") {
        return None;
    }
    let (_, prompt) = content.split_once("\nOriginal prompt: ")?;
    is_inbound(prompt).then_some(prompt)
}

/// `Cross-session message <outcome> … (recipient: <address>)`, or the coalesced
/// `Cross-session messages (<count>) <outcome> …`.
pub(crate) fn parse_receipt(content: &str) -> Option<Receipt> {
    let rest = content.strip_prefix("Cross-session message")?;
    let (count, rest) = match rest.strip_prefix("s (") {
        Some(rest) => {
            let (count, rest) = rest.split_once(')')?;
            (count.parse().ok()?, rest)
        }
        None => (1, rest),
    };
    let word = rest.split_whitespace().next()?;
    let outcome = match word {
        "held" => Outcome::Held,
        "released" => Outcome::Released,
        "denied" => Outcome::Denied,
        "expired" => Outcome::Expired,
        "refused" => Outcome::Refused,
        _ => return None,
    };
    let (_, after) = rest.split_once("(recipient: ")?;
    let recipient = after.split([')', ';']).next()?.trim().to_owned();
    Some(Receipt {
        outcome,
        recipient,
        count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipts_are_read_from_the_notices_claude_code_prints() {
        let cases = [
            (
                "Cross-session message held by the receiving session (recipient: uds:/tmp/cc-socks/11755.sock). Claude in that session hasn't seen it.",
                Outcome::Held,
                1,
            ),
            (
                "Cross-session message released after approval (recipient: uds:/tmp/cc-socks/11755.sock).",
                Outcome::Released,
                1,
            ),
            (
                "Cross-session message denied (recipient: uds:/tmp/cc-socks/11755.sock). The recipient's user declined it; it was not delivered.",
                Outcome::Denied,
                1,
            ),
            (
                "Cross-session message expired without approval (recipient: uds:/tmp/cc-socks/11755.sock). It was not delivered.",
                Outcome::Expired,
                1,
            ),
            (
                "Cross-session message refused (recipient: uds:/tmp/cc-socks/11755.sock). The receiving session refuses messages; it was not delivered.",
                Outcome::Refused,
                1,
            ),
            (
                "Cross-session messages (35) held by the receiving session (recipient: uds:/tmp/cc-socks/11755.sock).",
                Outcome::Held,
                35,
            ),
        ];
        for (content, outcome, count) in cases {
            assert_eq!(
                parse_receipt(content),
                Some(Receipt {
                    outcome,
                    recipient: "uds:/tmp/cc-socks/11755.sock".to_owned(),
                    count
                }),
                "{content}"
            );
        }
        assert_eq!(parse_receipt("Cross-session message sent somewhere"), None);
        assert_eq!(
            parse_receipt("Cross-session messages (x) held (recipient: a)"),
            None
        );
        assert_eq!(parse_receipt("Something else (recipient: a)"), None);
    }

    #[test]
    fn a_blocked_inbound_prompt_is_read_whole_and_other_blocks_are_not() {
        let line = serde_json::json!({
            "type": "system", "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[hook]: kept\n\n\nOriginal prompt: <cross-session-message from=\"uds:/a.sock\" from-name=\"x\">\nhi\nOriginal prompt: not a split\n</cross-session-message>",
        });
        assert_eq!(
            Line::parse(line.to_string().as_bytes()),
            Line::Inbound(
                "<cross-session-message from=\"uds:/a.sock\" from-name=\"x\">\nhi\nOriginal prompt: not a split\n</cross-session-message>".to_owned()
            )
        );
        let ours = serde_json::json!({
            "type": "system", "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[hook]: no\n\n\nOriginal prompt: hello",
        });
        assert_eq!(Line::parse(ours.to_string().as_bytes()), Line::Other);
        assert_eq!(Line::parse(b"not json"), Line::Other);
    }

    #[test]
    fn a_tool_result_carries_success_and_the_msg_id() {
        let line = serde_json::json!({
            "type": "user",
            "message": {"role": "user", "content": [{"tool_use_id": "toolu_1", "type": "tool_result", "content": [{"type": "text", "text": "{…}"}]}]},
            "tool_use_result": {"success": true, "message": "in that session's inbox", "msg_id": "ff7de6b6"},
        });
        assert_eq!(
            Line::parse(line.to_string().as_bytes()),
            Line::ToolResult {
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
            Line::parse(blocked.to_string().as_bytes()),
            Line::ToolResult {
                tool_use_id: "toolu_1".to_owned(),
                success: false,
                msg_id: None,
                text: "Error: PreToolUse:SendMessage hook error: [hook]: not_live: gone".to_owned(),
            }
        );
    }
}
