//! The minimal byte edit of one top-level member of a JSON object.
//!
//! Pure functions over bytes: no file system. A byte-level scan ([`scan`], or [`scan_tail`]
//! backwards from the closing brace) finds the byte spans of the top-level members without
//! validating anything else; [`validate`] checks the whole document (with the conservative
//! [`quick`] check, else with `serde_json`, never building a tree) and that it has exactly the
//! scanned members, and may run in parallel with
//! the write of the edit, but must pass before the edit replaces the file. An edit splices new
//! bytes into the original ones and never re-serializes the document.

use std::fmt;
use std::ops::Range;

use serde::Deserialize as _;
use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::quick;

/// Why a document cannot be edited: the caller turns this into an [`crate::Error`] with the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DocError {
    /// Not JSON at all; the message is `serde_json`'s.
    InvalidJson(String),
    /// Valid JSON whose top level is not an object; the name of what it is.
    NotAnObject(&'static str),
}

/// One top-level member: byte offsets into the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Member {
    /// The decoded key.
    pub(crate) key: String,
    /// Offset of the key's opening quote.
    pub(crate) key_start: usize,
    /// Offset just past the key's closing quote.
    pub(crate) key_end: usize,
    /// Offset of the value's first byte.
    pub(crate) value_start: usize,
    /// Offset just past the value's last byte.
    pub(crate) value_end: usize,
    /// Offset where the whitespace before the key starts (just past `{` or `,`).
    pub(crate) lead_start: usize,
}

/// The scanned top level of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Scanned {
    /// `None` for a document that is empty or whitespace only (read as `{}`).
    pub(crate) braces: Option<(usize, usize)>,
    /// The members in file order, duplicates included: all of them when `complete`, else
    /// the last ones (see [`scan_tail`]).
    pub(crate) members: Vec<Member>,
    /// Whether `members` are all the members.
    pub(crate) complete: bool,
}

impl Scanned {
    /// The member JSON.parse would honour for `key`: the last occurrence.
    pub(crate) fn last(&self, key: &str) -> Option<&Member> {
        self.members.iter().rev().find(|m| m.key == key)
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).copied().is_some_and(is_ws) {
        i += 1;
    }
    i
}

fn bad(at: usize) -> DocError {
    DocError::InvalidJson(format!("unexpected input at byte {at}"))
}

/// `0x01` in every byte of a word.
const LANES_LOW: u64 = 0x0101_0101_0101_0101;
/// `0x80` in every byte of a word.
const LANES_HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit set in every byte lane of `v` that is zero, possibly also in lanes above the
/// first zero one: the lowest set bit always marks the first zero byte (little-endian).
fn zero_lanes(v: u64) -> u64 {
    v.wrapping_sub(LANES_LOW) & !v & LANES_HIGH
}

