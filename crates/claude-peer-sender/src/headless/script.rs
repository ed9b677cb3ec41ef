//! The sender's scripted model: each send is a *job*, a prompt carrying the job's token
//! and the planned calls that answer it.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde_json::Value;

use claude_peer_endpoint::Reply;
use claude_peer_guard::canary_blocked;
use claude_peer_guard::protocol::Token;

/// One planned `SendMessage` call: its tool-use id and input.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) id: String,
    pub(super) input: Value,
}

/// A prompt's token and the calls that answer it, in order: first the canary, which the
/// guard must block, then the planned calls.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) token: Token,
    pub(super) calls: Vec<Call>,
    pub(super) issued: usize,
}

/// What Claude Code asks its model when a conversation has grown too long: a summary,
/// from which it then goes on alone (observed with 2.1.332 after about 50 sends of
/// 60 KiB: "Your task is to create a detailed summary of the conversation so far").
const COMPACTION: &str = "summary of the conversation so far";

/// What the model says instead of a job's planned calls when the guard did not block
/// its canary.
const UNGUARDED: &str = "claude-peers: the guard did not block the check call; nothing is sent";

/// The scripted model of a sender: a prompt carrying a job's token gets the job's next
/// call, each result the next one, and then (or for anything else) a final text. A job
/// is forgotten once its last call is made, so the jobs held follow the sends pending,
/// not the sends made. No call after a job's canary is made unless the guard noted
/// blocking the canary in the plans directory.
#[derive(Debug)]
pub(super) struct Jobs {
    jobs: Mutex<Vec<Job>>,
    plans: PathBuf,
}

impl Jobs {
    /// No jobs yet; the guard notes its blocked canaries in `plans`.
    pub(super) fn new(plans: PathBuf) -> Self {
        Self {
            jobs: Mutex::default(),
            plans,
        }
    }

    pub(super) fn reply(&self, request: &Value) -> Reply {
        let texts = user_texts(request);
        let mut jobs = self.jobs.lock().unwrap_or_else(PoisonError::into_inner);
        if is_compaction(request) {
            return Reply::Text(summary(&jobs));
        }
        let next = jobs
            .iter()
            .position(|job| texts.iter().any(|t| job.token.is_in(t)));
        let Some(at) = next else {
            return Reply::Text("Done.".to_owned());
        };
        let job = &mut jobs[at];
        if job.issued > 0 && !canary_blocked(&self.plans, &job.calls[0].id) {
            jobs.remove(at);
            return Reply::Text(UNGUARDED.to_owned());
        }
        let call = job.calls[job.issued].clone();
        job.issued += 1;
        if job.issued == job.calls.len() {
            jobs.remove(at);
        }
        Reply::ToolUse {
            id: call.id,
            name: "SendMessage".to_owned(),
            input: call.input,
        }
    }
}

/// Whether `request` asks for a summary of the conversation (its last user message says
/// so): it is answered with text alone, whatever its history holds.
fn is_compaction(request: &Value) -> bool {
    let last_user = request
        .get("messages")
        .and_then(Value::as_array)
        .and_then(|messages| {
            messages
                .iter()
                .rev()
                .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        });
    last_user.is_some_and(|message| {
        user_texts_of(message)
            .iter()
            .any(|text| text.contains(COMPACTION))
    })
}

/// The summary a compacted sender goes on from: nothing of the sends made is worth
/// keeping (each was one planned call), but the tokens of the sends still pending are,
/// so their prompts find their calls again after the compaction.
fn summary(jobs: &[Job]) -> String {
    let pending: Vec<&str> = jobs.iter().map(|job| job.token.as_str()).collect();
    format!(
        "<analysis>A scripted sender: every earlier request was one planned SendMessage, made.</analysis>\n<summary>Nothing earlier is needed.{}</summary>",
        if pending.is_empty() {
            String::new()
        } else {
            format!(" Pending:\n{}", pending.join("\n"))
        }
    )
}

/// The text of every user message of a request (its prompts, not tool results).
fn user_texts(request: &Value) -> Vec<&str> {
    let messages = request.get("messages").and_then(Value::as_array);
    let users = messages
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    users.flat_map(user_texts_of).collect()
}

