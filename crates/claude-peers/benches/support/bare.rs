//! A bare `claude -p` sending one message: the baseline a send through claude-peers is
//! measured against.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use claude_peer_endpoint::{Endpoint, Reply};
use serde_json::{Value, json};

/// The bare sender's model and home: the same Claude Code and scripted model as a
/// send, without hooks, receipt window or resolution; it exits after its turn.
pub(crate) fn bare_sender(work: &Path, socket: String) -> (Endpoint, PathBuf) {
    let model = Endpoint::start(
        "bench",
        Arc::new(move |request: &Value| {
            let messages = request["messages"].as_array().unwrap();
            let last = &messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"];
            if last.to_string().contains("tool_result") {
                Reply::Text("Done.".to_owned())
            } else {
                Reply::ToolUse {
                    id: "toolu_bench".to_owned(),
                    name: "SendMessage".to_owned(),
                    input: json!({"to": socket, "message": "bench"}),
                }
            }
        }),
    )
    .unwrap();
    let home = work.join("bare-home");
    fs::create_dir_all(&home).unwrap();
    fs::write(
        home.join(".claude.json"),
        r#"{"hasCompletedOnboarding":true}"#,
    )
    .unwrap();
    (model, home)
}

pub(crate) fn bare_command(claude: &Path, home: &Path, model: &Endpoint, work: &Path) -> Command {
    let mut command = Command::new(claude);
    command
        .args([
            "-p",
            "send it",
            "--output-format",
            "stream-json",
            "--verbose",
        ])
        .arg("--no-session-persistence")
        .env("CLAUDE_CONFIG_DIR", home)
        .env("ANTHROPIC_BASE_URL", model.base_url())
        .env("ANTHROPIC_API_KEY", "bench")
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .current_dir(work);
    command
}
