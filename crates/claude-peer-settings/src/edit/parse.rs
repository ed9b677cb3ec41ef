//! The one parse of a settings document: `serde_json` decides validity and hands over the
//! top-level members, whose byte spans are then found in the original text.
//!
//! Nothing is re-serialized, so the spans are all an edit needs to keep every other byte.

use std::fmt;

use serde::Deserialize as _;
use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{Doc, DocError, Member};

/// JSON's whitespace.
pub(super) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn kind_name(first: u8) -> &'static str {
    match first {
        b'[' => "an array",
        b'"' => "a string",
        b't' | b'f' => "a boolean",
        b'n' => "null",
        _ => "a number",
    }
}

/// Collects the top-level members as decoded keys and raw values borrowed from the input.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
            members.push(member);
        }
        Ok(members)
    }
}

/// Parses `bytes` with `serde_json`, the one authority on validity: UTF-8, valid JSON, an object
/// at the top level (or empty / whitespace-only text). Returns its members with their spans.
pub(crate) fn parse(bytes: &[u8]) -> Result<Doc<'_>, DocError> {
    let Some(open) = bytes.iter().position(|&b| !is_ws(b)) else {
        return Ok(Doc {
            bytes,
            braces: None,
            members: Vec::new(),
        });
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|e| DocError::InvalidJson(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let mut de = serde_json::Deserializer::from_str(text);
    if bytes[open] != b'{' {
        IgnoredAny::deserialize(&mut de)?;
        de.end()?;
        return Err(DocError::NotAnObject(kind_name(bytes[open])));
    }
    let raw = (&mut de).deserialize_map(Members)?;
    de.end()?;
    // serde_json accepted the text, so only whitespace follows the closing brace.
    let close = bytes.iter().rposition(|&b| !is_ws(b)).unwrap_or(open);
    // Offset just past the previous value (or the `{`).
    let mut after = open + 1;
    let mut members = Vec::with_capacity(raw.len());
    for (key, value) in raw {
        let value_start = value.get().as_ptr() as usize - text.as_ptr() as usize;
        // Before the value serde_json accepted only whitespace, a comma (not before the first
        // member), the key string and a colon: the first quote opens the key, the last quote
        // before the last colon closes it.
        let gap = bytes.get(after..value_start).unwrap_or_default();
        let past_last =
            |b: u8, within: &[u8]| within.iter().rposition(|&c| c == b).map_or(0, |i| i + 1);
        let key_start = gap.iter().position(|&b| b == b'"').unwrap_or(0);
        let colon = past_last(b':', gap).saturating_sub(1);
        members.push(Member {
            key,
            lead_start: after + past_last(b',', &gap[..key_start]),
            key_start: after + key_start,
            key_end: after + past_last(b'"', &gap[..colon]),
            value_start,
            value_end: value_start + value.get().len(),
        });
        after = value_start + value.get().len();
    }
    Ok(Doc {
        bytes,
        braces: Some((open, close)),
        members,
    })
}
