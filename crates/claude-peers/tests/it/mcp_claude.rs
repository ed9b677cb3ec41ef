//! `claude-peers mcp` under a real client: the pinned Claude Code, headless, with the
//! server in its `--mcp-config` and a scripted model that calls every tool once, sends
//! to a live interactive receiver, is refused once, and hears the receiver's reply. What
//! Claude Code's own stream-json shows as each tool result is what is asserted.

use std::fs;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use claude_peer_endpoint::{Endpoint, Reply};
use serde_json::{Value, json};

use crate::receiver::{Receiver, claude, wait_for};

const KEY: &str = "sk-ant-mcp-client-test";
const TOOLS: [&str; 5] = [
    "list_sessions",
    "show_session",
    "inbound_policy",
    "send_message",
    "wait_for_messages",
];
/// What the receiver answers every message with.
const REPLY: &str = "I hear you over MCP";

/// The model's plan: one tool call per step, then a final text.
fn steps(receiver: &Receiver) -> Vec<(&'static str, Value)> {
    vec![
        ("list_sessions", json!({})),
        ("show_session", json!({"session": receiver.session_id})),
        ("inbound_policy", json!({"cwd": receiver.cwd})),
        (
            "send_message",
            json!({"session_id": receiver.session_id, "message": "hello over MCP", "from": "mcp-client"}),
        ),
        (
            "send_message",
            json!({"session_id": "00000000-0000-4000-8000-000000000000", "message": "to nobody"}),
        ),
        ("wait_for_messages", json!({"timeout_s": 60})),
    ]
}

/// How many tool results the request's conversation holds: the step the model is at.
fn results_so_far(request: &Value) -> usize {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "tool_result")
        .count()
}

/// How many more times the scripted agent waits for a reply after its planned wait.
const MAX_WAITS_AGAIN: usize = 5;

/// Whether the conversation's last tool result holds a `message` event: a reply heard.
fn last_result_holds_a_reply(request: &Value) -> bool {
    let last = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .rfind(|block| block["type"] == "tool_result");
    last.is_some_and(|block| {
        serde_json::from_str::<Value>(&result_text(&block["content"])).is_ok_and(|heard| {
            heard["events"]
                .as_array()
                .is_some_and(|events| events.iter().any(|e| e["event"] == "message"))
        })
    })
}

/// The text of a stream-json tool result's content (a string or text blocks).
fn result_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<String>(),
        other => panic!("unexpected tool result content {other}"),
    }
}

/// What one headless run showed: its stream-json lines, and the tools its model was offered.
struct Run {
    lines: Vec<Value>,
    stdout: String,
    offered: Value,
}

