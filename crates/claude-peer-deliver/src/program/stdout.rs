//! A relay's stdout as it is read: the confirmation line (`{"sent": …}`) it ends on and
//! an excerpt to quote when it has none.

use super::STDOUT_LINE_BYTES;
use claude_peer_probe::stream::{Line, LineBuffer, Tail};

/// The stdout end quoted in a failure.
const STDOUT_EXCERPT_BYTES: usize = 512;

/// What a confirmation line (`{"sent": …}`) said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ConfirmationLine {
    pub(super) sent: bool,
    pub(super) detail: Option<String>,
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

    /// The last confirmation line read.
    pub(super) fn confirmation(&self) -> Option<&ConfirmationLine> {
        self.confirmation.as_ref()
    }

    /// The end of what it printed, quoted, for a failure.
    pub(super) fn excerpt(&self) -> String {
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
}