/// The 8 bytes at `i` as a little-endian word, if there are 8.
fn word_at(bytes: &[u8], i: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(i..i.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// The first offset at or after `i` whose byte is wanted, eight bytes at a time:
/// `word_hits` marks the wanted lanes of a word (high bit of each lane), `wanted` judges the
/// bytes of the short tail.
#[inline]
fn find_byte(
    bytes: &[u8],
    mut i: usize,
    word_hits: impl Fn(u64) -> u64,
    wanted: impl Fn(u8) -> bool,
) -> Option<usize> {
    while let Some(w) = word_at(bytes, i) {
        let hits = word_hits(w);
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    let k = bytes.get(i..)?.iter().position(|&b| wanted(b))?;
    Some(i + k)
}

/// The first offset at or after `i` whose byte is `"` or `\`.
fn find_quote_or_backslash(bytes: &[u8], i: usize) -> Option<usize> {
    const QUOTES: u64 = LANES_LOW * b'"' as u64;
    const BACKSLASHES: u64 = LANES_LOW * b'\\' as u64;
    find_byte(
        bytes,
        i,
        |w| zero_lanes(w ^ QUOTES) | zero_lanes(w ^ BACKSLASHES),
        |b| b == b'"' || b == b'\\',
    )
}

/// Whether `b` may be a bracket: true for `[ ] { }` (and for `Y _ y DEL`, which the caller
/// tells apart); brackets are the bytes `0x5B 0x5D 0x7B 0x7D`, equal outside the bits `0x26`.
fn maybe_bracket(b: u8) -> bool {
    b & 0xD9 == 0x59
}

/// The first offset at or after `i` whose byte is `"` or may be a bracket.
fn find_quote_or_bracket(bytes: &[u8], i: usize) -> Option<usize> {
    const QUOTES: u64 = LANES_LOW * b'"' as u64;
    const MASK: u64 = LANES_LOW * 0xD9;
    const BRACKETS: u64 = LANES_LOW * 0x59;
    find_byte(
        bytes,
        i,
        |w| zero_lanes(w ^ QUOTES) | zero_lanes((w & MASK) ^ BRACKETS),
        |b| b == b'"' || maybe_bracket(b),
    )
}

/// Offset just past the string starting with the quote at `i`.
fn skip_string(bytes: &[u8], i: usize) -> Result<usize, DocError> {
    let mut j = i + 1;
    loop {
        j = find_quote_or_backslash(bytes, j).ok_or_else(|| bad(bytes.len()))?;
        if bytes.get(j) == Some(&b'"') {
            return Ok(j + 1);
        }
        // A backslash: the byte after it is escaped, whatever it is.
        j += 2;
    }
}

/// Offset just past the array or object starting at `i`: only strings and brackets are looked
/// at (the parallel validation checks everything else).
fn skip_nested(bytes: &[u8], i: usize) -> Result<usize, DocError> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        j = find_quote_or_bracket(bytes, j).ok_or_else(|| bad(bytes.len()))?;
        match bytes.get(j) {
            Some(b'"') => j = skip_string(bytes, j)?,
            Some(b'[' | b'{') => {
                depth += 1;
                j += 1;
            }
            Some(b']' | b'}') => {
                depth = depth.checked_sub(1).ok_or_else(|| bad(j))?;
                j += 1;
                if depth == 0 {
                    return Ok(j);
                }
            }
            _ => j += 1,
        }
    }
}

/// Offset just past the value starting at `i` (a member's value in a top-level object).
fn skip_value(bytes: &[u8], i: usize) -> Result<usize, DocError> {
    match bytes.get(i) {
        Some(b'"') => skip_string(bytes, i),
        Some(b'[' | b'{') => skip_nested(bytes, i),
        Some(b',' | b'}' | b']' | b':') | None => Err(bad(i)),
        Some(_) => {
            // A number, `true`, `false` or `null`: up to the next delimiter.
            let rest = bytes.get(i..).unwrap_or_default();
            let len = rest
                .iter()
                .position(|&b| is_ws(b) || matches!(b, b',' | b'}' | b']'))
                .unwrap_or(rest.len());
            Ok(i + len)
        }
    }
}

fn kind_name(bytes: &[u8]) -> &'static str {
    match bytes.get(skip_ws(bytes, 0)) {
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
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

/// Finds the top-level members of `bytes`, a JSON object (or empty / whitespace-only text,
/// read as `{}`), with a fast structural scan: the spans of the members and their decoded keys.
///
/// This does **not** validate the document (only strings, brackets and the top level are
/// looked at): [`validate`] must accept it before anything derived from it is written.
/// An error here is not the one to report: [`validate`] gives that one.
pub(crate) fn scan(bytes: &[u8]) -> Result<Scanned, DocError> {
    let start = skip_ws(bytes, 0);
    if start == bytes.len() {
        return Ok(Scanned {
            braces: None,
            members: Vec::new(),
            complete: true,
        });
    }
    if bytes.get(start) != Some(&b'{') {
        return Err(bad(start));
    }
    let mut members = Vec::new();
    let mut i = start + 1;
    loop {
        let lead_start = i;
        i = skip_ws(bytes, i);
        match bytes.get(i) {
            Some(b'}') if members.is_empty() => {
                return Ok(Scanned {
                    braces: Some((start, i)),
                    members,
                    complete: true,
                });
            }
            Some(b'"') => {}
            _ => return Err(bad(i)),
        }
        let key_start = i;
        let key_end = skip_string(bytes, i)?;
        let key = bytes
            .get(key_start..key_end)
            .and_then(|raw| serde_json::from_slice::<String>(raw).ok())
            .ok_or_else(|| bad(key_start))?;
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return Err(bad(i));
        }
        let value_start = skip_ws(bytes, i + 1);
        let value_end = skip_value(bytes, value_start)?;
        members.push(Member {
            key,
            key_start,
            key_end,
            value_start,
            value_end,
            lead_start,
        });
        i = skip_ws(bytes, value_end);
        match bytes.get(i) {
            Some(b',') => i += 1,
            Some(b'}') => {
                return Ok(Scanned {
                    braces: Some((start, i)),
                    members,
                    complete: true,
                });
            }
            _ => return Err(bad(i)),
        }
    }
}

/// The high bit set in exactly the byte lanes of `v` that are zero.
fn zero_lanes_exact(v: u64) -> u64 {
    !(((v & !LANES_HIGH).wrapping_add(!LANES_HIGH)) | v) & LANES_HIGH
}

/// The last offset before `end` whose byte is `"` or may be a bracket (see [`maybe_bracket`]),
/// eight bytes at a time.
fn rfind_quote_or_bracket(bytes: &[u8], mut end: usize) -> Option<usize> {
    const QUOTES: u64 = LANES_LOW * b'"' as u64;
    const MASK: u64 = LANES_LOW * 0xD9;
    const BRACKETS: u64 = LANES_LOW * 0x59;
    while let Some(w) = end.checked_sub(8).and_then(|i| word_at(bytes, i)) {
        let hits = zero_lanes_exact(w ^ QUOTES) | zero_lanes_exact((w & MASK) ^ BRACKETS);
        if hits != 0 {
            return Some(end - 1 - (hits.leading_zeros() / 8) as usize);
        }
        end -= 8;
    }
    bytes
        .get(..end)?
        .iter()
        .rposition(|&b| b == b'"' || maybe_bracket(b))
}

/// The last offset before `end` whose byte is `"`, eight bytes at a time.
fn rfind_quote(bytes: &[u8], mut end: usize) -> Option<usize> {
    const QUOTES: u64 = LANES_LOW * b'"' as u64;
    while let Some(w) = end.checked_sub(8).and_then(|i| word_at(bytes, i)) {
        let hits = zero_lanes_exact(w ^ QUOTES);
        if hits != 0 {
            return Some(end - 1 - (hits.leading_zeros() / 8) as usize);
        }
        end -= 8;
    }
    bytes.get(..end)?.iter().rposition(|&b| b == b'"')
}

/// Offset of the opening quote of the string whose closing quote is at `close`. In valid JSON
/// a quote inside a string is preceded by an odd run of backslashes, a delimiting one by an
/// even run (backslashes occur only inside strings).
fn string_start_back(bytes: &[u8], close: usize) -> Result<usize, DocError> {
    let mut end = close;
    loop {
        let q = rfind_quote(bytes, end).ok_or_else(|| bad(close))?;
        let run = bytes
            .get(..q)
            .unwrap_or_default()
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if run % 2 == 0 {
            return Ok(q);
        }
        end = q;
    }
}

/// Offset of the first byte of the value whose last byte is at `last` (`end - 1`).
fn value_start_back(bytes: &[u8], end: usize) -> Result<usize, DocError> {
    let last = end.checked_sub(1).ok_or_else(|| bad(0))?;
    match bytes.get(last) {
        Some(b'"') => string_start_back(bytes, last),
        Some(b']' | b'}') => {
            let mut depth = 0usize;
            let mut j = end;
            loop {
                let k = rfind_quote_or_bracket(bytes, j).ok_or_else(|| bad(last))?;
                match bytes.get(k) {
                    Some(b'"') => j = string_start_back(bytes, k)?,
                    Some(b']' | b'}') => {
                        depth += 1;
                        j = k;
                    }
                    Some(b'[' | b'{') => {
                        depth = depth.checked_sub(1).ok_or_else(|| bad(k))?;
                        if depth == 0 {
                            return Ok(k);
                        }
                        j = k;
                    }
                    _ => j = k,
                }
            }
        }
        Some(b',' | b':' | b'[' | b'{') | None => Err(bad(last)),
        Some(_) => {
            // A number, `true`, `false` or `null`: back to the previous delimiter.
            let head = bytes.get(..end).unwrap_or_default();
            Ok(head
                .iter()
                .rposition(|&b| is_ws(b) || matches!(b, b',' | b':' | b'[' | b'{'))
                .map_or(0, |k| k + 1))
        }
    }
}

/// Offset just past the last non-whitespace byte before `end`.
fn skip_ws_back(bytes: &[u8], mut end: usize) -> usize {
    while end > 0 && bytes.get(end - 1).copied().is_some_and(is_ws) {
        end -= 1;
    }
    end
}

/// Like [`scan`], but from the closing brace backwards, stopping at the last occurrence of
/// `key`: the members found are the last ones of the object (all of them only when `key` is
/// absent). An update that sets `key` needs no more, and so does not walk the (possibly big)
/// members before it. The same caveat as for [`scan`]: [`validate`] must accept the document.
pub(crate) fn scan_tail(bytes: &[u8], key: &str) -> Result<Scanned, DocError> {
    let start = skip_ws(bytes, 0);
    if start == bytes.len() {
        return Ok(Scanned {
            braces: None,
            members: Vec::new(),
            complete: true,
        });
    }
    let close = skip_ws_back(bytes, bytes.len()) - 1;
    if bytes.get(start) != Some(&b'{') || bytes.get(close) != Some(&b'}') || close <= start {
        return Err(bad(start));
    }
    let mut members = Vec::new();
    let mut i = skip_ws_back(bytes, close);
    let complete = loop {
        if i == start + 1 {
            if !members.is_empty() {
                return Err(bad(i));
            }
            break true;
        }
        let value_end = i;
        let value_start = value_start_back(bytes, value_end)?;
        i = skip_ws_back(bytes, value_start);
        if i == 0 || bytes.get(i - 1) != Some(&b':') {
            return Err(bad(i));
        }
        let key_end = skip_ws_back(bytes, i - 1);
        if key_end == 0 || bytes.get(key_end - 1) != Some(&b'"') {
            return Err(bad(key_end));
        }
        let key_start = string_start_back(bytes, key_end - 1)?;
        let decoded = bytes
            .get(key_start..key_end)
            .and_then(|raw| serde_json::from_slice::<String>(raw).ok())
            .ok_or_else(|| bad(key_start))?;
        i = skip_ws_back(bytes, key_start);
        let found = decoded == key;
        let lead_start = i;
        members.push(Member {
            key: decoded,
            key_start,
            key_end,
            value_start,
            value_end,
            lead_start,
        });
        match bytes.get(i.wrapping_sub(1)) {
            Some(b'{') if i - 1 == start => break true,
            Some(b',') if found => break false,
            Some(b',') => i = skip_ws_back(bytes, i - 1),
            _ => return Err(bad(i)),
        }
    };
    members.reverse();
    Ok(Scanned {
        braces: Some((start, close)),
        members,
        complete,
    })
}

/// Parses `bytes` with `serde_json` in one pass: UTF-8, valid JSON, an object at the top level;
/// its members as decoded keys and raw values. `None` for empty / whitespace-only text.
pub(crate) fn parse_members(bytes: &[u8]) -> Result<Option<Vec<(String, &RawValue)>>, DocError> {
    let start = skip_ws(bytes, 0);
    if start == bytes.len() {
        return Ok(None);
    }
    // Strict UTF-8 first (JSON text is UTF-8); parsing a `str` is then also faster.
    let text = std::str::from_utf8(bytes)
        .map_err(|e| DocError::InvalidJson(format!("invalid UTF-8 at byte {}", e.valid_up_to())))?;
    let mut de = serde_json::Deserializer::from_str(text);
    if bytes.get(start) != Some(&b'{') {
        IgnoredAny::deserialize(&mut de)
            .and_then(|_| de.end())
            .map_err(|e| DocError::InvalidJson(e.to_string()))?;
        return Err(DocError::NotAnObject(kind_name(bytes)));
    }
    (&mut de)
        .deserialize_map(Members)
        .and_then(|members| de.end().map(|()| Some(members)))
        .map_err(|e| DocError::InvalidJson(e.to_string()))
}

/// Validates `bytes` in one pass (the [`quick`] check, or `serde_json` when that is not sure):
/// UTF-8, valid JSON, an object at the top
/// level (or empty / whitespace-only text). With `scanned`, also checks that `serde_json` sees
/// exactly the members [`scan`] or [`scan_tail`] found (same decoded keys, same value spans,
/// and, for a tail, no member after them), so an edit computed from the scan is an edit of
/// the document `serde_json` (and `JSON.parse`) reads.
pub(crate) fn validate(bytes: &[u8], scanned: Option<&Scanned>) -> Result<(), DocError> {
    // The usual document is certainly valid by the quick check, which sees the same members
    // as `serde_json`; anything it is not sure of goes to `serde_json`.
    if let Some(members) = quick::members(bytes) {
        let Some(scanned) = scanned else {
            return Ok(());
        };
        let seen: Option<Vec<(&str, Range<usize>)>> = members
            .into_iter()
            .map(|m| {
                let key = std::str::from_utf8(bytes.get(m.key)?).ok()?;
                Some((key, m.value))
            })
            .collect();
        if let Some(seen) = seen {
            return agrees(bytes, scanned, &seen);
        }
    }
    let parsed = parse_members(bytes)?;
    let Some(scanned) = scanned else {
        return Ok(());
    };
    let Some(raw) = parsed else {
        return match scanned.braces {
            None => Ok(()),
            Some(_) => Err(bad(skip_ws(bytes, 0))),
        };
    };
    let base = bytes.as_ptr().addr();
    let seen: Vec<(&str, Range<usize>)> = raw
        .iter()
        .map(|(key, value)| {
            let at = value.get().as_ptr().addr().wrapping_sub(base);
            (key.as_str(), at..at.wrapping_add(value.get().len()))
        })
        .collect();
    agrees(bytes, scanned, &seen)
}

/// Whether `seen`, the members of an object as a full parse saw them (decoded keys, value
/// spans), are the scanned ones: all of them for a complete scan, else the last ones.
fn agrees(bytes: &[u8], scanned: &Scanned, seen: &[(&str, Range<usize>)]) -> Result<(), DocError> {
    let start = skip_ws(bytes, 0);
    let skipped = seen.len().checked_sub(scanned.members.len());
    if scanned.braces.is_none_or(|(open, _)| open != start)
        || skipped.is_none()
        || (scanned.complete && skipped != Some(0))
    {
        return Err(bad(start));
    }
    let tail = seen.get(skipped.unwrap_or_default()..).unwrap_or_default();
    for ((key, value), m) in tail.iter().zip(&scanned.members) {
        if *key != m.key || *value != (m.value_start..m.value_end) {
            return Err(bad(m.value_start));
        }
    }
    Ok(())
}

/// The parsed value of the member JSON.parse honours for `key`, with its raw text.
pub(crate) fn get(bytes: &[u8], key: &str) -> Result<Option<(Value, String)>, DocError> {
    let members = parse_members(bytes)?.unwrap_or_default();
    let Some((_, raw)) = members.iter().rev().find(|(k, _)| k == key) else {
        return Ok(None);
    };
    let raw = raw.get();
    let value = serde_json::from_str(raw).map_err(|e| DocError::InvalidJson(e.to_string()))?;
    Ok(Some((value, raw.to_owned())))
}

/// The scan and the edit of an update that sets `key` to `value` (see [`set`]); the scan is
/// the one [`validate`] must accept before the edit is written.
pub(crate) fn plan_set(
    bytes: &[u8],
    key: &str,
    value: &Value,
) -> Result<(Scanned, Option<Splice>), DocError> {
    let scanned = scan_tail(bytes, key)?;
    let splice = set(bytes, &scanned, key, value);
    Ok((scanned, splice))
}

/// The scan and the edit of an update that removes `key` (see [`remove`]).
pub(crate) fn plan_remove(bytes: &[u8], key: &str) -> Result<(Scanned, Option<Splice>), DocError> {
    let scanned = scan(bytes)?;
    let splice = remove(bytes, &scanned, key)?;
    Ok((scanned, splice))
}

/// The layout a new member copies from the file: what goes before the key, between key and value,
/// and how nested values are indented.
struct Style {
    /// Whitespace before a member's key (e.g. `"\n  "`, `" "`, `""`).
    lead: Vec<u8>,
    /// The bytes between key and value (e.g. `": "`, `":"`).
    colon: Vec<u8>,
    /// `Some((newline, indent unit))` for pretty files, `None` for one-line ones.
    pretty: Option<(Vec<u8>, Vec<u8>)>,
}

impl Style {
    fn from_lead(lead: &[u8], colon: Vec<u8>) -> Style {
        let pretty = lead.iter().rposition(|&b| b == b'\n').map(|nl| {
            let newline = if nl > 0 && lead.get(nl - 1) == Some(&b'\r') {
                b"\r\n".to_vec()
            } else {
                b"\n".to_vec()
            };
            let indent = lead.get(nl + 1..).unwrap_or_default().to_vec();
            (newline, indent)
        });
        Style {
            lead: lead.to_vec(),
            colon,
            pretty,
        }
    }

    /// Style for an object without members: two-space indentation like `JSON.stringify(v, null, 2)`,
    /// CRLF when the file already uses it.
    fn default_for(bytes: &[u8]) -> Style {
        let newline: &[u8] = if bytes.windows(2).any(|w| w == b"\r\n") {
            b"\r\n"
        } else {
            b"\n"
        };
        let mut lead = newline.to_vec();
        lead.extend_from_slice(b"  ");
        Style::from_lead(&lead, b": ".to_vec())
    }

    fn of_member(bytes: &[u8], m: &Member) -> Style {
        let lead = bytes.get(m.lead_start..m.key_start).unwrap_or_default();
        let colon = bytes.get(m.key_end..m.value_start).unwrap_or(b": ");
        Style::from_lead(lead, colon.to_vec())
    }

    /// The value rendered for a member at the top level of this file.
    fn render(&self, value: &Value) -> Vec<u8> {
        let Some((newline, indent)) = &self.pretty else {
            return serde_json::to_vec(value).unwrap_or_default();
        };
        if !matches!(value, Value::Object(o) if !o.is_empty())
            && !matches!(value, Value::Array(a) if !a.is_empty())
        {
            return serde_json::to_vec(value).unwrap_or_default();
        }
        let unit = if indent.is_empty() {
            b"  ".as_slice()
        } else {
            indent.as_slice()
        };
        let mut out = Vec::new();
        let formatter = serde_json::ser::PrettyFormatter::with_indent(unit);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
        if serde::Serialize::serialize(value, &mut ser).is_err() {
            return serde_json::to_vec(value).unwrap_or_default();
        }
        // Raw newlines only occur between tokens (string contents are escaped), so each one
        // starts a line that belongs one member-indent deeper.
        let mut rendered = Vec::with_capacity(out.len() + out.len() / 8);
        for &b in &out {
            if b == b'\n' {
                rendered.extend_from_slice(newline);
                rendered.extend_from_slice(indent);
            } else {
                rendered.push(b);
            }
        }
        rendered
    }
}

/// An edit of a document: the bytes `start..end` of the original replaced by `insert`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Splice {
    start: usize,
    end: usize,
    insert: Vec<u8>,
}