/// Runs the pinned Claude Code headless, with the server on the receiver's home in its
/// `--mcp-config` and a model that follows `plan`.
fn run_client(receiver: &Receiver, plan: &[(&'static str, Value)]) -> Run {
    let client_home = tempfile::tempdir().unwrap();
    fs::write(
        client_home.path().join(".claude.json"),
        r#"{"hasCompletedOnboarding":true}"#,
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let offered: Arc<Mutex<Option<Value>>> = Arc::default();
    let model = {
        let (plan, offered) = (plan.to_vec(), Arc::clone(&offered));
        Endpoint::start(
            KEY,
            Arc::new(move |request: &Value| {
                let tools = request["tools"].as_array().cloned().unwrap_or_default();
                if !tools
                    .iter()
                    .any(|t| t["name"] == "mcp__peers__list_sessions")
                {
                    return Reply::Text("No tools here.".to_owned());
                }
                offered.lock().unwrap().get_or_insert(Value::Array(tools));
                let step = results_so_far(request);
                // As an agent would: the last wait is made again until a reply is heard
                // (receipts can come first), a few times at most.
                let again = step >= plan.len()
                    && step < plan.len() + MAX_WAITS_AGAIN
                    && plan
                        .last()
                        .is_some_and(|(tool, _)| *tool == "wait_for_messages")
                    && !last_result_holds_a_reply(request);
                let next = if again { plan.last() } else { plan.get(step) };
                match next {
                    Some((tool, input)) => Reply::ToolUse {
                        id: format!("toolu_peers_{step}"),
                        name: format!("mcp__peers__{tool}"),
                        input: input.clone(),
                    },
                    None => Reply::Text("Done.".to_owned()),
                }
            }),
        )
        .unwrap()
    };
    let config = json!({"mcpServers": {"peers": {
        "type": "stdio",
        "command": env!("CARGO_BIN_EXE_claude-peers"),
        "args": [
            "--home", receiver.home.path(), "mcp",
            "--claude", claude(),
            "--managed-settings", cache.path().join("no-managed-settings.json"),
        ],
        "env": {"XDG_CACHE_HOME": cache.path()},
    }}});
    let allowed: Vec<String> = TOOLS.iter().map(|t| format!("mcp__peers__{t}")).collect();
    let output = Command::new(claude())
        .args([
            "-p",
            "Use the peers tools.",
            "--output-format",
            "stream-json",
        ])
        .args(["--verbose", "--no-session-persistence", "--max-turns", "10"])
        .arg("--mcp-config")
        .arg(config.to_string())
        .args(["--strict-mcp-config", "--allowedTools", &allowed.join(",")])
        .current_dir(client_home.path())
        .env_remove("XDG_RUNTIME_DIR")
        .env("CLAUDE_CONFIG_DIR", client_home.path())
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", KEY)
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "claude -p failed: {stderr}\n{stdout}"
    );
    let lines = stdout
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    let offered = offered.lock().unwrap().clone();
    Run {
        lines,
        offered: offered.expect("the model was offered the server's tools"),
        stdout,
    }
}

impl Run {
    /// Step `step`'s tool result, parsed, and whether it is an error.
    fn result(&self, step: usize) -> (Value, bool) {
        self.try_result(step)
            .unwrap_or_else(|| panic!("a tool result for step {step}: {}", self.stdout))
    }

    /// The same, when the run reached step `step`.
    fn try_result(&self, step: usize) -> Option<(Value, bool)> {
        let id = format!("toolu_peers_{step}");
        let block = self
            .lines
            .iter()
            .filter(|l| l["type"] == "user")
            .filter_map(|l| l["message"]["content"].as_array())
            .flatten()
            .find(|b| b["type"] == "tool_result" && b["tool_use_id"] == id.as_str())?;
        let text = result_text(&block["content"]);
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("step {step}: the result is JSON ({e}): {text}"));
        Some((json, block["is_error"] == true))
    }
}

#[test]
fn claude_code_calls_every_tool_and_its_stream_shows_the_contract_json() {
    let receiver = Receiver::replying(REPLY);
    let settings = receiver.home.path().join("settings.json");
    let settings_before = fs::read(&settings).unwrap();
    let run = run_client(&receiver, &steps(&receiver));

    let init = run
        .lines
        .iter()
        .find(|l| l["type"] == "system" && l["subtype"] == "init")
        .expect("an init line");
    let server = init["mcp_servers"]
        .as_array()
        .and_then(|servers| servers.iter().find(|s| s["name"] == "peers"));
    assert_eq!(
        server.map(|s| &s["status"]),
        Some(&json!("connected")),
        "{init}"
    );
    for tool in TOOLS {
        let name = format!("mcp__peers__{tool}");
        let seen = run
            .offered
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name.as_str());
        let seen = seen.unwrap_or_else(|| panic!("{name} is offered to the model"));
        assert!(seen["description"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(seen["input_schema"]["type"], "object", "{seen}");
    }

    let (list, is_error) = run.result(0);
    assert!(!is_error);
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["session_id"].as_str())
        .collect();
    assert_eq!(ids, [receiver.session_id.as_str()], "{list}");

    let (shown, is_error) = run.result(1);
    assert!(!is_error);
    assert_eq!(shown["pid"], receiver.pid, "{shown}");
    assert_eq!(shown["addressable"], true);
    assert!(shown["former_names"].is_array() && shown["peer_features"].is_array());

    let (policy, is_error) = run.result(2);
    assert!(!is_error);
    assert_eq!(policy["value"], "accept", "{policy}");
    assert_eq!(policy["decided_by"], "user");

    let (sent, is_error) = run.result(3);
    assert!(!is_error, "{sent}");
    assert_eq!(sent["delivered"], true);
    assert_eq!(sent["via"], "claude");
    assert_eq!(sent["inbound"], "automatic");
    assert_eq!(sent["receipt"], "read");
    assert_eq!(sent["receipt_basis"], "transcript");
    let msg_id = sent["msg_id"].as_str().expect("a msg_id");
    let entry = wait_for(Duration::from_secs(30), || receiver.delivered(msg_id))
        .expect("the receiver's Claude got the message sent through the MCP server");
    assert_eq!(entry["origin"]["body"], "hello over MCP");
    assert_eq!(entry["origin"]["name"], "mcp-client");

    let (refused, is_error) = run.result(4);
    assert!(is_error, "a refusal is a tool error: {refused}");
    assert_eq!(refused["refusal"], "not_live", "{refused}");

    // The receiver's reply comes back to the calling agent, from its session: in the
    // planned wait, or in one made again after receipts came first.
    let waits: Vec<Value> = (5..5 + 1 + MAX_WAITS_AGAIN)
        .map_while(|step| run.try_result(step))
        .map(|(heard, is_error)| {
            assert!(!is_error, "{heard}");
            heard
        })
        .collect();
    let heard = Value::Array(waits.clone());
    let reply = waits
        .iter()
        .filter_map(|w| w["events"].as_array())
        .flatten()
        .find(|e| e["event"] == "message")
        .unwrap_or_else(|| panic!("a reply among {heard}"));
    assert_eq!(reply["text"], REPLY);
    assert_eq!(reply["session_id"], receiver.session_id.as_str());
    assert_eq!(
        fs::read(&settings).unwrap(),
        settings_before,
        "no tool touched the receiver's settings"
    );
}

#[test]
fn mcp_install_registers_the_server_in_claude_code_and_uninstall_removes_it() {
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("project");
    fs::create_dir(&project).unwrap();
    let claude_mcp = |args: &[&str]| {
        let out = Command::new(claude())
            .arg("mcp")
            .args(args)
            .current_dir(&project)
            .env("CLAUDE_CONFIG_DIR", home.path())
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let peers = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(home.path())
            .arg("--json")
            .args(["mcp"])
            .args(args)
            .arg("--claude")
            .arg(claude())
            .current_dir(&project)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("HOME", home.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        crate::receiver::parsed(&out)
    };
    for scope in ["user", "project"] {
        let (code, done, stderr) = peers(&["install", "--scope", scope]);
        assert_eq!(
            (code, &done["installed"]),
            (0, &json!(true)),
            "{done} {stderr}"
        );
        // Again: replaced, not refused.
        assert_eq!(peers(&["install", "--scope", scope]).0, 0);
        let listed = claude_mcp(&["list"]);
        assert!(
            listed.contains(&format!(
                "claude-peers: {} mcp",
                env!("CARGO_BIN_EXE_claude-peers")
            )) && listed.contains(if scope == "user" {
                "Connected"
            } else {
                // A project's server waits for each user's approval in Claude Code.
                "Pending approval"
            }),
            "{scope}: {listed}"
        );
        if scope == "project" {
            let shared = fs::read_to_string(project.join(".mcp.json")).unwrap();
            assert!(shared.contains("claude-peers"), "{shared}");
        }
        let (code, done, stderr) = peers(&["uninstall", "--scope", scope]);
        assert_eq!(
            (code, &done["uninstalled"]),
            (0, &json!(true)),
            "{done} {stderr}"
        );
        let (code, failed, _) = peers(&["uninstall", "--scope", scope]);
        assert_eq!(
            (code, &failed["error"]),
            (1, &json!("mcp_uninstall_failed"))
        );
    }
    assert!(
        claude_mcp(&["list"]).contains("No MCP servers"),
        "all removed"
    );
}
