//! The minimal byte edit of one top-level member of a JSON object.
//!
//! Pure functions over bytes: no file system. One `serde_json` parse ([`parse()`]) validates the
//! document and gives its top-level members (decoded keys, raw value spans); an edit is
//! computed from that table and spliced into the original bytes, never re-serializing them.
//!
//! This file holds the types the rest of the crate sees (`Doc`, `Splice`, `DocError`); the
//! parse, the two edits (`change`) and the layout an inserted member copies (`style`) each
//! have a file of their own.

mod change;
mod parse;
mod style;
#[cfg(test)]
mod tests;

pub(crate) use parse::parse;

/// Why a document cannot be edited: the caller turns this into an [`crate::Error`] with the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DocError {
    /// Not JSON at all; the message is `serde_json`'s.
    InvalidJson(String),
    /// Valid JSON whose top level is not an object; the name of what it is.
    NotAnObject(&'static str),
}

impl From<serde_json::Error> for DocError {
    fn from(e: serde_json::Error) -> Self {
        DocError::InvalidJson(e.to_string())
    }
}

/// One top-level member: its decoded key and byte offsets into the document. `lead_start` is
/// where the whitespace before the key starts (just past `{` or `,`); `key_start..key_end` is
/// the key with its quotes, `value_start..value_end` the value.
#[derive(Debug)]
pub(crate) struct Member {
    key: String,
    lead_start: usize,
    key_start: usize,
    key_end: usize,
    value_start: usize,
    value_end: usize,
}

/// A valid document: an object, or empty / whitespace-only text (read as `{}`).
#[derive(Debug)]
pub(crate) struct Doc<'a> {
    bytes: &'a [u8],
    /// Offsets of `{` and `}`; `None` for empty / whitespace-only text.
    braces: Option<(usize, usize)>,
    /// The members in file order, duplicates included.
    members: Vec<Member>,
}

impl Doc<'_> {
    /// The member JSON.parse honours for `key`: the last occurrence.
    fn last(&self, key: &str) -> Option<&Member> {
        self.members.iter().rev().find(|m| m.key == key)
    }

    /// The raw text of the value JSON.parse honours for `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        let m = self.last(key)?;
        let raw = self.bytes.get(m.value_start..m.value_end)?;
        std::str::from_utf8(raw).ok()
    }

    fn span(&self, start: usize, end: usize) -> &[u8] {
        self.bytes.get(start..end).unwrap_or_default()
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

    /// The edited document.
    pub(crate) fn apply(&self, original: &[u8]) -> Vec<u8> {
        let head = original.get(..self.start).unwrap_or_default();
        let tail = original.get(self.end..).unwrap_or_default();
        [head, &self.insert, tail].concat()
    }
}
