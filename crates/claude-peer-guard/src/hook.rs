//! The hooks: this project's own code, run by the headless Claude Code sender at the two
//! moments that matter.
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
use std::fs::OpenOptions;
use std::io::{self, Read, Write};
use std::path::Path;

use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{Discovery, Refusal, RefusalKind};
use serde_json::Value;

use crate::plan::{Call, Plan, PlanError, note_canary, note_refusal, used_path};
use crate::protocol::{MAX_ESCAPED_MESSAGE_BYTES, PRE_TOOL_USE, USER_PROMPT_SUBMIT, only_ours};

/// The largest hook input read from stdin.
const MAX_INPUT_BYTES: u64 = MAX_ESCAPED_MESSAGE_BYTES as u64;

/// Why a hook blocks: its words reach Claude Code on stderr.
#[derive(Debug, thiserror::Error)]
enum Blocked {
    #[error("cannot read the hook input: {0}")]
    Input(io::Error),
    #[error("the hook input is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("unknown hook arguments {0:?}")]
    Arguments(Vec<OsString>),
    #[error("claude-peers: inbound item kept from the model")]
    Inbound,
    #[error("claude-peers planned no tool call `{0}`")]
    Unplanned(String),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("claude-peers allows this sender no tool but SendMessage, not `{0}`")]
    Tool(String),
    #[error(
        "claude-peers: this SendMessage is not the planned one (another address, other text or another subscription)"
    )]
    NotAsPlanned,
    #[error("claude-peers: the planned SendMessage was already made ({0})")]
    AlreadyMade(io::Error),
    #[error("{0}")]
    Refused(Refusal),
    #[error("claude-peers: the guard is running (this check call is blocked on purpose)")]
    Canary,
    #[error("claude-peers cannot note the blocked check call: {0}")]
    CanaryNote(io::Error),
}

/// What the `pre-tool-use` hook prints when it allows the planned call: an explicit
/// decision, not the absence of one.
const ALLOW: &str = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"claude-peers: the planned call"}}"#;

/// Runs the hook named by `args` (`pre-tool-use PLANS` or `user-prompt-submit`) on the
/// JSON Claude Code gives on stdin, and returns the exit status Claude Code acts on:
/// 0 allows (a tool call with an explicit `allow` on stdout), 2 blocks (with the reason
/// on stderr).
#[must_use]
pub fn run(args: &[OsString]) -> i32 {
    run_with(
        args,
        io::stdin().lock(),
        io::stdout().lock(),
        io::stderr().lock(),
    )
}

/// [`run`] on other streams: the hook's JSON input read from `input` (at most 1 MiB),
/// the `allow` decision written to `out`, the reason for blocking to `err`.
pub fn run_with(
    args: &[OsString],
    input: impl Read,
    mut out: impl Write,
    mut err: impl Write,
) -> i32 {
    let allowed = match args {
        [mode, plans] if mode == PRE_TOOL_USE => read_input(input)
            .and_then(|input| pre_tool_use(Path::new(plans), &input))
            .and_then(|()| writeln!(out, "{ALLOW}").map_err(Blocked::Input)),
        [mode] if mode == USER_PROMPT_SUBMIT => {
            read_input(input).and_then(|input| user_prompt_submit(&input))
        }
        _ => Err(Blocked::Arguments(args.to_vec())),
    };
    match allowed {
        Ok(()) => 0,
        Err(why) => {
            let _ = writeln!(err, "{why}");
            2
        }
    }
}

fn read_input(stdin: impl Read) -> Result<Value, Blocked> {
    let mut input = Vec::new();
    stdin
        .take(MAX_INPUT_BYTES)
        .read_to_end(&mut input)
        .map_err(Blocked::Input)?;
    serde_json::from_slice(&input).map_err(Blocked::NotJson)
}

fn user_prompt_submit(input: &Value) -> Result<(), Blocked> {
    let prompt = input
        .get("prompt")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if only_ours(prompt) {
        Ok(())
    } else {
        Err(Blocked::Inbound)
    }
}

fn pre_tool_use(plans: &Path, input: &Value) -> Result<(), Blocked> {
    let id = input
        .get("tool_use_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Blocked::Unplanned(id.to_owned()));
    }
    let plan = Plan::read(plans, id)?;
    if plan.call == Call::Canary {
        note_canary(plans, id).map_err(Blocked::CanaryNote)?;
        return Err(Blocked::Canary);
    }
    let tool = input
        .get("tool_name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if tool != "SendMessage" {
        return Err(Blocked::Tool(tool.to_owned()));
    }
    if input
        .get("tool_input")
        .is_none_or(|made| !is_as_planned(made, &plan))
    {
        return Err(Blocked::NotAsPlanned);
    }
    // Once: the marker is created exclusively, so a second identical call is blocked.
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(used_path(plans, id))
        .map_err(Blocked::AlreadyMade)?;
    if let Err(refusal) = confirm(&plan) {
        note_refusal(plans, id, &refusal);
        return Err(Blocked::Refused(refusal));
    }
    Ok(())
}

/// Whether the `SendMessage` input `made` is the planned one: the same address, the same
/// text byte for byte, the same idle subscription.
fn is_as_planned(made: &Value, plan: &Plan) -> bool {
    let field = |name: &str| made.get(name).and_then(Value::as_str);
    let notify = made.get("notify_when_idle").and_then(Value::as_bool) == Some(true);
    let (message, subscribes) = match &plan.call {
        Call::Message(text) => (text.as_str(), false),
        Call::IdleSubscription => ("", true),
        Call::Canary => return false,
    };
    field("to") == Some(plan.to().as_str())
        && field("message") == Some(message)
        && notify == subscribes
}

