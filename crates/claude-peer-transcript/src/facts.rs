//! One transcript line read for what it says about a cross-session message.

use serde_json::Value;

use crate::envelope;

/// What a receiver wrote down about a cross-session message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fact {
    /// Taken into its queue (about 1 ms after the send). The line names no `msg_id`:
    /// match it by sender and text.
    Queued {
        /// The sender's address, `uds:<socket path>`.
        from: String,
        /// The name the sender gave itself (unverified), when it gave one.
        from_name: Option<String>,
        /// The message text.
        text: String,
    },
    /// Given to its model: at once when idle, after its running turn when busy.
    Read {
        /// The `msg_id` the sender's tool result named.
        msg_id: String,
        /// The sender's address, when the line gives it.
        from: Option<String>,
    },
    /// Held by its `crossSessionInbound` policy, not given to its model.
    Held {
        /// The sender's address, `uds:<socket path>`.
        from: String,
        /// The start of the text as Claude Code quotes it (cut by it for long texts).
        preview: String,
    },
}

/// Substrings without which a line cannot be a fact: most lines (some of them large)
/// are passed over without being parsed.
const MARKERS: [&str; 3] = ["\"queue-operation\"", "\"origin\"", "Held peer message"];

/// How a held message's line begins, before the sender's address.
const HELD: &str = "Held peer message — from ";

/// What one transcript line (without its newline) says about a cross-session message;
/// `None` for every other line, and for anything malformed.
///
/// ```
/// use claude_peer_transcript::{Fact, fact};
///
/// let line = br#"{"type":"user","isMeta":true,"origin":{"kind":"peer","msg_id":"ab3549f6","from":"uds:/tmp/a.sock"}}"#;
/// assert_eq!(
///     fact(line),
///     Some(Fact::Read { msg_id: "ab3549f6".to_owned(), from: Some("uds:/tmp/a.sock".to_owned()) })
/// );
/// assert_eq!(fact(br#"{"type":"assistant"}"#), None);
/// ```
#[must_use]
pub fn fact(line: &[u8]) -> Option<Fact> {
    let text = std::str::from_utf8(line).ok()?;
    if !MARKERS.iter().any(|marker| text.contains(marker)) {
        return None;
    }
    let entry: Value = serde_json::from_str(text).ok()?;
    let field = |name: &str| entry.get(name).and_then(Value::as_str);
    match field("type")? {
        "queue-operation" if field("operation")? == "enqueue" => {
            let content = field("content")?;
            if !content.starts_with("<cross-session-message") {
                return None;
            }
            let message = envelope::parse(content)?;
            Some(Fact::Queued {
                from: message.from,
                from_name: message.from_name,
                text: message.text,
            })
        }
        "user" if entry.get("isMeta").and_then(Value::as_bool) == Some(true) => {
            let origin = entry.get("origin")?;
            let of = |name: &str| origin.get(name).and_then(Value::as_str);
            if of("kind")? != "peer" {
                return None;
            }
            Some(Fact::Read {
                msg_id: of("msg_id")?.to_owned(),
                from: of("from").map(str::to_owned),
            })
        }
        "system" if field("subtype")? == "informational" => held(field("content")?),
        _ => None,
    }
}

