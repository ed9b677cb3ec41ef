//! How the sender is started: the user's `claude`, headless with stream-json, in the
//! private home, its model the scripted endpoint, its hooks this project's.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use serde_json::json;

use super::SenderOptions;
use claude_peer_endpoint::Endpoint;

pub(super) fn spawn(
    options: &SenderOptions,
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
        .arg(hooks(&options.hook, plans))
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

/// The `--settings` layer that installs the hooks, run as `hook… pre-tool-use PLANS`
/// and `hook… user-prompt-submit`. Claude Code lets a call run when its hook crashes or
/// cannot start (any exit but 2 is a "hook error"), so each command ends in `|| exit 2`:
/// every failure of the hook program blocks.
fn hooks(hook: &[OsString], plans: &Path) -> String {
    let command = |mode: &[&OsStr]| {
        let words: Vec<String> = hook
            .iter()
            .map(OsString::as_os_str)
            .chain(mode.iter().copied())
            .map(|word| shell_quote(&word.to_string_lossy()))
            .collect();
        let command = format!("{} || exit 2", words.join(" "));
        json!([{"matcher": "*", "hooks": [{"type": "command", "command": command}]}])
    };
    json!({
        "hooks": {
            "PreToolUse": command(&[OsStr::new("pre-tool-use"), plans.as_os_str()]),
            "UserPromptSubmit": command(&[OsStr::new("user-prompt-submit")]),
        }
    })
    .to_string()
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

/// `'…'`, with `'` written as `'\''`: one word for the shell Claude Code runs hooks in.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn hook_commands_quote_every_word() {
        let settings: Value = serde_json::from_str(&hooks(
            &[
                OsString::from("/opt/my tools/claude-peers"),
                OsString::from("hook"),
            ],
            Path::new("/run/it's here"),
        ))
        .unwrap();
        assert_eq!(
            settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            r"'/opt/my tools/claude-peers' 'hook' 'pre-tool-use' '/run/it'\''s here' || exit 2"
        );
    }
}