/// The target must still be the session the gate confirmed, by the gate's own rule
/// ([`Discovery::confirm`]): the same pid, with the same start token, running the same
/// session id under the same name and socket, still addressable.
fn confirm(plan: &Plan) -> Result<(), Refusal> {
    let home = ClaudeHome::new(&plan.target.home);
    match Discovery::os().confirm(&home, plan.target.identity()) {
        Ok(_) => Ok(()),
        Err(claude_peer_resolve::Error::Refused(refusal)) => Err(refusal),
        Err(other) => Err(Refusal {
            kind: RefusalKind::NotLive,
            message: other.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::net::UnixListener;

    use claude_peer_deliver::Recipient;
    use claude_peer_registry::Pid;
    use claude_peer_testkit::process::{Children, proc_start};
    use claude_peer_testkit::registry::record;
    use serde_json::json;

    use super::*;
    use crate::read_refusal;

    const ID: &str = "toolu_claude_peers_0";

    fn plans() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let target = Recipient {
            name: None,
            session_id: "s-1".to_owned(),
            pid: Pid::new(Pid::MAX).unwrap(),
            socket: "/tmp/cc-socks/1.sock".into(),
            cwd: "/w".into(),
            proc_start: None,
            home: dir.path().join("no-home"),
        };
        Plan {
            target,
            call: Call::Message("exact \"text\"\n".to_owned()),
        }
        .write(dir.path(), ID)
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
            pre_tool_use(plans, &call(id, tool, input))
                .unwrap_err()
                .to_string()
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
            !used_path(plans, ID).exists(),
            "refused calls use nothing up"
        );

        // The planned call: its target is not live in this empty home, so it is refused
        // as not_live and the refusal is noted for the relay.
        assert!(refused(ID, "SendMessage", &planned).starts_with("not_live"));
        assert_eq!(
            read_refusal(plans, ID).map(|r| r.kind),
            Some(RefusalKind::NotLive.into())
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

    /// A live session: a child process with its record (true start token) in a fresh
    /// home and a socket of this user.
    struct Live {
        _root: tempfile::TempDir,
        _children: Children,
        _socket: UnixListener,
        home: ClaudeHome,
        target: Recipient,
        other_pid: Pid,
    }

    fn live() -> Live {
        let root = tempfile::tempdir().unwrap();
        let children = Children::spawn(2).unwrap();
        let [pid, other_pid] = children.pids()[..] else {
            unreachable!()
        };
        let socks = root.path().join("socks");
        fs::create_dir_all(&socks).unwrap();
        let socket = UnixListener::bind(socks.join(format!("{pid}.sock"))).unwrap();
        let home = ClaudeHome::new(root.path().join("home"));
        fs::create_dir_all(home.sessions_dir()).unwrap();
        let body = record(pid, &proc_start(pid).unwrap(), None, &socks);
        fs::write(home.sessions_dir().join(format!("{pid}.json")), body).unwrap();
        let session = Discovery::os()
            .resolve_live_session(&home, &format!("75c834bc-f549-4085-a152-{pid:012x}"))
            .unwrap();
        let target = Recipient {
            name: session.record.name.clone(),
            session_id: session.record.session_id.clone(),
            pid: session.pid,
            socket: session.socket.clone(),
            cwd: "/home/ada".into(),
            proc_start: session.record.proc_start.clone(),
            home: home.root().to_path_buf(),
        };
        Live {
            _root: root,
            _children: children,
            _socket: socket,
            home,
            target,
            other_pid: Pid::new(other_pid).unwrap(),
        }
    }

    /// What the hook answers to the planned call of `target`, made as planned.
    fn hook_on(target: &Recipient) -> Result<(), Blocked> {
        let plans = tempfile::tempdir().unwrap();
        let plan = Plan {
            target: target.clone(),
            call: Call::Message("hi".to_owned()),
        };
        plan.write(plans.path(), ID).unwrap();
        pre_tool_use(plans.path(), &call(ID, "SendMessage", &plan.input()))
    }

    /// A change to a target, given another live pid.
    type Change = fn(&mut Recipient, Pid);

    #[test]
    fn the_hook_and_the_gate_refuse_the_same_mismatches_by_one_rule() {
        let live = live();
        let discovery = Discovery::os();
        discovery
            .confirm(&live.home, live.target.identity())
            .unwrap();
        hook_on(&live.target).unwrap();

        let mismatches: [(&str, Change, RefusalKind); 4] = [
            ("pid", |t, other| t.pid = other, RefusalKind::NotLive),
            (
                "start token",
                |t, _| t.proc_start = Some("1".to_owned()),
                RefusalKind::NotLive,
            ),
            (
                "session id",
                |t, _| t.session_id = "a-cleared-session".to_owned(),
                RefusalKind::NotLive,
            ),
            (
                "socket",
                |t, _| t.socket = "/elsewhere/other.sock".into(),
                RefusalKind::IdentityMismatch,
            ),
        ];
        for (what, change, kind) in mismatches {
            let mut target = live.target.clone();
            change(&mut target, live.other_pid);
            let gate = discovery
                .confirm(&live.home, target.identity())
                .unwrap_err()
                .refusal()
                .cloned()
                .unwrap();
            let Err(Blocked::Refused(hook)) = hook_on(&target) else {
                panic!("the hook let a call through to another {what}");
            };
            assert_eq!(gate.kind, kind, "the gate on another {what}: {gate}");
            assert_eq!(
                (hook.kind, hook.message),
                (gate.kind, gate.message),
                "the hook refuses another {what} as the gate does"
            );
        }
    }
}
