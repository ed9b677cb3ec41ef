//! What the sender and its guard hooks agree on, written once: how Claude Code is told
//! to run the hooks, and how this project's own prompts are written and recognised.
//!
//! The sender writes both (the `--settings` layer of [`hook_settings`], a job's
//! [`Token`] as its prompt); the hooks ([`crate::run`]) and the sender's stream parser
//! read them back ([`PRE_TOOL_USE`], [`USER_PROMPT_SUBMIT`], [`is_ours`], [`ours`]).

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::Path;

use claude_peer_deliver::MAX_MESSAGE_BYTES;
use serde_json::json;

/// The most bytes read of anything that carries one message JSON-escaped (a hook input, a
/// plan, a `mailbox` request line): 16 times [`MAX_MESSAGE_BYTES`], 1 MiB, room for its
/// escapes (at most six bytes a byte) and what surrounds it.
pub const MAX_ESCAPED_MESSAGE_BYTES: usize = 16 * MAX_MESSAGE_BYTES;

/// How this project's prompts begin; every other prompt is kept from the model.
pub const PROMPT_PREFIX: &str = "claude-peers send ";

/// The hook's first argument before every tool call; the second is the plans directory.
pub const PRE_TOOL_USE: &str = "pre-tool-use";

/// The hook's one argument before every prompt.
pub const USER_PROMPT_SUBMIT: &str = "user-prompt-submit";

/// The prompt that names one job of a sender, `claude-peers send <run>-<n>`: the prompt
/// the sender writes, and what the scripted model looks for in a request to answer
/// with the job's calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// The token of job `n` of the sender run `run` (a few characters of the run's
    /// secret: tokens of two runs differ).
    #[must_use]
    pub fn new(run: &str, n: u64) -> Self {
        Self(format!("{PROMPT_PREFIX}{run}-{n}"))
    }

    /// The token as written into the prompt.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` (a prompt, or a summary naming pending prompts) carries this token.
    #[must_use]
    pub fn is_in(&self, text: &str) -> bool {
        text.contains(&self.0)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether one line of a prompt is one of this project's own prompts.
#[must_use]
pub fn is_ours(line: &str) -> bool {
    line.trim().starts_with(PROMPT_PREFIX)
}

/// This project's own prompts among the lines of `text`, trimmed: Claude Code may merge
/// prompts queued together into one.
pub fn ours(text: &str) -> impl Iterator<Item = &str> {
    text.lines().map(str::trim).filter(|line| is_ours(line))
}

/// Whether a whole prompt is this project's own: not empty, and every line that is not
/// blank one of its prompts. The `user-prompt-submit` hook lets only these through.
#[must_use]
pub fn only_ours(prompt: &str) -> bool {
    !prompt.trim().is_empty()
        && prompt
            .lines()
            .filter(|line| !line.trim().is_empty())
            .all(is_ours)
}

/// The `--settings` layer that installs the hooks, run as `hook… pre-tool-use PLANS`
/// and `hook… user-prompt-submit`, where `hook` is the hook program and its leading
/// arguments. Claude Code lets a call run when its hook crashes or cannot start (any
/// exit but 2 is a "hook error"), so each command ends in `|| exit 2`: every failure of
/// the hook program blocks.
#[must_use]
pub fn hook_settings(hook: &[OsString], plans: &Path) -> String {
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
            "PreToolUse": command(&[OsStr::new(PRE_TOOL_USE), plans.as_os_str()]),
            "UserPromptSubmit": command(&[OsStr::new(USER_PROMPT_SUBMIT)]),
        }
    })
    .to_string()
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
        let settings: Value = serde_json::from_str(&hook_settings(
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
        assert_eq!(
            settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"],
            r"'/opt/my tools/claude-peers' 'hook' 'user-prompt-submit' || exit 2"
        );
    }

    #[test]
    fn a_token_is_one_of_our_prompts_and_is_found_where_it_is_written() {
        let token = Token::new("0a1b2c3d", 4);
        assert_eq!(token.as_str(), "claude-peers send 0a1b2c3d-4");
        assert!(is_ours(token.as_str()) && is_ours("  claude-peers send probe"));
        assert!(only_ours(&format!(
            "{token}\n\n  claude-peers send probe\n"
        )));
        assert!(!only_ours(" \n"));
        assert!(token.is_in(&format!("Pending:\n{token}</summary>")));
        assert!(!token.is_in("claude-peers send 0a1b2c3d-"));
        assert!(!Token::new("0a1b2c3e", 4).is_in(token.as_str()));
        let merged = format!("{token}\n<cross-session-message>\n claude-peers send probe ");
        assert_eq!(
            ours(&merged).collect::<Vec<_>>(),
            [token.as_str(), "claude-peers send probe"]
        );
        assert!(!only_ours(&merged));
    }
}
