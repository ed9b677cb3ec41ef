//! The sender's hooks: this project's own code, run by the headless Claude Code sender
//! at the two moments that matter.
//!
//! - **`pre-tool-use PLANS`**, before every tool call: allows a `SendMessage` only as
//!   planned in `PLANS/<tool_use_id>.json` (same `to`, byte-identical `message`, the same
//!   idle subscription, once), and only while the same pid, with the same start token,
//!   still runs the same session id. Everything else is blocked (exit 2), and a refusal
//!   is written beside the plan so the relay reports it in this project's terms.
//! - **`user-prompt-submit`**, before every prompt: lets only this project's own send
//!   prompts through and blocks (exit 2) everything else (cross-session messages,
//!   delivery and idle notices), so none reaches the (scripted) model; Claude Code then
//!   prints its whole text on stdout, where the relay reads it.
//!
//! Claude Code runs hooks as commands, so they must be a program: `claude-peers hook …`,
//! or any binary of a harness that calls [`run`] with its arguments.

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{Discovery, Refusal, RefusalKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The largest hook input read from stdin: a 64 KiB message, JSON-escaped, with room.
const MAX_INPUT_BYTES: u64 = 1024 * 1024;

/// How this project's send prompts begin; every other prompt is kept from the model.
pub(crate) const PROMPT_PREFIX: &str = "claude-peers send ";

/// The one tool call a sender may make, and whom it must still reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Plan {
    /// The user's Claude home, whose registry the target is confirmed in.
    pub(crate) home: PathBuf,
    pub(crate) session_id: String,
    pub(crate) pid: u32,
    /// The start token the target was resolved with.
    pub(crate) proc_start: Option<String>,
    /// `SendMessage`'s `to`: the target's socket path.
    pub(crate) to: String,
    pub(crate) message: String,
    /// A pure idle subscription (`message` empty) rather than a message.
    pub(crate) notify_when_idle: bool,
}

impl Plan {
    /// The plan of sending `message` to `target`.
    pub(crate) fn of(target: &claude_peer_deliver::Target, message: &str) -> Self {
        Self {
            home: target.home.clone(),
            session_id: target.session_id.clone(),
            pid: target.pid.get(),
            proc_start: target.proc_start.clone(),
            to: target.socket.to_string_lossy().into_owned(),
            message: message.to_owned(),
            notify_when_idle: false,
        }
    }

    /// Writes the plan to `path` (created, never followed through a link).
    pub(crate) fn write(&self, path: &Path) -> io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).open(path)?;
        file.write_all(&serde_json::to_vec(self).map_err(io::Error::other)?)
    }

    /// The `SendMessage` input this plan allows.
    pub(crate) fn input(&self) -> Value {
        if self.notify_when_idle {
            serde_json::json!({"to": self.to, "message": "", "notify_when_idle": true})
        } else {
            serde_json::json!({"to": self.to, "message": self.message})
        }
    }

    fn read(path: &Path) -> Result<Self, String> {
        let bytes = fs::read(path)
            .map_err(|err| format!("cannot read the plan `{}`: {err}", path.display()))?;
        serde_json::from_slice(&bytes)
            .map_err(|err| format!("the plan `{}` is invalid: {err}", path.display()))
    }
}

/// Where the hook notes why it blocked the planned call `tool_use_id`: beside its plan.
fn refusal_path(plans: &Path, tool_use_id: &str) -> PathBuf {
    plans.join(format!("{tool_use_id}.refusal.json"))
}

/// Reads a refusal the hook noted for the planned call `tool_use_id`.
pub(crate) fn read_refusal(plans: &Path, tool_use_id: &str) -> Option<Refusal> {
    let value: Value =
        serde_json::from_slice(&fs::read(refusal_path(plans, tool_use_id)).ok()?).ok()?;
    let name = value.get("refusal")?.as_str()?;
    let kind = [
        RefusalKind::NotLive,
        RefusalKind::IdentityMismatch,
        RefusalKind::NotAddressable,
    ]
    .into_iter()
    .find(|kind| kind.as_str() == name)
    .unwrap_or(RefusalKind::DeliveryFailed);
    let message = value.get("message")?.as_str()?.to_owned();
    Some(Refusal { kind, message })
}

