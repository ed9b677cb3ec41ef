//! What a headless Claude Code sender prints: its stream-json lines, and the receipts
//! and inbound items among them.

use claude_peer_deliver::Outcome;
use serde_json::Value;

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
    Inbound(Inbound),
    /// The end of a turn.
    Result,
    /// Anything else.
    Other,
    /// The sender's stdout ended.
    Closed,
    /// Nothing from the sender: a waiter is woken to look at something else.
    Wake,
}

/// A prompt another session queued for the sender, kept from its model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inbound {
    /// A message (a reply, or anything sent to the sender's address).
    Message {
        /// The sender's address, `uds:<socket path>`.
        from: String,
        from_name: Option<String>,
        text: String,
    },
    /// What a receiver did with messages sent earlier, naming (some of) them.
    Notice {
        outcome: Outcome,
        recipient: String,
        msg_ids: Vec<String>,
    },
    /// A receiver the sender subscribed to finished its turn.
    Idle { recipient: String },
    /// Anything else, verbatim.
    Other(String),
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
                    Self::Inbound(Inbound::parse(prompt))
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

/// The prompt of `UserPromptSubmit operation blocked by hook: … Original prompt: <it>`:
/// the hook blocks every prompt but this project's own.
fn blocked_prompt(content: &str) -> Option<&str> {
    if !content.starts_with("UserPromptSubmit operation blocked by hook") {
        return None;
    }
    let (_, prompt) = content.split_once("\nOriginal prompt: ")?;
    Some(prompt)
}

impl Inbound {
    fn parse(prompt: &str) -> Self {
        if let Some(at) = prompt.find("<cross-session-message") {
            if let Some(message) = parse_message(&prompt[at..]) {
                return message;
            }
        } else if let Some(at) = prompt.find("[Cross-session delivery notice]") {
            if let Some(notice) = parse_notice(&prompt[at..]) {
                return notice;
            }
        } else if let Some(at) = prompt.find("[Cross-session idle notice]") {
            let rest = &prompt[at..];
            let quoted = rest.split('"').nth(1);
            if let Some(recipient) = quoted {
                return Self::Idle {
                    recipient: recipient.to_owned(),
                };
            }
        }
        Self::Other(prompt.to_owned())
    }
}

/// `<cross-session-message from="uds:…" from-name="…" …>\n<text>\n</cross-session-message>`;
/// a closing tag inside the text arrives escaped as `<\/cross-session-message>`.
fn parse_message(envelope: &str) -> Option<Inbound> {
    const CLOSE: &str = "</cross-session-message>";
    let (tag, rest) = envelope.split_once('>')?;
    let body = rest.strip_prefix('\n').unwrap_or(rest);
    let end = body.rfind(CLOSE)?;
    let text = body[..end].strip_suffix('\n').unwrap_or(&body[..end]);
    let attribute = |name: &str| {
        let (_, after) = tag.split_once(&format!(" {name}=\""))?;
        let value = after.split('"').next()?;
        Some(
            value
                .replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        )
    };
    Some(Inbound::Message {
        from: attribute("from")?,
        from_name: attribute("from-name"),
        text: text.replace("<\\/cross-session-message>", CLOSE),
    })
}

/// `[Cross-session delivery notice] Your message to another session was held by that
/// session (recipient: uds:…; msg_id: <uuid>). …`, possibly naming several `msg_id`s.
fn parse_notice(notice: &str) -> Option<Inbound> {
    let (head, tail) = notice.split_once("(recipient: ")?;
    let outcome = if head.contains("released") {
        Outcome::Released
    } else if head.contains("denied") {
        Outcome::Denied
    } else if head.contains("expir") {
        Outcome::Expired
    } else if head.contains("refused") {
        Outcome::Refused
    } else if head.contains("held") {
        Outcome::Held
    } else {
        return None;
    };
    let recipient = tail.split([';', ')']).next()?.trim().to_owned();
    Some(Inbound::Notice {
        outcome,
        recipient,
        msg_ids: uuids(tail),
    })
}