impl Splice {
    fn new(start: usize, end: usize, insert: Vec<u8>) -> Splice {
        Splice { start, end, insert }
    }

    /// How many leading bytes of the original the edited document keeps.
    pub(crate) fn kept(&self) -> usize {
        self.start
    }

    /// The edited document as three slices, so a big file is written without copying it.
    pub(crate) fn parts<'a>(&'a self, original: &'a [u8]) -> [&'a [u8]; 3] {
        [
            original.get(..self.start).unwrap_or_default(),
            &self.insert,
            original.get(self.end..).unwrap_or_default(),
        ]
    }

    /// The edited document in one buffer.
    pub(crate) fn apply(&self, original: &[u8]) -> Vec<u8> {
        self.parts(original).concat()
    }
}

/// Sets top-level `key` to `value` with the smallest byte change; `None` when the member
/// already holds an equal value (nothing to write). `scanned` may be a [`scan_tail`] for `key`.
///
/// With duplicate keys the last occurrence (the one JSON.parse honours) is edited.
pub(crate) fn set(bytes: &[u8], scanned: &Scanned, key: &str, value: &Value) -> Option<Splice> {
    if let Some(m) = scanned.last(key) {
        let raw = bytes.get(m.value_start..m.value_end).unwrap_or_default();
        if serde_json::from_slice::<Value>(raw).is_ok_and(|old| &old == value) {
            return None;
        }
        let rendered = Style::of_member(bytes, m).render(value);
        return Some(Splice::new(m.value_start, m.value_end, rendered));
    }
    let key_json = serde_json::to_vec(key).unwrap_or_default();
    match (scanned.braces, scanned.members.last()) {
        (None, _) => {
            // Empty or whitespace-only file: a fresh two-space document with a final newline.
            let style = Style::default_for(bytes);
            let mut out = b"{".to_vec();
            out.extend_from_slice(&style.lead);
            out.extend_from_slice(&key_json);
            out.extend_from_slice(&style.colon);
            out.extend_from_slice(&style.render(value));
            let newline = style.pretty.map(|(nl, _)| nl).unwrap_or_default();
            out.extend_from_slice(&newline);
            out.push(b'}');
            out.extend_from_slice(&newline);
            Some(Splice::new(0, bytes.len(), out))
        }
        (Some((open, close)), None) => {
            // `{` ws `}`: the member goes right after `{`; an empty `{}` also gets a newline
            // before `}` so it reads like JSON.stringify(v, null, 2).
            let style = Style::default_for(bytes);
            let mut insert = style.lead.clone();
            insert.extend_from_slice(&key_json);
            insert.extend_from_slice(&style.colon);
            insert.extend_from_slice(&style.render(value));
            if close == open + 1 {
                insert.extend_from_slice(&style.pretty.map(|(nl, _)| nl).unwrap_or_default());
            }
            Some(Splice::new(open + 1, open + 1, insert))
        }
        (Some(_), Some(last)) => {
            // Appended after the last member, copying that member's layout.
            let style = Style::of_member(bytes, last);
            let mut insert = b",".to_vec();
            insert.extend_from_slice(&style.lead);
            insert.extend_from_slice(&key_json);
            insert.extend_from_slice(&style.colon);
            insert.extend_from_slice(&style.render(value));
            Some(Splice::new(last.value_end, last.value_end, insert))
        }
    }
}

