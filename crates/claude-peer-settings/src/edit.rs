//! The minimal byte edit of one top-level member of a JSON object.
//!
//! Pure functions over bytes: no file system. The document is first validated by
//! `serde_json` (without building a tree), then a small scanner finds the byte spans of
//! the top-level members; an edit splices new bytes into the original ones and never
//! re-serializes the document.

use std::fmt;

use serde::Deserialize as _;
use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

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
    /// The members in file order, duplicates included.
    pub(crate) members: Vec<Member>,
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

/// Offset just past the string starting with the quote at `i`.
fn skip_string(bytes: &[u8], i: usize) -> Result<usize, DocError> {
    let mut j = i + 1;
    loop {
        let rest = bytes.get(j..).ok_or_else(|| bad(j))?;
        let k = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\')
            .ok_or_else(|| bad(bytes.len()))?;
        j += k;
        if bytes.get(j) == Some(&b'"') {
            return Ok(j + 1);
        }
        j += 2;
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

/// Validates `bytes` as a JSON object (or empty / whitespace-only text, read as `{}`) and
/// finds its top-level members.
pub(crate) fn scan(bytes: &[u8]) -> Result<Scanned, DocError> {
    let start = skip_ws(bytes, 0);
    if start == bytes.len() {
        return Ok(Scanned {
            braces: None,
            members: Vec::new(),
        });
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
    // One serde_json pass validates the document and hands over each member's raw value; the
    // scanner below only walks the few bytes between them.
    let raw = (&mut de)
        .deserialize_map(Members)
        .and_then(|members| de.end().map(|()| members))
        .map_err(|e| DocError::InvalidJson(e.to_string()))?;
    let base = bytes.as_ptr().addr();
    let mut raw = raw.into_iter();
    let mut members = Vec::new();
    let mut i = start + 1;
    loop {
        let lead_start = i;
        i = skip_ws(bytes, i);
        match bytes.get(i) {
            Some(b'}') => {
                return Ok(Scanned {
                    braces: Some((start, i)),
                    members,
                });
            }
            Some(b'"') => {}
            _ => return Err(bad(i)),
        }
        let key_start = i;
        let key_end = skip_string(bytes, i)?;
        let (key, value) = raw.next().ok_or_else(|| bad(i))?;
        i = skip_ws(bytes, key_end);
        if bytes.get(i) != Some(&b':') {
            return Err(bad(i));
        }
        let value_start = skip_ws(bytes, i + 1);
        if value.get().as_ptr().addr().checked_sub(base) != Some(value_start) {
            return Err(bad(value_start));
        }
        let value_end = value_start + value.get().len();
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
                });
            }
            _ => return Err(bad(i)),
        }
    }
}

/// The parsed value of the member JSON.parse honours for `key`, with its raw text.
pub(crate) fn get(bytes: &[u8], key: &str) -> Result<Option<(Value, String)>, DocError> {
    let scanned = scan(bytes)?;
    let Some(m) = scanned.last(key) else {
        return Ok(None);
    };
    let raw = bytes.get(m.value_start..m.value_end).unwrap_or_default();
    let value = serde_json::from_slice(raw).map_err(|e| DocError::InvalidJson(e.to_string()))?;
    Ok(Some((value, String::from_utf8_lossy(raw).into_owned())))
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
/// already holds an equal value (nothing to write).
///
/// With duplicate keys the last occurrence (the one JSON.parse honours) is edited.
pub(crate) fn set(bytes: &[u8], key: &str, value: &Value) -> Result<Option<Splice>, DocError> {
    let scanned = scan(bytes)?;
    if let Some(m) = scanned.last(key) {
        let raw = bytes.get(m.value_start..m.value_end).unwrap_or_default();
        if serde_json::from_slice::<Value>(raw).is_ok_and(|old| &old == value) {
            return Ok(None);
        }
        let rendered = Style::of_member(bytes, m).render(value);
        return Ok(Some(Splice::new(m.value_start, m.value_end, rendered)));
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
            Ok(Some(Splice::new(0, bytes.len(), out)))
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
            Ok(Some(Splice::new(open + 1, open + 1, insert)))
        }
        (Some(_), Some(last)) => {
            // Appended after the last member, copying that member's layout.
            let style = Style::of_member(bytes, last);
            let mut insert = b",".to_vec();
            insert.extend_from_slice(&style.lead);
            insert.extend_from_slice(&key_json);
            insert.extend_from_slice(&style.colon);
            insert.extend_from_slice(&style.render(value));
            Ok(Some(Splice::new(last.value_end, last.value_end, insert)))
        }
    }
}

/// Removes every top-level occurrence of `key` (so that the key is truly unset); `None` when
/// it is absent. Removing a member appended by [`set`] gives back the original bytes.
pub(crate) fn remove(bytes: &[u8], key: &str) -> Result<Option<Splice>, DocError> {
    let scanned = scan(bytes)?;
    match scanned.members.iter().filter(|m| m.key == key).count() {
        0 => Ok(None),
        1 => Ok(remove_last(bytes, &scanned, key)),
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

    fn set_bytes(doc: &[u8], key: &str, value: &Value) -> Result<Option<Vec<u8>>, DocError> {
        Ok(set(doc, key, value)?.map(|s| s.apply(doc)))
    }

    fn remove_bytes(doc: &[u8], key: &str) -> Result<Option<Vec<u8>>, DocError> {
        Ok(remove(doc, key)?.map(|s| s.apply(doc)))
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
        assert_eq!(set(br#"{"k":"ho\u006cd"}"#, "k", &json!("hold")), Ok(None));
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
        assert!(matches!(scan(b"{\"a\":}"), Err(DocError::InvalidJson(_))));
        assert!(matches!(scan(b"{} {}"), Err(DocError::InvalidJson(_))));
        assert_eq!(
            scan(b" [1]").unwrap_err(),
            DocError::NotAnObject("an array")
        );
        assert_eq!(scan(b"null").unwrap_err(), DocError::NotAnObject("null"));
        assert_eq!(
            scan(b"\"s\"").unwrap_err(),
            DocError::NotAnObject("a string")
        );
        assert_eq!(scan(b"3").unwrap_err(), DocError::NotAnObject("a number"));
    }

    #[test]
    fn deep_nesting_is_scanned_and_edited_without_overflowing_the_stack() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(scan(deep.as_bytes()).unwrap().members.len(), 1);
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
            prop_assert_eq!(set(&with, "target", &value).unwrap(), None, "setting the same value again writes nothing");
            let back = remove_bytes(&with, "target").unwrap().expect("the key was present");
            prop_assert_eq!(String::from_utf8(back).unwrap(), doc);
        }
    }
}