/// Runs the hook named by `args` (`pre-tool-use PLANS` or `user-prompt-submit`) on the
/// JSON Claude Code gives on stdin, and returns the exit status Claude Code acts on:
/// 0 allows, 2 blocks (with the reason on stderr).
#[must_use]
pub fn run(args: &[OsString]) -> i32 {
    let mut input = Vec::new();
    if let Err(err) = io::stdin().take(MAX_INPUT_BYTES).read_to_end(&mut input) {
        return block(&format!("cannot read the hook input: {err}"));
    }
    let input: Value = match serde_json::from_slice(&input) {
        Ok(input) => input,
        Err(err) => return block(&format!("the hook input is not JSON: {err}")),
    };
    let result = match args {
        [mode, plan] if mode == "pre-tool-use" => pre_tool_use(Path::new(plan), &input),
        [mode] if mode == "user-prompt-submit" => user_prompt_submit(&input),
        _ => Err(format!("unknown hook arguments {args:?}")),
    };
    match result {
        Ok(()) => 0,
        Err(why) => block(&why),
    }
}

fn block(why: &str) -> i32 {
    let _ = writeln!(io::stderr(), "{why}");
    2
}

fn user_prompt_submit(input: &Value) -> Result<(), String> {
    let prompt = input
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or_default();
    // Claude Code may merge prompts queued together into one.
    let ours = prompt
        .lines()
        .filter(|line| !line.trim().is_empty())
        .all(|line| line.trim().starts_with(PROMPT_PREFIX));
    if ours && !prompt.trim().is_empty() {
        Ok(())
    } else {
        Err("claude-peers: inbound item kept from the model".to_owned())
    }
}

fn pre_tool_use(plans: &Path, input: &Value) -> Result<(), String> {
    let id = input
        .get("tool_use_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("claude-peers planned no tool call `{id}`"));
    }
    let plan_path = plans.join(format!("{id}.json"));
    let plan = Plan::read(&plan_path)?;
    let tool = input
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let tool_input = input.get("tool_input").cloned().unwrap_or(Value::Null);
    let field = |name: &str| tool_input.get(name).and_then(Value::as_str);
    if tool != "SendMessage" {
        return Err(format!(
            "claude-peers allows this sender no tool but SendMessage, not `{tool}`"
        ));
    }
    let notify = tool_input.get("notify_when_idle").and_then(Value::as_bool) == Some(true);
    if field("to") != Some(plan.to.as_str())
        || field("message") != Some(plan.message.as_str())
        || notify != plan.notify_when_idle
    {
        return Err("claude-peers: this SendMessage is not the planned one (another address, other text or another subscription)".to_owned());
    }
    // Once: the marker is created exclusively, so a second identical call is blocked.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(plans.join(format!("{id}.used")))
        .map_err(|err| format!("claude-peers: the planned SendMessage was already made ({err})"))?;
    if let Err(refusal) = confirm(&plan) {
        let noted =
            serde_json::json!({"refusal": refusal.kind.as_str(), "message": refusal.message});
        let _ = fs::write(refusal_path(plans, id), noted.to_string());
        return Err(refusal.to_string());
    }
    Ok(())
}

