//! The flag groups several commands share, declared once: their names, help and
//! defaults (the libraries' own constants) cannot drift between commands.
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use claude_peer_deliver::DEFAULT_TIMEOUT;
use claude_peer_sender::DEFAULT_SENDER_NAME;
use claude_peer_settings::MANAGED_SETTINGS_PATH;

/// `--managed-settings FILE`: the top layer of every policy read, and what the sender's
/// hook switches are read from.
#[derive(Debug, Args)]
pub(crate) struct ManagedSettingsArg {
    /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
    #[arg(
        id = "managed_settings",
        long = "managed-settings",
        value_name = "FILE",
        default_value = MANAGED_SETTINGS_PATH
    )]
    pub(crate) path: PathBuf,
}

/// `--claude PATH`: the Claude Code a command runs.
#[derive(Debug, Args)]
pub(crate) struct ClaudeArg {
    /// The Claude Code to run [default: claude on PATH, else ~/.local/bin/claude, else
    /// ~/.claude/local/claude]
    #[arg(id = "claude", long = "claude", value_name = "PATH")]
    pub(crate) path: Option<PathBuf>,
}

/// What every command that starts a Claude Code sender takes: whose name receivers see,
/// and which Claude Code sends.
#[derive(Debug, Args)]
pub(crate) struct SenderArgs {
    /// The sender's name, which receivers see
    #[arg(long, value_name = "NAME", default_value = DEFAULT_SENDER_NAME)]
    pub(crate) from: String,
    #[command(flatten)]
    pub(crate) claude: ClaudeArg,
}

/// `--timeout SECONDS`: how long one send may take.
#[derive(Debug, Args)]
pub(crate) struct TimeoutArg {
    /// Seconds one send (and its receipt) may take before the sender is killed
    #[arg(
        id = "timeout",
        long = "timeout",
        value_name = "SECONDS",
        default_value_t = Seconds(DEFAULT_TIMEOUT),
        value_parser = seconds
    )]
    pub(crate) seconds: Seconds,
}

/// A number of seconds, as a flag takes it and `--help` shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Seconds(pub(crate) Duration);

impl fmt::Display for Seconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.as_secs_f64())
    }
}

/// A positive, finite number of seconds.
pub(crate) fn seconds(text: &str) -> Result<Seconds, String> {
    seconds_or_zero(text).and_then(|duration| {
        if duration.0.is_zero() {
            Err(format!("`{text}` is not a positive number of seconds"))
        } else {
            Ok(duration)
        }
    })
}

/// The longest wait a duration flag accepts: a day. Longer is a mistake, and far longer
/// would overflow the clock's deadlines.
const MAX_SECONDS: f64 = 86_400.0;

/// A number of seconds from zero to a day.
pub(crate) fn seconds_or_zero(text: &str) -> Result<Seconds, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=MAX_SECONDS).contains(s))
        .map(|s| Seconds(Duration::from_secs_f64(s)))
        .ok_or_else(|| {
            format!("`{text}` is not a number of seconds from 0 to {MAX_SECONDS} (a day)")
        })
}