/// `Held peer message — from uds:… [verified pid N] (peer claims name: …); preview:
/// «<text>» — not delivered to Claude (1 held). …`
fn held(content: &str) -> Option<Fact> {
    let rest = content.strip_prefix(HELD)?;
    let from = rest.split(char::is_whitespace).next()?;
    let (_, quoted) = rest.split_once("preview: «")?;
    let end = quoted.rfind("» — ").or_else(|| quoted.rfind('»'))?;
    if from.is_empty() {
        return None;
    }
    Some(Fact::Held {
        from: from.to_owned(),
        preview: quoted[..end].to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACCEPT: &str = include_str!("../tests/fixtures/accept.jsonl");
    const BUSY: &str = include_str!("../tests/fixtures/busy.jsonl");
    const HOLD: &str = include_str!("../tests/fixtures/hold.jsonl");

    fn facts_of(transcript: &str) -> Vec<Fact> {
        transcript
            .lines()
            .filter_map(|line| fact(line.as_bytes()))
            .collect()
    }

    #[test]
    fn an_accepted_message_is_queued_then_read() {
        assert_eq!(
            facts_of(ACCEPT),
            [
                Fact::Queued {
                    from: "uds:/tmp/cc-socks/22051.sock".to_owned(),
                    from_name: Some("claude-peers".to_owned()),
                    text: "hello accept".to_owned(),
                },
                Fact::Read {
                    msg_id: "ab3549f6-d230-4229-a93a-2da29952f856".to_owned(),
                    from: Some("uds:/tmp/cc-socks/22051.sock".to_owned()),
                },
            ],
            "the dequeue, the api-request and the turn's end say nothing of the message"
        );
    }

    #[test]
    fn a_busy_receiver_queues_then_reads_and_a_typed_prompt_is_no_fact() {
        assert_eq!(
            facts_of(BUSY),
            [
                Fact::Queued {
                    from: "uds:/tmp/cc-socks/22130.sock".to_owned(),
                    from_name: Some("claude-peers".to_owned()),
                    text: "hello busy".to_owned(),
                },
                Fact::Read {
                    msg_id: "981f1419-0b93-4d24-af78-9116c6b85746".to_owned(),
                    from: Some("uds:/tmp/cc-socks/22130.sock".to_owned()),
                },
            ],
            "the human prompt has an origin of kind human: not a fact"
        );
    }

    #[test]
    fn a_held_message_is_held_with_its_sender_and_preview() {
        assert_eq!(
            facts_of(HOLD),
            [Fact::Held {
                from: "uds:/tmp/cc-socks/22166.sock".to_owned(),
                preview: "hello hold".to_owned(),
            }]
        );
    }

    #[test]
    fn a_preview_keeps_guillemets_of_its_own_and_is_kept_as_written() {
        let line = serde_json::json!({
            "type": "system",
            "subtype": "informational",
            "content": "Held peer message — from uds:/a.sock [verified pid 1] (peer claims name: x); preview: «a » — b «c»…» — not delivered to Claude (1 held).",
        })
        .to_string();
        assert_eq!(
            fact(line.as_bytes()),
            Some(Fact::Held {
                from: "uds:/a.sock".to_owned(),
                preview: "a » — b «c»…".to_owned(),
            })
        );
    }

    #[test]
    fn malformed_and_unrelated_lines_are_no_facts() {
        let lines: &[&str] = &[
            "",
            "not json \"origin\"",
            "{\"type\":\"queue-operation\",\"operation\":\"enqueue\"",
            r#"{"type":"queue-operation","operation":"dequeue","content":"<cross-session-message from=\"uds:/a\">\nx\n</cross-session-message>"}"#,
            r#"{"type":"queue-operation","operation":"enqueue","content":"a typed prompt"}"#,
            r#"{"type":"queue-operation","operation":"enqueue","content":"<cross-session-message from-name=\"x\">\nx\n</cross-session-message>"}"#,
            r#"{"type":"user","isMeta":false,"origin":{"kind":"peer","msg_id":"m"}}"#,
            r#"{"type":"user","origin":{"kind":"peer","msg_id":"m"}}"#,
            r#"{"type":"user","isMeta":true,"origin":{"kind":"human","msg_id":"m"}}"#,
            r#"{"type":"user","isMeta":true,"origin":{"kind":"peer","msg_id":7}}"#,
            r#"{"type":"user","isMeta":true,"origin":"peer"}"#,
            r#"{"type":"assistant","isMeta":true,"origin":{"kind":"peer","msg_id":"m"}}"#,
            r#"{"type":"system","subtype":"warning","content":"Held peer message — from uds:/a preview: «x»"}"#,
            r#"{"type":"system","subtype":"informational","content":"Held peer message — from uds:/a.sock, no preview"}"#,
            r#"{"type":"system","subtype":"informational","content":"Not a Held peer message — from uds:/a preview: «x»"}"#,
            r#"{"type":"attachment","content":"\"origin\" Held peer message \"queue-operation\""}"#,
            r#"["queue-operation","origin"]"#,
        ];
        for line in lines {
            assert_eq!(fact(line.as_bytes()), None, "{line}");
        }
        assert_eq!(fact(b"\xff\"origin\""), None, "not UTF-8");
    }

    #[test]
    fn a_read_line_without_a_sender_is_still_read() {
        assert_eq!(
            fact(
                br#"{"type":"user","isMeta":true,"origin":{"kind":"peer","msg_id":"m","from":3}}"#
            ),
            Some(Fact::Read {
                msg_id: "m".to_owned(),
                from: None,
            })
        );
    }
}