/// The same pid, with the same start token, must still run the same session id, and it
/// must still be the one live, addressable session with that id.
fn confirm(plan: &Plan) -> Result<(), Refusal> {
    let home = ClaudeHome::new(&plan.home);
    let session = Discovery::os()
        .resolve_live_session(&home, &plan.session_id)
        .map_err(|err| match err {
            claude_peer_resolve::Error::Refused(refusal) => refusal,
            other => Refusal {
                kind: RefusalKind::NotLive,
                message: other.to_string(),
            },
        })?;
    let proc_start = session.record.start_token().map(str::to_owned);
    let socket = session.record.messaging_socket_path.as_deref();
    if session.pid.get() != plan.pid || proc_start != plan.proc_start {
        return Err(Refusal {
            kind: RefusalKind::NotLive,
            message: format!(
                "session {} is no longer run by pid {} with start token {}: a restart or resume in between",
                plan.session_id,
                plan.pid,
                plan.proc_start.as_deref().unwrap_or("(none)")
            ),
        });
    }
    if socket != Some(plan.to.as_str()) {
        return Err(Refusal {
            kind: RefusalKind::IdentityMismatch,
            message: format!(
                "session {} now names the messaging socket {}, not {}",
                plan.session_id,
                socket.unwrap_or("(none)"),
                plan.to
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "toolu_claude_peers_0";

    fn plans() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        Plan {
            home: dir.path().join("no-home"),
            session_id: "s-1".to_owned(),
            pid: 1,
            proc_start: None,
            to: "/tmp/cc-socks/1.sock".to_owned(),
            message: "exact \"text\"\n".to_owned(),
            notify_when_idle: false,
        }
        .write(&dir.path().join(format!("{ID}.json")))
        .unwrap();
        dir
    }

    fn call(id: &str, tool: &str, input: &Value) -> Value {
        json!({"hook_event_name": "PreToolUse", "tool_use_id": id, "tool_name": tool, "tool_input": input})
    }

    fn send(to: &str, message: &str) -> Value {
        json!({"to": to, "message": message, "summary": "display only"})
    }

    #[test]
    fn only_the_planned_send_message_may_run_and_only_once() {
        let dir = plans();
        let plans = dir.path();
        let planned = send("/tmp/cc-socks/1.sock", "exact \"text\"\n");
        let refused = |id: &str, tool: &str, input: &Value| {
            pre_tool_use(plans, &call(id, tool, input)).unwrap_err()
        };
        assert!(refused(ID, "Bash", &planned).contains("`Bash`"));
        assert!(
            refused(
                ID,
                "SendMessage",
                &send("/tmp/cc-socks/1.sock", "exact \"text\"")
            )
            .contains("not the planned one")
        );
        assert!(
            refused(
                ID,
                "SendMessage",
                &send("/tmp/cc-socks/2.sock", "exact \"text\"\n")
            )
            .contains("not the planned one")
        );
        let subscribing = json!({"to": "/tmp/cc-socks/1.sock", "message": "exact \"text\"\n", "notify_when_idle": true});
        assert!(refused(ID, "SendMessage", &subscribing).contains("not the planned one"));
        assert!(refused("toolu_other", "SendMessage", &planned).contains("cannot read the plan"));
        assert!(
            refused("../../etc/passwd", "SendMessage", &planned).contains("planned no tool call")
        );
        assert!(
            !plans.join(format!("{ID}.used")).exists(),
            "refused calls use nothing up"
        );

        // The planned call: its target is not live in this empty home, so it is refused
        // as not_live and the refusal is noted for the relay.
        assert!(refused(ID, "SendMessage", &planned).starts_with("not_live"));
        assert_eq!(
            read_refusal(plans, ID).map(|r| r.kind),
            Some(RefusalKind::NotLive)
        );
        assert!(refused(ID, "SendMessage", &planned).contains("already made"));
    }

    #[test]
    fn only_this_projects_prompts_reach_the_model() {
        for prompt in [
            "claude-peers send 0a1b2c3d-0",
            "claude-peers send 0a1b2c3d-0\nclaude-peers send 0a1b2c3d-1",
        ] {
            assert!(
                user_prompt_submit(&json!({"prompt": prompt})).is_ok(),
                "{prompt}"
            );
        }
        for prompt in [
            "<cross-session-message from=\"uds:/a.sock\">\nhi\n</cross-session-message>",
            "Another Claude session sent a message:\n<cross-session-message from=\"uds:/a.sock\">",
            "[Cross-session delivery notice] Your message to another session was held",
            "[Cross-session idle notice] \"x\" is idle now",
            "claude-peers send 1\nand something else",
            "",
        ] {
            assert!(
                user_prompt_submit(&json!({"prompt": prompt})).is_err(),
                "{prompt}"
            );
        }
    }
}
