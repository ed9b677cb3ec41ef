//! What a finished run means: the relay's confirmation line, its exit, its words.

use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use rustix::process::Signal;

use super::STDOUT_LINE_BYTES;
use super::run::Run;
use crate::{Confirmation, RelayFailure};
use claude_peer_probe::stream::{Line, LineBuffer, Tail};

/// The stdout end quoted in a failure.
const STDOUT_EXCERPT_BYTES: usize = 512;

impl Run {
    pub(super) fn verdict(self, name: &str) -> Result<Confirmation, RelayFailure> {
        let stderr = self.stderr.stderr_note();
        let fail = |what: String| RelayFailure::new(format!("the {name} {what}{stderr}"));
        let Some(status) = self.status else {
            return Err(fail(format!(
                "did not finish within {}; it was killed",
                describe_duration(self.timeout)
            )));
        };
        if let Some(signal) = status.signal() {
            let core = if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            };
            return Err(fail(format!(
                "crashed: killed by signal {}{core}",
                signal_name(signal)
            )));
        }
        let reply = self.stdout.confirmation.clone();
        match (status.code(), reply) {
            (Some(0), Some(ConfirmationLine { sent: true, detail })) => Ok(Confirmation {
                detail,
                ..Confirmation::default()
            }),
            (
                Some(0),
                Some(ConfirmationLine {
                    sent: false,
                    detail,
                }),
            ) => Err(fail(format!(
                "reported that it did not send: {}",
                detail.as_deref().unwrap_or("(no detail)")
            ))),
            (Some(0), None) => {
                let stdin = self
                    .stdin_error
                    .map(|err| format!(" (writing the message to its stdin failed: {err})"))
                    .unwrap_or_default();
                Err(fail(format!(
                    "exited with status 0 but printed no {{\"sent\":true}} line{stdin}; its stdout ended with: {}",
                    self.stdout.excerpt()
                )))
            }
            (Some(code), _) => Err(fail(format!("exited with status {code}"))),
            (None, _) => Err(fail(format!("ended with {status}"))),
        }
    }
}

/// What a confirmation line (`{"sent": …}`) said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfirmationLine {
    sent: bool,
    detail: Option<String>,
}

/// Parses one stdout line: a JSON object with a boolean `sent` is a reply.
fn parse_confirmation(line: &[u8]) -> Option<ConfirmationLine> {
    let serde_json::Value::Object(object) = serde_json::from_slice(line).ok()? else {
        return None;
    };
    let sent = object.get("sent")?.as_bool()?;
    let detail = match object.get("detail") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(detail)) => Some(detail.clone()),
        Some(other) => Some(other.to_string()),
    };
    Some(ConfirmationLine { sent, detail })
}

/// A relay's stdout, read line by line: only the current line (at most
/// [`STDOUT_LINE_BYTES`]), the last confirmation and a short excerpt are kept.
#[derive(Debug, Clone)]
pub(super) struct Stdout {
    lines: LineBuffer,
    confirmation: Option<ConfirmationLine>,
    excerpt: Option<Tail>,
}

impl Default for Stdout {
    fn default() -> Self {
        Self {
            lines: LineBuffer::new(STDOUT_LINE_BYTES),
            confirmation: None,
            excerpt: None,
        }
    }
}

impl Stdout {
    pub(super) fn push(&mut self, chunk: &[u8]) {
        self.excerpt
            .get_or_insert_with(|| Tail::new(STDOUT_EXCERPT_BYTES))
            .push(chunk);
        let confirmation = &mut self.confirmation;
        self.lines.push(chunk, |line| note(confirmation, line));
    }

    /// The end of output without a final newline is a line too.
    pub(super) fn finish(&mut self) {
        let confirmation = &mut self.confirmation;
        self.lines.finish(|line| note(confirmation, line));
    }

    fn excerpt(&self) -> String {
        match &self.excerpt {
            Some(tail) if !tail.text().trim().is_empty() => format!("{:?}", tail.text()),
            _ => "(nothing)".to_owned(),
        }
    }
}

/// Keeps `line` when it is a confirmation line: the last one counts.
fn note(confirmation: &mut Option<ConfirmationLine>, line: Line<'_>) {
    if let Line::Whole(line) = line
        && let Some(parsed) = parse_confirmation(line)
    {
        *confirmation = Some(parsed);
    }
}

fn describe_duration(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// `SIGKILL (9)`, or `9` for a signal without a well-known name.
fn signal_name(raw: i32) -> String {
    const NAMES: [(Signal, &str); 15] = [
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::TRAP, "SIGTRAP"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::USR1, "SIGUSR1"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::USR2, "SIGUSR2"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::ALARM, "SIGALRM"),
        (Signal::TERM, "SIGTERM"),
    ];
    NAMES
        .iter()
        .find(|(signal, _)| signal.as_raw() == raw)
        .map_or_else(|| raw.to_string(), |(_, name)| format!("{name} ({raw})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_reply_line_counts_and_other_lines_are_ignored() {
        let mut lines = Stdout::default();
        lines.push(b"starting\n{\"sent\":false}\r\n[1,2]\n{\"sen");
        lines.push(b"t\":true,\"detail\":{\"id\":7}}");
        lines.finish();
        assert_eq!(
            lines.confirmation,
            Some(ConfirmationLine {
                sent: true,
                detail: Some("{\"id\":7}".into())
            })
        );
    }

    #[test]
    fn an_overlong_line_is_dropped_without_being_kept() {
        let mut lines = Stdout::default();
        lines.push(b"{\"sent\":true,\"detail\":\"");
        lines.push(&vec![b'x'; STDOUT_LINE_BYTES]);
        assert_eq!(lines.lines.pending(), 0, "the overlong line is not kept");
        lines.push(b"\"}\n{\"sent\":true}\n");
        lines.finish();
        assert_eq!(
            lines.confirmation,
            Some(ConfirmationLine {
                sent: true,
                detail: None
            })
        );
    }

    #[test]
    fn a_reply_needs_a_boolean_sent() {
        assert_eq!(parse_confirmation(br#"{"sent":"yes"}"#), None);
        assert_eq!(parse_confirmation(b"true"), None);
        assert_eq!(parse_confirmation(b"garbage"), None);
        assert_eq!(
            parse_confirmation(br#" {"sent":true,"detail":null} "#),
            Some(ConfirmationLine {
                sent: true,
                detail: None
            })
        );
    }

    #[test]
    fn signals_are_named() {
        assert_eq!(
            signal_name(Signal::KILL.as_raw()),
            format!("SIGKILL ({})", Signal::KILL.as_raw())
        );
        assert_eq!(signal_name(63), "63");
    }
}