/// Removes every top-level occurrence of `key` (so that the key is truly unset); `None` when
/// it is absent. Removing a member appended by [`set`] gives back the original bytes.
/// `scanned` must be a complete [`scan`] (every occurrence counts).
pub(crate) fn remove(
    bytes: &[u8],
    scanned: &Scanned,
    key: &str,
) -> Result<Option<Splice>, DocError> {
    match scanned.members.iter().filter(|m| m.key == key).count() {
        0 => Ok(None),
        1 => Ok(remove_last(bytes, scanned, key)),
        _ => {
            // Duplicates (rare): remove them one by one, then replace the whole document.
            let mut current = bytes.to_vec();
            loop {
                let scanned = scan(&current)?;
                let Some(splice) = remove_last(&current, &scanned, key) else {
                    return Ok(Some(Splice::new(0, bytes.len(), current)));
                };
                current = splice.apply(&current);
            }
        }
    }
}

/// Removes the last occurrence of `key` in the scanned document `doc`.
fn remove_last(doc: &[u8], scanned: &Scanned, key: &str) -> Option<Splice> {
    let index = scanned.members.iter().rposition(|m| m.key == key)?;
    let m = &scanned.members[index];
    let splice = if let Some(next) = scanned.members.get(index + 1) {
        // Not the last: the member, its comma and the whitespace up to the next key go;
        // the next member takes over this one's indentation.
        Splice::new(m.key_start, next.key_start, Vec::new())
    } else if let Some(prev) = index.checked_sub(1).and_then(|p| scanned.members.get(p)) {
        // The last of several: from the end of the previous value, comma included.
        Splice::new(prev.value_end, m.value_end, Vec::new())
    } else {
        // The only member: the whitespace it was given by an insertion into `{}` goes too.
        let (open, close) = scanned.braces?;
        let lead = doc.get(open + 1..m.key_start).unwrap_or_default();
        let trail = doc.get(m.value_end..close).unwrap_or_default();
        let newline_then_indent = |nl: &[u8]| {
            lead.strip_prefix(nl)
                .is_some_and(|rest| rest.iter().all(|&b| b == b' ' || b == b'\t'))
        };
        if (trail == b"\n" && newline_then_indent(b"\n"))
            || (trail == b"\r\n" && newline_then_indent(b"\r\n"))
        {
            Splice::new(open + 1, close, Vec::new())
        } else {
            Splice::new(open + 1, m.value_end, Vec::new())
        }
    };
    Some(splice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// The scan, checked as an update checks it.
    fn scan_valid(bytes: &[u8]) -> Result<Scanned, DocError> {
        match scan(bytes) {
            Ok(scanned) => validate(bytes, Some(&scanned)).map(|()| scanned),
            Err(e) => Err(validate(bytes, None).err().unwrap_or(e)),
        }
    }

    /// What an update writes for `plan`: the checks as the store runs them, then the edit.
    fn checked(
        doc: &[u8],
        plan: Result<(Scanned, Option<Splice>), DocError>,
    ) -> Result<Option<Vec<u8>>, DocError> {
        match plan {
            Ok((scanned, splice)) => {
                validate(doc, Some(&scanned))?;
                Ok(splice.map(|s| s.apply(doc)))
            }
            Err(e) => Err(validate(doc, None).err().unwrap_or(e)),
        }
    }

    fn set_bytes(doc: &[u8], key: &str, value: &Value) -> Result<Option<Vec<u8>>, DocError> {
        checked(doc, plan_set(doc, key, value))
    }

    fn remove_bytes(doc: &[u8], key: &str) -> Result<Option<Vec<u8>>, DocError> {
        checked(doc, plan_remove(doc, key))
    }

    fn set_str(doc: &str, key: &str, value: &Value) -> String {
        String::from_utf8(set_bytes(doc.as_bytes(), key, value).unwrap().unwrap()).unwrap()
    }

    fn remove_str(doc: &str, key: &str) -> Option<String> {
        remove_bytes(doc.as_bytes(), key)
            .unwrap()
            .map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn an_empty_file_becomes_a_two_space_document_with_a_final_newline() {
        assert_eq!(
            set_str("", "k", &json!("hold")),
            "{\n  \"k\": \"hold\"\n}\n"
        );
    }

    #[test]
    fn an_empty_object_gets_the_member_like_json_stringify_would_write_it() {
        assert_eq!(set_str("{}", "k", &json!(1)), "{\n  \"k\": 1\n}");
        assert_eq!(remove_str("{\n  \"k\": 1\n}", "k").unwrap(), "{}");
        assert_eq!(
            set_str("{}\r\n", "k", &json!(1)),
            "{\r\n  \"k\": 1\r\n}\r\n"
        );
        assert_eq!(
            remove_str("{\r\n  \"k\": 1\r\n}\r\n", "k").unwrap(),
            "{}\r\n"
        );
    }

    #[test]
    fn an_object_with_inner_whitespace_keeps_it_across_insert_and_remove() {
        for doc in ["{ }", "{\n\n}", "{\t}"] {
            let with = set_str(doc, "k", &json!(true));
            assert_eq!(remove_str(&with, "k").unwrap(), doc);
        }
    }

    #[test]
    fn insertion_copies_the_layout_of_the_last_member() {
        assert_eq!(
            set_str("{\"a\":1}", "k", &json!("x")),
            "{\"a\":1,\"k\":\"x\"}"
        );
        assert_eq!(
            set_str("{\"a\": 1, \"b\": 2}", "k", &json!("x")),
            "{\"a\": 1, \"b\": 2, \"k\": \"x\"}"
        );
        assert_eq!(
            set_str("{\n\t\"a\": 1\n}\n", "k", &json!("x")),
            "{\n\t\"a\": 1,\n\t\"k\": \"x\"\n}\n"
        );
        assert_eq!(
            set_str("{\r\n    \"a\" : 1\r\n}", "k", &json!({"b": [1]})),
            "{\r\n    \"a\" : 1,\r\n    \"k\" : {\r\n        \"b\": [\r\n            1\r\n        ]\r\n    }\r\n}"
        );
    }

    #[test]
    fn replacing_a_value_changes_only_the_value_bytes() {
        let doc = "{ \"a\" :1e3,\n \"k\"  :  \"accept\" , \"z\":1.0}";
        assert_eq!(
            set_str(doc, "k", &json!("refuse")),
            "{ \"a\" :1e3,\n \"k\"  :  \"refuse\" , \"z\":1.0}"
        );
    }

    #[test]
    fn setting_an_equal_value_even_spelled_differently_changes_nothing() {
        assert_eq!(
            set_bytes(br#"{"k":"ho\u006cd"}"#, "k", &json!("hold")),
            Ok(None)
        );
    }

    #[test]
    fn an_escaped_key_is_the_same_key() {
        assert_eq!(
            set_str(r#"{"\u006b": 1}"#, "k", &json!(2)),
            r#"{"\u006b": 2}"#
        );
    }

    #[test]
    fn duplicate_keys_set_edits_the_last_and_remove_removes_all() {
        let doc = "{\"k\": 1, \"a\": 0, \"k\": 2}";
        assert_eq!(
            set_str(doc, "k", &json!(3)),
            "{\"k\": 1, \"a\": 0, \"k\": 3}"
        );
        assert_eq!(remove_str(doc, "k").unwrap(), "{\"a\": 0}");
    }

    #[test]
    fn removing_a_middle_member_hands_its_indentation_to_the_next() {
        let doc = "{\n  \"a\": 1,\n  \"k\": [1, 2],\n  \"b\": 2\n}";
        assert_eq!(
            remove_str(doc, "k").unwrap(),
            "{\n  \"a\": 1,\n  \"b\": 2\n}"
        );
        assert_eq!(remove_str(doc, "absent"), None);
    }

    #[test]
    fn invalid_documents_are_refused_with_what_they_are() {
        assert!(matches!(
            scan_valid(b"{\"a\":}"),
            Err(DocError::InvalidJson(_))
        ));
        assert!(matches!(
            scan_valid(b"{} {}"),
            Err(DocError::InvalidJson(_))
        ));
        assert_eq!(
            scan_valid(b" [1]").unwrap_err(),
            DocError::NotAnObject("an array")
        );
        assert_eq!(
            scan_valid(b"null").unwrap_err(),
            DocError::NotAnObject("null")
        );
        assert_eq!(
            scan_valid(b"\"s\"").unwrap_err(),
            DocError::NotAnObject("a string")
        );
        assert_eq!(
            scan_valid(b"3").unwrap_err(),
            DocError::NotAnObject("a number")
        );
    }

    #[test]
    fn strings_with_escaped_quotes_backslashes_and_brackets_are_skipped_both_ways() {
        let doc = r#"{"a\\": "x\\", "b\"": "\\\"}", "c": ["]", "\"[", {"}": "\\"}], "k": "\\\\", "z": -1.5e3 }"#;
        let all = scan_valid(doc.as_bytes()).unwrap();
        let keys: Vec<&str> = all.members.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["a\\", "b\"", "c", "k", "z"]);
        for key in ["a\\", "b\"", "c", "k", "z", "absent"] {
            let tail = scan_tail(doc.as_bytes(), key).unwrap();
            let from = all.members.iter().rposition(|m| m.key == key).unwrap_or(0);
            assert_eq!(tail.members, all.members[from..], "{key}");
            assert_eq!(validate(doc.as_bytes(), Some(&tail)), Ok(()), "{key}");
        }
        assert_eq!(
            String::from_utf8(set_bytes(doc.as_bytes(), "k", &json!(1)).unwrap().unwrap()).unwrap(),
            doc.replace(r#""k": "\\\\""#, r#""k": 1"#)
        );
    }

    #[test]
    fn what_the_scans_accept_but_is_not_json_is_refused_by_the_validation() {
        for doc in [
            r#"{"a": [1,,2], "k": 1}"#,
            r#"{"a": tru, "k": 1}"#,
            r#"{"a": {"b" 1}, "k": 1}"#,
            r#"{"a": [}, "k": 1}"#,
            r#"{"a": "\x", "k": 1}"#,
            "{\"a\": \"\u{1}\", \"k\": 1}",
            r#"{"a": 01, "k": 1}"#,
        ] {
            let tail = scan_tail(doc.as_bytes(), "k").unwrap();
            assert_eq!(tail.members.len(), 1, "{doc}");
            assert!(
                matches!(validate(doc.as_bytes(), Some(&tail)), Err(DocError::InvalidJson(m)) if !m.starts_with("unexpected input")),
                "{doc}"
            );
            assert!(
                matches!(
                    set_bytes(doc.as_bytes(), "k", &json!(2)),
                    Err(DocError::InvalidJson(_))
                ),
                "{doc}"
            );
            assert!(
                matches!(
                    remove_bytes(doc.as_bytes(), "k"),
                    Err(DocError::InvalidJson(_))
                ),
                "{doc}"
            );
        }
        // Spans the scan got wrong are caught too: the scan of another document does not pass.
        let other = scan(br#"{"a": 1,  "k": 1}"#).unwrap();
        assert!(validate(br#"{"a": 1, "k": 1}  "#, Some(&other)).is_err());
        let other = scan_tail(br#"{"k": 1, "a": 2}"#, "a").unwrap();
        assert!(validate(br#"{"k": 1, "b": 2}"#, Some(&other)).is_err());
    }

    #[test]
    fn deep_nesting_is_scanned_and_edited_without_overflowing_the_stack() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(scan_valid(deep.as_bytes()).unwrap().members.len(), 1);
        let with = set_bytes(deep.as_bytes(), "k", &json!(1)).unwrap().unwrap();
        assert_eq!(remove_bytes(&with, "k").unwrap().unwrap(), deep.as_bytes());
    }

    /// A JSON value kept as text, so that number spellings and escapes survive.
    #[derive(Debug, Clone)]
    enum Node {
        Scalar(String),
        Array(Vec<Node>),
        Object(Vec<(String, Node)>),
    }

    #[derive(Debug, Clone)]
    struct Layout {
        indent: Option<&'static str>,
        newline: &'static str,
        colon: &'static str,
        trailing_newline: bool,
    }

    fn key_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-zA-Z]{1,12}",
            "[a-z\u{e9}\u{4e2d}\u{1f600} ]{0,6}"
                .prop_map(|s| serde_json::to_string(&s).unwrap()[1..]
                    .trim_end_matches('"')
                    .to_string()),
            Just(r"\u00e9t\u00e9".to_string()),
            Just(r#"with \"quote\" and \\ slash \/"#.to_string()),
            Just(r"\ud83d\ude00 emoji".to_string()),
        ]
    }

    fn scalar() -> impl Strategy<Value = Node> {
        prop_oneof![
            Just("1.0".to_string()),
            Just("1e3".to_string()),
            Just("-2.5E-7".to_string()),
            Just("12345678901234567890123".to_string()),
            Just("-0".to_string()),
            any::<i64>().prop_map(|n| n.to_string()),
            Just("true".to_string()),
            Just("null".to_string()),
            key_text().prop_map(|s| format!("\"{s}\"")),
            Just(r#""line\nbreak\ttab \u0000""#.to_string()),
        ]
        .prop_map(Node::Scalar)
    }

    fn node() -> impl Strategy<Value = Node> {
        scalar().prop_recursive(4, 32, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Node::Array),
                prop::collection::vec((key_text(), inner), 0..5).prop_map(Node::Object),
            ]
        })
    }

    fn layout() -> impl Strategy<Value = Layout> {
        (
            prop_oneof![
                Just(None),
                Just(Some("  ")),
                Just(Some("    ")),
                Just(Some("\t"))
            ],
            prop_oneof![Just("\n"), Just("\r\n")],
            prop_oneof![Just(": "), Just(":"), Just(" : ")],
            any::<bool>(),
        )
            .prop_map(|(indent, newline, colon, trailing_newline)| Layout {
                indent,
                newline,
                colon,
                trailing_newline,
            })
    }

    fn render(node: &Node, layout: &Layout, depth: usize, out: &mut String) {
        let (open, close, items): (&str, &str, Vec<(Option<&String>, &Node)>) = match node {
            Node::Scalar(s) => {
                out.push_str(s);
                return;
            }
            Node::Array(a) => ("[", "]", a.iter().map(|n| (None, n)).collect()),
            Node::Object(o) => ("{", "}", o.iter().map(|(k, n)| (Some(k), n)).collect()),
        };
        out.push_str(open);
        for (i, (key, child)) in items.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            if let Some(unit) = layout.indent {
                out.push_str(layout.newline);
                out.push_str(&unit.repeat(depth + 1));
            }
            if let Some(k) = key {
                out.push('"');
                out.push_str(k);
                out.push('"');
                out.push_str(layout.colon);
            }
            render(child, layout, depth + 1, out);
        }
        if let (Some(unit), false) = (layout.indent, items.is_empty()) {
            out.push_str(layout.newline);
            out.push_str(&unit.repeat(depth));
        }
        out.push_str(close);
    }

    fn document() -> impl Strategy<Value = String> {
        (prop::collection::vec((key_text(), node()), 0..8), layout()).prop_map(
            |(members, layout)| {
                let members = members
                    .into_iter()
                    .filter(|(k, _)| {
                        serde_json::from_str::<String>(&format!("\"{k}\"")).unwrap() != "target"
                    })
                    .collect();
                let mut out = String::new();
                render(&Node::Object(members), &layout, 0, &mut out);
                if layout.trailing_newline {
                    out.push_str(layout.newline);
                }
                out
            },
        )
    }

    fn new_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(json!("accept")),
            Just(json!("hold")),
            Just(json!("refuse")),
            any::<i64>().prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                prop::collection::btree_map("\\PC{0,6}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn set_then_read_gives_the_value_and_remove_gives_back_the_original_bytes(
            doc in document(),
            value in new_value(),
        ) {
            let before: Value = serde_json::from_str(&doc).unwrap();
            let with = set_bytes(doc.as_bytes(), "target", &value).unwrap().expect("the key was absent");
            prop_assert_eq!(get(&with, "target").unwrap().map(|(v, _)| v), Some(value.clone()));
            let mut parsed: Value = serde_json::from_slice(&with).unwrap();
            prop_assert_eq!(parsed.as_object_mut().unwrap().remove("target"), Some(value.clone()));
            prop_assert_eq!(&parsed, &before, "every other member is unchanged");
            prop_assert_eq!(set_bytes(&with, "target", &value).unwrap(), None, "setting the same value again writes nothing");
            let back = remove_bytes(&with, "target").unwrap().expect("the key was present");
            prop_assert_eq!(String::from_utf8(back).unwrap(), doc);
        }
        #[test]
        fn the_backward_scan_finds_the_members_the_forward_scan_finds(
            doc in document(),
            value in new_value(),
        ) {
            let all = scan(doc.as_bytes()).unwrap();
            prop_assert_eq!(&scan_tail(doc.as_bytes(), "target").unwrap(), &all, "absent key: every member");
            if let Some(first) = all.members.first() {
                let tail = scan_tail(doc.as_bytes(), &first.key).unwrap();
                let from = all.members.iter().rposition(|m| m.key == first.key).unwrap();
                prop_assert_eq!(&tail.members[..], &all.members[from..]);
                prop_assert_eq!(tail.complete, from == 0);
                prop_assert_eq!(validate(doc.as_bytes(), Some(&tail)), Ok(()));
            }
            let with = set_bytes(doc.as_bytes(), "target", &value).unwrap().unwrap();
            let tail = scan_tail(&with, "target").unwrap();
            let all = scan(&with).unwrap();
            prop_assert_eq!(tail.members.last(), all.members.last());
        }
    }
}