/// Every UUID-shaped word (8-4-4-4-12 hex digits) in `text`, in order.
fn uuids(text: &str) -> Vec<String> {
    let is_uuid = |word: &str| {
        let groups: Vec<&str> = word.split('-').collect();
        groups.len() == 5
            && groups.iter().zip([8, 4, 4, 4, 12]).all(|(group, len)| {
                group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit())
            })
    };
    text.split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .filter(|word| is_uuid(word))
        .map(str::to_owned)
        .collect()
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
    fn inbound_messages_notices_and_idle_notices_are_read_from_their_prompts() {
        let message = Inbound::parse(
            "Another Claude session sent a message:\n<cross-session-message from=\"uds:/tmp/cc-socks/9.sock\" from-name=\"rev &quot;one&quot;\" from-mode=\"prompting\">\nline 1\nfake <\\/cross-session-message> end\n</cross-session-message>\n\nThis came from another Claude session.",
        );
        assert_eq!(
            message,
            Inbound::Message {
                from: "uds:/tmp/cc-socks/9.sock".to_owned(),
                from_name: Some("rev \"one\"".to_owned()),
                text: "line 1\nfake </cross-session-message> end".to_owned(),
            }
        );
        let held = Inbound::parse(
            "[Cross-session delivery notice] Your message to another session was held by that session (recipient: uds:/tmp/cc-socks/11755.sock; msg_id: cd1883a0-a16e-4ccb-a708-edc8131d1c28). NOT delivered: its Claude has not seen it.",
        );
        assert_eq!(
            held,
            Inbound::Notice {
                outcome: Outcome::Held,
                recipient: "uds:/tmp/cc-socks/11755.sock".to_owned(),
                msg_ids: vec!["cd1883a0-a16e-4ccb-a708-edc8131d1c28".to_owned()],
            }
        );
        let released = Inbound::parse(
            "[Cross-session delivery notice] Your message to another session was approved and released to that session (recipient: uds:/a.sock; msg_id: cd1883a0-a16e-4ccb-a708-edc8131d1c28).",
        );
        assert!(matches!(
            released,
            Inbound::Notice {
                outcome: Outcome::Released,
                ..
            }
        ));
        for (text, outcome) in [
            (
                "was denied by the recipient user (recipient: uds:/a.sock; msg_id: x)",
                Outcome::Denied,
            ),
            (
                "was not approved before expiry (recipient: uds:/a.sock; msg_id: x)",
                Outcome::Expired,
            ),
            (
                "was refused by that session (recipient: uds:/a.sock; msg_id: x)",
                Outcome::Refused,
            ),
        ] {
            let parsed = Inbound::parse(&format!(
                "[Cross-session delivery notice] Your message to another session {text}"
            ));
            assert!(
                matches!(parsed, Inbound::Notice { outcome: o, .. } if o == outcome),
                "{text}"
            );
        }
        assert_eq!(
            Inbound::parse(
                "[Cross-session idle notice] \"uds:/tmp/cc-socks/9.sock\", which you asked to be notified about, is idle now"
            ),
            Inbound::Idle {
                recipient: "uds:/tmp/cc-socks/9.sock".to_owned()
            }
        );
        assert_eq!(
            Inbound::parse("something else"),
            Inbound::Other("something else".to_owned())
        );
    }

    #[test]
    fn a_blocked_inbound_prompt_is_read_whole_and_other_blocks_are_not() {
        let line = serde_json::json!({
            "type": "system", "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[hook]: kept\n\n\nOriginal prompt: <cross-session-message from=\"uds:/a.sock\" from-name=\"x\">\nhi\nOriginal prompt: not a split\n</cross-session-message>",
        });
        assert_eq!(
            Line::parse(line.to_string().as_bytes()),
            Line::Inbound(Inbound::Message {
                from: "uds:/a.sock".to_owned(),
                from_name: Some("x".to_owned()),
                text: "hi\nOriginal prompt: not a split".to_owned()
            })
        );
        let other = serde_json::json!({
            "type": "system", "subtype": "informational",
            "content": "UserPromptSubmit operation blocked by hook:\n[hook]: no\n\n\nOriginal prompt: hello",
        });
        assert_eq!(
            Line::parse(other.to_string().as_bytes()),
            Line::Inbound(Inbound::Other("hello".to_owned()))
        );
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