/// The text blocks of one message.
fn user_texts_of(message: &Value) -> Vec<&str> {
    match message.get("content") {
        Some(Value::String(text)) => vec![text.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

impl Jobs {
    /// Adds a job: its prompt's token and its calls, the canary first.
    pub(super) fn push(&self, token: Token, calls: Vec<Call>) {
        self.jobs
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
    use std::fs;

    use serde_json::json;

    use super::*;

    /// Jobs whose guard noted blocking every canary but those of `unguarded` jobs.
    struct Script {
        jobs: Jobs,
        plans: tempfile::TempDir,
    }

    impl Script {
        fn new() -> Self {
            let plans = tempfile::tempdir().unwrap();
            Self {
                jobs: Jobs::new(plans.path().to_path_buf()),
                plans,
            }
        }

        /// A job `claude-peers send t-<job>` whose calls are `ids` after its canary
        /// `<first id>_canary`, which the guard blocked when `guarded`.
        fn push(&self, job: u64, ids: &[&str], guarded: bool) {
            let canary = format!("{}_canary", ids[0]);
            if guarded {
                fs::write(self.plans.path().join(format!("{canary}.blocked")), "").unwrap();
            }
            let calls = std::iter::once(canary.as_str())
                .chain(ids.iter().copied())
                .map(|id| Call {
                    id: id.to_owned(),
                    input: json!({"to": "/s.sock", "message": id}),
                })
                .collect();
            self.jobs.push(Token::new("t", job), calls);
        }

        fn reply(&self, request: &Value) -> Option<String> {
            match self.jobs.reply(request) {
                Reply::ToolUse { id, .. } => Some(id),
                Reply::Text(_) => None,
            }
        }
    }

    fn request(prompts: &[&str], result: bool) -> Value {
        let mut messages: Vec<Value> = prompts
            .iter()
            .map(|p| json!({"role": "user", "content": [{"type": "text", "text": p}]}))
            .collect();
        if result {
            messages.push(json!({"role": "assistant", "content": []}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "claude-peers send t-2"}]}));
        }
        json!({"messages": messages})
    }

    #[test]
    fn each_planned_call_is_answered_once_in_order_and_only_for_its_prompt() {
        let script = Script::new();
        script.push(1, &["a", "a_idle"], true);
        script.push(2, &["b"], true);
        let t1 = |result| script.reply(&request(&["claude-peers send t-1"], result));
        assert_eq!(script.reply(&request(&["hello"], false)), None);
        assert_eq!(t1(false).as_deref(), Some("a_canary"));
        assert_eq!(t1(true).as_deref(), Some("a"));
        assert_eq!(t1(true).as_deref(), Some("a_idle"));
        assert_eq!(t1(true), None);
        // Prompts Claude Code merged into one turn are each answered, and a token seen
        // only inside a tool result is not a prompt.
        let merged = request(&["claude-peers send t-1\nclaude-peers send t-2"], false);
        assert_eq!(script.reply(&merged).as_deref(), Some("b_canary"));
        assert_eq!(script.reply(&merged).as_deref(), Some("b"));
    }

    #[test]
    fn no_planned_call_follows_a_canary_the_guard_did_not_block() {
        let script = Script::new();
        script.push(1, &["a"], false);
        let t1 = |result| script.reply(&request(&["claude-peers send t-1"], result));
        assert_eq!(t1(false).as_deref(), Some("a_canary"));
        let Reply::Text(text) = script
            .jobs
            .reply(&request(&["claude-peers send t-1"], true))
        else {
            panic!("an unguarded job made its planned call");
        };
        assert_eq!(text, UNGUARDED);
        assert_eq!(t1(true), None, "the job is gone, its call never made");
    }

    #[test]
    fn a_compaction_is_answered_with_text_naming_what_is_pending_and_finished_jobs_go() {
        let script = Script::new();
        script.push(1, &["a"], true);
        script.push(2, &["b"], true);
        let t1 = |result| script.reply(&request(&["claude-peers send t-1"], result));
        assert_eq!(t1(false).as_deref(), Some("a_canary"));
        assert_eq!(t1(true).as_deref(), Some("a"));
        assert_eq!(
            script.jobs.jobs.lock().unwrap().len(),
            1,
            "a finished job is forgotten"
        );
        let compaction = request(
            &[
                "claude-peers send t-2",
                "CRITICAL: Respond with TEXT ONLY. Your task is to create a detailed summary of the conversation so far",
            ],
            false,
        );
        let Reply::Text(summary) = script.jobs.reply(&compaction) else {
            panic!("a compaction is never answered with a tool call, even with a send pending");
        };
        assert!(
            summary.contains("<summary>") && summary.contains("claude-peers send t-2"),
            "{summary}"
        );
        assert!(
            !summary.contains("send t-1"),
            "nothing of what was made: {summary}"
        );
        // Claude Code goes on from the summary alone: the pending send is still made.
        let continued = request(
            &[&format!("This session is being continued. {summary}")],
            false,
        );
        assert_eq!(script.reply(&continued).as_deref(), Some("b_canary"));
        assert_eq!(script.reply(&continued).as_deref(), Some("b"));
    }
}
