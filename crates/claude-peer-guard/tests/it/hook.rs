use std::ffi::OsString;
use std::fs;
use std::os::unix::net::UnixListener;
use std::path::Path;

use claude_peer_deliver::Recipient;
use claude_peer_guard::protocol::{PRE_TOOL_USE, Token, USER_PROMPT_SUBMIT};
use claude_peer_guard::{Call, Plan, canary_blocked, read_refusal, run_with};
use claude_peer_registry::{ClaudeHome, Pid};
use claude_peer_resolve::{Discovery, RefusalKind};
use claude_peer_testkit::process::{Children, proc_start};
use claude_peer_testkit::registry::record;
use serde_json::{Value, json};

/// What the hook answered: its exit status, stdout and stderr.
struct Answer {
    status: i32,
    out: String,
    err: String,
}

fn hook(args: &[&str], input: &Value) -> Answer {
    let args: Vec<OsString> = args.iter().map(OsString::from).collect();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = run_with(&args, input.to_string().as_bytes(), &mut out, &mut err);
    Answer {
        status,
        out: String::from_utf8(out).unwrap(),
        err: String::from_utf8(err).unwrap(),
    }
}

/// The `pre-tool-use` hook on a `SendMessage` call `id` with `input`.
fn pre_tool_use(plans: &Path, id: &str, input: &Value) -> Answer {
    let call = json!({"hook_event_name": "PreToolUse", "tool_use_id": id, "tool_name": "SendMessage", "tool_input": input});
    hook(&[PRE_TOOL_USE, plans.to_str().unwrap()], &call)
}

/// A live session (a child process, its record with its true start token, a socket of
/// this user) and its target as the gate would confirm it.
struct Live {
    _root: tempfile::TempDir,
    _children: Children,
    _socket: UnixListener,
    target: Recipient,
}

fn live() -> Live {
    let root = tempfile::tempdir().unwrap();
    let children = Children::spawn(1).unwrap();
    let pid = children.pids()[0];
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
        target,
    }
}

#[test]
fn a_written_plan_allows_its_exact_call_once_and_nothing_a_byte_away() {
    let live = live();
    let plans = tempfile::tempdir().unwrap();
    let plan = Plan {
        target: live.target.clone(),
        call: Call::Message("the build is green\n".to_owned()),
    };
    plan.write(plans.path(), "toolu_1").unwrap();
    assert!(
        plan.write(plans.path(), "toolu_1").is_err(),
        "a plan is never overwritten"
    );
    let planned = plan.input();

    let mut one_byte_off = planned.clone();
    one_byte_off["message"] = json!("the build is green\r");
    for (what, input) in [
        ("another text", one_byte_off),
        ("no idle subscription planned", {
            let mut subscribing = planned.clone();
            subscribing["notify_when_idle"] = json!(true);
            subscribing
        }),
        ("another address", {
            let mut elsewhere = planned.clone();
            elsewhere["to"] = json!(format!("{}x", planned["to"].as_str().unwrap()));
            elsewhere
        }),
    ] {
        let answer = pre_tool_use(plans.path(), "toolu_1", &input);
        assert_eq!(answer.status, 2, "{what} is blocked");
        assert!(
            answer.err.contains("not the planned one"),
            "{what}: {}",
            answer.err
        );
        assert!(answer.out.is_empty(), "{what}: nothing allowed");
    }
    let unplanned = pre_tool_use(plans.path(), "toolu_2", &planned);
    assert_eq!(unplanned.status, 2);
    assert!(
        unplanned.err.contains("cannot read the plan"),
        "{}",
        unplanned.err
    );

    let allowed = pre_tool_use(plans.path(), "toolu_1", &planned);
    assert_eq!((allowed.status, allowed.err.as_str()), (0, ""));
    let decision: Value = serde_json::from_str(&allowed.out).unwrap();
    assert_eq!(
        decision["hookSpecificOutput"]["permissionDecision"], "allow",
        "an explicit decision: {decision}"
    );
    let again = pre_tool_use(plans.path(), "toolu_1", &planned);
    assert_eq!(again.status, 2);
    assert!(again.err.contains("already made"), "{}", again.err);
    assert_eq!(read_refusal(plans.path(), "toolu_1"), None);
}

#[test]
fn the_canary_is_blocked_and_noted_whatever_it_carries() {
    let live = live();
    let plans = tempfile::tempdir().unwrap();
    let canary = Plan {
        target: live.target,
        call: Call::Canary,
    };
    canary.write(plans.path(), "toolu_1_canary").unwrap();
    assert!(!canary_blocked(plans.path(), "toolu_1_canary"));
    let answer = pre_tool_use(plans.path(), "toolu_1_canary", &canary.input());
    assert_eq!(answer.status, 2);
    assert!(
        answer.err.contains("the guard is running"),
        "{}",
        answer.err
    );
    assert!(canary_blocked(plans.path(), "toolu_1_canary"));
    assert!(
        !canary_blocked(plans.path(), "toolu_1"),
        "only the canary's own note"
    );
}

#[test]
fn a_planned_call_to_a_session_that_ended_is_refused_and_the_refusal_noted() {
    let plans = tempfile::tempdir().unwrap();
    let gone = Plan {
        target: Recipient {
            name: None,
            session_id: "s-1".to_owned(),
            pid: Pid::new(Pid::MAX).unwrap(),
            socket: "/tmp/cc-socks/1.sock".into(),
            cwd: "/w".into(),
            proc_start: None,
            home: plans.path().join("no-home"),
        },
        call: Call::IdleSubscription,
    };
    gone.write(plans.path(), "toolu_1_idle").unwrap();
    let answer = pre_tool_use(plans.path(), "toolu_1_idle", &gone.input());
    assert_eq!(answer.status, 2);
    assert!(answer.err.starts_with("not_live"), "{}", answer.err);
    let noted = read_refusal(plans.path(), "toolu_1_idle").unwrap();
    assert_eq!(noted.kind, RefusalKind::NotLive.into());
    assert_eq!(
        format!("{noted}\n"),
        answer.err,
        "the same words for the relay"
    );
}

#[test]
fn only_a_prompt_of_job_tokens_passes_the_prompt_hook() {
    let ours = format!(
        "{}\n{}",
        Token::new("0a1b2c3d", 0),
        Token::new("0a1b2c3d", 1)
    );
    assert_eq!(
        hook(&[USER_PROMPT_SUBMIT], &json!({"prompt": ours})).status,
        0
    );
    let merged = format!(
        "{ours}\n<cross-session-message from=\"uds:/a.sock\">\nhi\n</cross-session-message>"
    );
    let blocked = hook(&[USER_PROMPT_SUBMIT], &json!({"prompt": merged}));
    assert_eq!(blocked.status, 2);
    assert!(
        blocked.err.contains("kept from the model"),
        "{}",
        blocked.err
    );
    let unknown = hook(&["post-tool-use"], &json!({}));
    assert_eq!(unknown.status, 2, "an unknown hook blocks");
    assert!(
        unknown.err.contains("unknown hook arguments"),
        "{}",
        unknown.err
    );
    let not_json = run_with(
        &[OsString::from(USER_PROMPT_SUBMIT)],
        &b"{"[..],
        Vec::new(),
        Vec::new(),
    );
    assert_eq!(not_json, 2, "input that is not JSON blocks");
}
