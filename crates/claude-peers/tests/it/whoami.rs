//! `whoami`: the session found through the parent processes, run as a session's Bash
//! tool runs it: from a shell that is a child of the session's process.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, proc_start};
use serde_json::{Value, json};

use crate::support::CommandHome;

/// A `sh` standing in for a session's process: each line written to its stdin makes it
/// run `claude-peers --json whoami` as its child (not exec'd in its place) and print the
/// answer and then `exit <code>`. Killed and reaped when dropped.
struct Session {
    sh: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn spawn(home: &TempHome, inherited_session_id: &str) -> Self {
        let mut sh = Command::new("sh")
            .args([
                "-c",
                r#"while read -r go; do "$@" </dev/null; echo "exit $?"; done"#,
                "sh",
                env!("CARGO_BIN_EXE_claude-peers"),
                "--home",
                home.root().to_str().unwrap(),
                "--json",
                "whoami",
            ])
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("CLAUDE_CODE_SESSION_ID", inherited_session_id)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = sh.stdin.take().unwrap();
        let stdout = BufReader::new(sh.stdout.take().unwrap());
        Self { sh, stdin, stdout }
    }

    fn pid(&self) -> u32 {
        self.sh.id()
    }

    /// Runs `whoami` under this shell: its exit code and its JSON.
    fn whoami(&mut self) -> (i32, Value) {
        writeln!(self.stdin, "go").unwrap();
        let (mut answer, mut exit) = (String::new(), String::new());
        self.stdout.read_line(&mut answer).unwrap();
        self.stdout.read_line(&mut exit).unwrap();
        let code = exit
            .strip_prefix("exit ")
            .and_then(|c| c.trim().parse().ok())
            .unwrap_or_else(|| panic!("an exit line after {answer:?}, got {exit:?}"));
        let value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("one JSON value ({e}): {answer:?}"));
        (code, value)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.sh.kill();
        let _ = self.sh.wait();
    }
}

/// A record of `session` for `pid`, with `proc_start` as its start token.
fn write_record(home: &TempHome, pid: u32, session: &str, proc_start: &str) {
    let record = json!({
        "pid": pid,
        "sessionId": session,
        "cwd": home.root().join("project").to_str().unwrap(),
        "procStart": proc_start,
        "kind": "interactive",
        "name": "worker",
        "nameSource": "user",
    });
    home.write_record(pid, record.to_string()).unwrap();
}

