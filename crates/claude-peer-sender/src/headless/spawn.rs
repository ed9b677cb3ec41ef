//! How the sender is started: the user's `claude`, headless with stream-json, in the
//! private home, its model the scripted endpoint, its hooks this project's.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::HeadlessOptions;
use claude_peer_endpoint::Endpoint;
use claude_peer_guard::protocol::hook_settings;

pub(super) fn spawn(
    options: &HeadlessOptions,
    home: &Path,
    plans: &Path,
    endpoint: &Endpoint,
    secret: &str,
) -> io::Result<Child> {
    let mut command = Command::new(&options.claude);
    command
        .args([
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .args(["--verbose", "--no-session-persistence"])
        // SendMessage is the one tool it needs.
        .args(["--tools", "SendMessage"])
        .arg("--settings")
        .arg(hook_settings(&options.hook, plans))
        .current_dir(plans)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // No MCP server of the user's or a project's starts; an administrator's enterprise
    // configuration, which Claude Code will not let a program leave out, is alone then.
    if claude_peer_settings::managed_mcp(&options.managed_settings).is_none() {
        command.arg("--strict-mcp-config");
    }
    for (key, _) in std::env::vars_os() {
        if redirects_or_identifies(&key.to_string_lossy()) {
            command.env_remove(key);
        }
    }
    command
        .env("CLAUDE_CONFIG_DIR", home)
        .env("ANTHROPIC_BASE_URL", endpoint.base_url())
        .env("ANTHROPIC_API_KEY", secret)
        .env("CLAUDE_CODE_SESSION_NAME", &options.from)
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("NO_PROXY", "127.0.0.1");
    command.spawn()
}

/// An inherited variable that could point the sender at another model or account, name
/// another session as its parent, or route its requests elsewhere.
fn redirects_or_identifies(key: &str) -> bool {
    key.starts_with("ANTHROPIC_")
        || key.starts_with("CLAUDE_CODE_")
        || key == "CLAUDECODE"
        || key == "CLAUDE_CONFIG_DIR"
        || key.to_ascii_lowercase().ends_with("_proxy")
}
