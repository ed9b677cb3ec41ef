//! The sender's scripted model: each send is a *job*, a prompt carrying the job's token
//! and the planned calls that answer it.

use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use crate::endpoint::Reply;

/// One planned `SendMessage` call: its tool-use id and input.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) id: String,
    pub(super) input: Value,
}

/// A prompt's token and the calls that answer it, in order.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) token: String,
    pub(super) calls: Vec<Call>,
    pub(super) issued: usize,
}

/// The scripted model of a sender: a prompt carrying a job's token gets the job's next
/// call, each result the next one, and then (or for anything else) a final text.
#[derive(Debug, Default)]
pub(super) struct Jobs(Mutex<Vec<Job>>);

impl Jobs {
    pub(super) fn reply(&self, request: &Value) -> Reply {
        let texts = user_texts(request);
        let mut jobs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let next = jobs.iter_mut().find(|job| {
            job.issued < job.calls.len() && texts.iter().any(|t| t.contains(&job.token))
        });
        match next {
            Some(job) => {
                let call = job.calls[job.issued].clone();
                job.issued += 1;
                Reply::ToolUse {
                    id: call.id,
                    name: "SendMessage".to_owned(),
                    input: call.input,
                }
            }
            None => Reply::Text("Done.".to_owned()),
        }
    }
}

/// The text of every user message of a request (its prompts, not tool results).
fn user_texts(request: &Value) -> Vec<&str> {
    let messages = request.get("messages").and_then(Value::as_array);
    let users = messages
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    users
        .flat_map(|m| match m.get("content") {
            Some(Value::String(text)) => vec![text.as_str()],
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

impl Jobs {
    /// Adds a job: its prompt's token and its calls.
    pub(super) fn push(&self, token: String, calls: Vec<Call>) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Job {
                token,
                calls,
                issued: 0,
            });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn job(token: &str, ids: &[&str]) -> Job {
        Job {
            token: token.to_owned(),
            calls: ids
                .iter()
                .map(|id| Call {
                    id: (*id).to_owned(),
                    input: json!({"to": "/s.sock", "message": id}),
                })
                .collect(),
            issued: 0,
        }
    }

    fn request(prompts: &[&str], result: bool) -> Value {
        let mut messages: Vec<Value> = prompts
            .iter()
            .map(|p| json!({"role": "user", "content": [{"type": "text", "text": p}]}))
            .collect();
        if result {
            messages.push(json!({"role": "assistant", "content": []}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "claude-peers send t2"}]}));
        }
        json!({"messages": messages})
    }

    fn called(reply: &Reply) -> Option<&str> {
        match reply {
            Reply::ToolUse { id, .. } => Some(id),
            Reply::Text(_) => None,
        }
    }

    #[test]
    fn each_planned_call_is_answered_once_in_order_and_only_for_its_prompt() {
        let jobs = Jobs::default();
        jobs.0
            .lock()
            .unwrap()
            .push(job("claude-peers send t1", &["a", "a_idle"]));
        jobs.0
            .lock()
            .unwrap()
            .push(job("claude-peers send t2", &["b"]));
        assert_eq!(called(&jobs.reply(&request(&["hello"], false))), None);
        assert_eq!(
            called(&jobs.reply(&request(&["claude-peers send t1"], false))),
            Some("a")
        );
        assert_eq!(
            called(&jobs.reply(&request(&["claude-peers send t1"], true))),
            Some("a_idle")
        );
        assert_eq!(
            called(&jobs.reply(&request(&["claude-peers send t1"], true))),
            None
        );
        // Prompts Claude Code merged into one turn are each answered, and a token seen
        // only inside a tool result is not a prompt.
        assert_eq!(
            called(&jobs.reply(&request(
                &["claude-peers send t1\nclaude-peers send t2"],
                false
            ))),
            Some("b")
        );
    }
}