fn assert_not_in_a_session(code: i32, value: &Value) {
    assert_eq!(code, 3, "{value}");
    assert_eq!(value["error"], "not_in_a_session", "{value}");
    assert!(value["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[test]
fn a_command_run_from_a_sessions_shell_finds_that_session_and_not_the_inherited_id() {
    let mut home = TempHome::new().unwrap();
    // A live session whose id is the inherited one: trusting the variable would name it.
    let other = Sleeper::spawn().unwrap();
    home.live_record(&other, "s-inherited", "other", "idle", false);
    let mut session = Session::spawn(&home, "s-inherited");
    write_record(
        &home,
        session.pid(),
        "s-mine",
        &proc_start(session.pid()).unwrap(),
    );

    let (code, value) = session.whoami();
    assert_eq!(code, 0, "{value}");
    let found = &value["session"];
    assert_eq!(found["session_id"], "s-mine", "{value}");
    assert_eq!(found["pid"], session.pid());
    assert_eq!(found["name"], "worker");
    assert_eq!(found["liveness"], "live");
    assert_eq!(
        value.as_object().unwrap().len(),
        1,
        "only `session`: {value}"
    );
    // The very object `list --json` prints for it.
    let (_, list, _) = home.json(&["list"]);
    let listed = list
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["session_id"] == "s-mine")
        .unwrap();
    assert_eq!(found, listed);
}

#[test]
fn after_clear_the_records_new_session_id_is_the_answer() {
    let home = TempHome::new().unwrap();
    let mut session = Session::spawn(&home, "s-before");
    let token = proc_start(session.pid()).unwrap();
    write_record(&home, session.pid(), "s-before", &token);
    assert_eq!(session.whoami().1["session"]["session_id"], "s-before");

    // `/clear` starts a new conversation in the same process: the record is rewritten.
    write_record(&home, session.pid(), "s-after", &token);
    let (code, value) = session.whoami();
    assert_eq!(code, 0, "{value}");
    assert_eq!(value["session"]["session_id"], "s-after", "{value}");
}

#[test]
fn a_record_of_another_process_with_the_shells_pid_is_not_this_session() {
    let home = TempHome::new().unwrap();
    let mut session = Session::spawn(&home, "s-stale");
    let token = proc_start(session.pid()).unwrap();
    // The pid's previous owner wrote it: its start token is not the shell's.
    let reused = format!("{}", token.parse::<u64>().unwrap() + 1);
    write_record(&home, session.pid(), "s-stale", &reused);
    let (code, value) = session.whoami();
    assert_not_in_a_session(code, &value);

    // The same shell, its true token: now it is the session.
    write_record(&home, session.pid(), "s-stale", &token);
    assert_eq!(session.whoami().0, 0);
}

#[test]
fn a_shell_with_no_record_is_not_in_a_session() {
    let home = TempHome::new().unwrap();
    let mut session = Session::spawn(&home, "s-unrecorded");
    let (code, value) = session.whoami();
    assert_not_in_a_session(code, &value);
}

#[test]
fn run_from_the_test_itself_no_session_is_above_it() {
    let mut home = TempHome::new().unwrap();
    // A live session, though not an ancestor of the command.
    let sibling = Sleeper::spawn().unwrap();
    home.live_record(&sibling, "s-sibling", "sibling", "idle", true);
    let (code, value, stderr) = home.json(&["whoami"]);
    assert_not_in_a_session(code, &value);
    assert!(stderr.contains("not_in_a_session"), "{stderr}");

    let out = home.run(&["whoami"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty(), "the failure goes to stderr alone");
}

/// A real interactive Claude Code with `claude-peers mcp` as its MCP server, whose model
/// calls `whoami` when asked: the server, a child of the session's process, answers that
/// session.
#[test]
fn the_mcp_whoami_of_an_interactive_session_answers_that_session() {
    use claude_peer_endpoint::Reply;
    use std::sync::Arc;

    use crate::receiver::{Receiver, prepare_home};

    const TOOL: &str = "mcp__claude-peers__whoami";
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(home.path(), &["project"], &json!({}));
    let config = json!({"mcpServers": {"claude-peers": {
        "command": env!("CARGO_BIN_EXE_claude-peers"),
        "args": ["--home", home.path().to_str().unwrap(), "mcp"],
    }}});
    // Asked, it calls whoami; while its MCP servers are still connecting (the tool not
    // offered yet), it first waits for them with Claude Code's own tool.
    let model = Arc::new(|request: &Value| {
        let messages = request["messages"].to_string();
        let offered = |name: &str| {
            request["tools"]
                .as_array()
                .is_some_and(|tools| tools.iter().any(|t| t["name"] == name))
        };
        let call = |id: &str, name: &str| Reply::ToolUse {
            id: id.to_owned(),
            name: name.to_owned(),
            input: json!({}),
        };
        if !messages.contains("who am i") || messages.contains("toolu_whoami") {
            Reply::Text("Noted.".to_owned())
        } else if offered(TOOL) {
            call("toolu_whoami", TOOL)
        } else if offered("WaitForMcpServers") && !messages.contains("toolu_wait") {
            call("toolu_wait", "WaitForMcpServers")
        } else {
            Reply::Text("No whoami tool.".to_owned())
        }
    });
    let args = [
        "--mcp-config",
        &config.to_string(),
        "--permission-mode",
        "default",
        "--allowedTools",
        TOOL,
    ];
    let session = Receiver::launch(
        &home,
        "project",
        &args,
        &["ENABLE_TOOL_SEARCH=false"],
        model,
    );
    session.keys("who am i");
    session.keys("Enter");
    assert_answers_itself(&session, "toolu_whoami");
}

#[test]
fn the_mcp_whoami_outside_any_session_is_not_in_a_session() {
    let home = TempHome::new().unwrap();
    let mcp = crate::mcp::Mcp::start(home.root(), &[]);
    let error = mcp.tool_error("whoami", json!({}));
    assert_eq!(error["error"], "not_in_a_session", "{error}");
}

/// A real interactive Claude Code whose model runs `claude-peers whoami --json` with its
/// Bash tool: the command, a grandchild of the session's process, answers that session.
#[test]
fn whoami_from_a_real_sessions_bash_tool_answers_that_session() {
    use claude_peer_endpoint::Reply;
    use std::sync::Arc;

    use crate::receiver::{Receiver, prepare_home};

    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(home.path(), &["project"], &json!({}));
    let command = format!(
        "'{}' --home '{}' --json whoami",
        env!("CARGO_BIN_EXE_claude-peers"),
        home.path().display()
    );
    let model = Arc::new(move |request: &Value| {
        let messages = request["messages"].to_string();
        if messages.contains("who am i") && !messages.contains("toolu_bash") {
            Reply::ToolUse {
                id: "toolu_bash".to_owned(),
                name: "Bash".to_owned(),
                input: json!({"command": command, "description": "who am i"}),
            }
        } else {
            Reply::Text("Noted.".to_owned())
        }
    });
    let args = ["--permission-mode", "default", "--allowedTools", "Bash"];
    let session = Receiver::launch(&home, "project", &args, &[], model);
    session.keys("who am i");
    session.keys("Enter");
    assert_answers_itself(&session, "toolu_bash");
}

/// The session's tool call `id` answered with `{"session": …}` naming the session itself,
/// as its transcript records the result.
fn assert_answers_itself(session: &crate::receiver::Receiver, id: &str) {
    let answer = crate::receiver::wait_for(std::time::Duration::from_secs(30), || {
        session.transcript().into_iter().find_map(|entry| {
            let blocks = entry.pointer("/message/content")?.as_array()?.clone();
            blocks
                .into_iter()
                .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id)
        })
    })
    .unwrap_or_else(|| panic!("no result of {id}; the screen:\n{}", session.screen()));
    let text = match &answer["content"] {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        other => panic!("{other}"),
    };
    let answered: Value = serde_json::from_str(text.trim()).unwrap_or_else(|_| panic!("{text}"));
    assert_eq!(
        answered["session"]["session_id"],
        session.session_id.as_str()
    );
    assert_eq!(answered["session"]["pid"], session.pid);
}
