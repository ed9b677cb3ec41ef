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

/// `--timeout DURATION`: how long one send may take.
#[derive(Debug, Args)]
pub(crate) struct TimeoutArg {
    /// How long one send (and its receipt) may take before the sender is killed: 90,
    /// 90s, 10m, 2h
    #[arg(
        id = "timeout",
        long = "timeout",
        value_name = "DURATION",
        default_value_t = Span(DEFAULT_TIMEOUT),
        value_parser = positive_span
    )]
    pub(crate) span: Span,
}

/// A length of time as a flag takes it and `--help` shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Span(pub(crate) Duration);

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}s", self.0.as_secs_f64())
    }
}

/// The longest wait a duration flag accepts: a day. Longer is a mistake, and far longer
/// would overflow the clock's deadlines.
const LONGEST: Duration = Duration::from_secs(86_400);

/// A length of time in the one syntax of every duration flag: a number of seconds
/// (`90`, `0.5`), or a number and its unit: `s`, `m`, `h` or `d` (`90s`, `10m`, `2h`,
/// `1d`).
pub(crate) fn duration(text: &str) -> Option<Duration> {
    let (number, scale) = match text.as_bytes().last()? {
        b's' => (&text[..text.len() - 1], 1.0),
        b'm' => (&text[..text.len() - 1], 60.0),
        b'h' => (&text[..text.len() - 1], 3_600.0),
        b'd' => (&text[..text.len() - 1], 86_400.0),
        b'0'..=b'9' | b'.' => (text, 1.0),
        _ => return None,
    };
    // Digits and one point only: no sign, exponent, `inf` or `nan` for a Rust float.
    let plain = !number.is_empty()
        && number.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && number.bytes().filter(|&b| b == b'.').count() <= 1
        && number != ".";
    let seconds: f64 = number.parse().ok().filter(|_| plain)?;
    Duration::try_from_secs_f64(seconds * scale).ok()
}

/// A length of time from zero to a day.
pub(crate) fn span(text: &str) -> Result<Span, String> {
    duration(text)
        .filter(|d| *d <= LONGEST)
        .map(Span)
        .ok_or_else(|| {
            format!("`{text}` is not a duration from 0 to 1d, such as 90, 90s, 10m or 2h")
        })
}

/// A length of time above zero, up to a day.
pub(crate) fn positive_span(text: &str) -> Result<Span, String> {
    span(text).and_then(|span| {
        if span.0.is_zero() {
            Err(format!(
                "`{text}` is not a duration above 0, such as 90, 90s, 10m or 2h"
            ))
        } else {
            Ok(span)
        }
    })
}

/// How long a message may wait: above zero, at most 30 days.
pub(crate) fn expiry(text: &str) -> Result<Span, String> {
    duration(text)
        .filter(|d| !d.is_zero() && *d <= claude_peer_post::MAX_EXPIRY)
        .map(Span)
        .ok_or_else(|| {
            format!(
                "`{text}` is not a duration above 0 and at most 30d, such as 90s, 10m, 2h or 3d"
            )
        })
}

/// How far back a list reaches: any duration (a longer one than the store holds shows
/// everything).
pub(crate) fn since(text: &str) -> Result<Span, String> {
    duration(text)
        .map(Span)
        .ok_or_else(|| format!("`{text}` is not a duration, such as 90s, 10m, 2h or 3d"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{duration, positive_span, span};

    #[test]
    fn every_duration_flag_takes_seconds_or_a_number_with_its_unit() {
        let secs = |s: f64| Some(Duration::from_secs_f64(s));
        for (text, expected) in [
            ("90", secs(90.0)),
            ("0.5", secs(0.5)),
            ("90s", secs(90.0)),
            ("1.5s", secs(1.5)),
            ("10m", secs(600.0)),
            ("2h", secs(7_200.0)),
            ("3d", secs(259_200.0)),
            ("0", secs(0.0)),
            (".5", secs(0.5)),
        ] {
            assert_eq!(duration(text), expected, "{text}");
        }
        for bad in [
            "", "s", "m", ".", "-1", "+1", "1e3", "inf", "nan", "1.2.3", "10 m", "10ms", "1w",
            "1M", "١٠",
        ] {
            assert_eq!(duration(bad), None, "{bad:?}");
        }
        assert!(span("1d").is_ok());
        let err = span("2d").unwrap_err();
        assert!(err.contains("`2d` is not a duration from 0 to 1d"), "{err}");
        assert!(positive_span("0s").is_err());
        assert_eq!(positive_span("20s").unwrap().to_string(), "20s");
    }
}
