//! The layout an inserted member copies from the file (what precedes its key, its colon, the
//! indentation of nested values), so an insertion looks as if the file's author wrote it.

use serde_json::Value;

use super::{Doc, Member};

impl Doc<'_> {
    /// The layout of member `m`, which an inserted member after it copies.
    pub(super) fn style_of(&self, m: &Member) -> Style {
        let colon = self.bytes.get(m.key_end..m.value_start).unwrap_or(b": ");
        Style::from_lead(self.span(m.lead_start, m.key_start), colon.to_vec())
    }

    /// Style for an object without members: two-space indentation like
    /// `JSON.stringify(v, null, 2)`, CRLF when the file already uses it.
    pub(super) fn default_style(&self) -> Style {
        let newline: &[u8] = if self.bytes.windows(2).any(|w| w == b"\r\n") {
            b"\r\n"
        } else {
            b"\n"
        };
        let mut lead = newline.to_vec();
        lead.extend_from_slice(b"  ");
        Style::from_lead(&lead, b": ".to_vec())
    }
}

/// The layout a new member copies from the file: what goes before the key, between key and
/// value, and how nested values are indented.
pub(super) struct Style {
    /// Whitespace before a member's key (e.g. `"\n  "`, `" "`, `""`).
    pub(super) lead: Vec<u8>,
    /// The bytes between key and value (e.g. `": "`, `":"`).
    pub(super) colon: Vec<u8>,
    /// `Some((newline, indent unit))` for pretty files, `None` for one-line ones.
    pub(super) pretty: Option<(Vec<u8>, Vec<u8>)>,
}

impl Style {
    fn from_lead(lead: &[u8], colon: Vec<u8>) -> Style {
        let pretty = lead.iter().rposition(|&b| b == b'\n').map(|nl| {
            let crlf = lead[..nl].ends_with(b"\r");
            let newline = if crlf { &b"\r\n"[..] } else { b"\n" };
            (newline.to_vec(), lead[nl + 1..].to_vec())
        });
        Style {
            lead: lead.to_vec(),
            colon,
            pretty,
        }
    }

    /// The value rendered for a member at the top level of this file.
    pub(super) fn render(&self, value: &Value) -> Vec<u8> {
        let compact = || serde_json::to_vec(value).unwrap_or_default();
        let nested = matches!(value, Value::Object(o) if !o.is_empty())
            || matches!(value, Value::Array(a) if !a.is_empty());
        let Some((newline, indent)) = self.pretty.as_ref().filter(|_| nested) else {
            return compact();
        };
        let unit: &[u8] = if indent.is_empty() { b"  " } else { indent };
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(unit);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
        if serde::Serialize::serialize(value, &mut ser).is_err() {
            return compact();
        }
        // Raw newlines only occur between tokens (string contents are escaped), so each one
        // starts a line that belongs one member-indent deeper.
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        lines.join(&[newline.as_slice(), indent].concat()[..])
    }
}
