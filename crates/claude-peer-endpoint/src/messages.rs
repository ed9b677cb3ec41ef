//! The Messages API's response shapes: a whole message, or the same as server-sent events.

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::Reply;

/// The reply's content block and stop reason.
fn content(reply: &Reply) -> (Value, &'static str) {
    match reply {
        Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Reply::ToolUse { id, name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": input}),
            "tool_use",
        ),
    }
}

/// A whole (non-streamed) message.
pub(super) fn message(model: &str, reply: &Reply, input_tokens: usize) -> Value {
    let (block, stop) = content(reply);
    json!({
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [block], "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    })
}

/// The same message as server-sent events, as the streaming API sends it.
pub(super) fn stream_events(model: &str, reply: &Reply, input_tokens: usize) -> String {
    let (block, stop) = content(reply);
    let (start, delta) = match reply {
        Reply::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
        ),
        Reply::ToolUse { input, .. } => {
            let mut start = block;
            start["input"] = json!({});
            (
                start,
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            )
        }
    };
    let mut start_message = message(model, reply, input_tokens);
    start_message["content"] = json!([]);
    start_message["stop_reason"] = Value::Null;
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": start_message}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    events.iter().fold(String::new(), |mut out, (name, data)| {
        let _ = write!(out, "event: {name}\ndata: {data}\n\n");
        out
    })
}
