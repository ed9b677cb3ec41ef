//! A fast, conservative validity check of a settings document, so that the usual document
//! skips the full `serde_json` validation.
//!
//! [`members`] answers "certainly valid, with these top-level members" or "not sure"; only the
//! first answer may skip `serde_json`, which stays the authority (and gives the error messages)
//! for everything else. So the check follows RFC 8259 exactly as `serde_json` does, and
//! declines whatever it would rather not reason about: `\u` escapes (`serde_json` checks their
//! surrogates), backslashes in top-level keys (their decoded text differs from the raw one),
//! deep nesting and long numbers (`serde_json` has limits there).
//!
//! Speed comes from doing little per byte: no recursion (the open containers are a bitset),
//! strings scanned a word at a time, indentation skipped a word at a time, the separator
//! between elements recognised by one comparison with the previous one, and no separate UTF-8
//! pass for an ASCII document.

use std::ops::Range;

/// One top-level member as the quick check saw it: byte ranges into the document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QuickMember {
    /// The key's bytes between its quotes (no backslash in them, so they are the decoded key).
    pub(crate) key: Range<usize>,
    /// The value's bytes, without surrounding whitespace: the span of `serde_json`'s `RawValue`.
    pub(crate) value: Range<usize>,
}

/// The deepest nesting accepted, the top-level object included: far below `serde_json`'s
/// recursion limit (128), and the open containers fit a `u128`.
const MAX_DEPTH: u32 = 100;
/// Numbers with more digits (exponent included) are declined. With the exponent's limit, every
/// accepted number is below 10^199, so it also parses as an `f64` where `serde_json` reads a value
/// (where `1e400` is an error); no setting needs a longer one.
const MAX_DIGITS: usize = 100;
/// Exponents with more digits are declined (see [`MAX_DIGITS`]).
const MAX_EXPONENT_DIGITS: usize = 2;

/// `0x01` in every byte of a word.
const LANES_LOW: u64 = 0x0101_0101_0101_0101;
/// `0x80` in every byte of a word.
const LANES_HIGH: u64 = 0x8080_8080_8080_8080;
/// A space in every byte of a word.
const SPACES: u64 = LANES_LOW * b' ' as u64;

/// `Some(members)` only when `bytes` is certainly a JSON text that `serde_json` accepts, whose
/// top level is an object, and whose top-level members are exactly these, in order, duplicates
/// included, none of their keys containing a backslash. `None` means "not sure": ask `serde_json`.
pub(crate) fn members(bytes: &[u8]) -> Option<Vec<QuickMember>> {
    // Whether a string holds a byte above 0x7F; everything outside strings is checked to be
    // ASCII, so without one the document is ASCII, hence UTF-8, and needs no UTF-8 check.
    let mut wide = false;
    let mut i = skip_ws(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_ws(bytes, i + 1);
    let mut members = Vec::new();
    if bytes.get(i) == Some(&b'}') {
        i += 1;
    } else {
        loop {
            if bytes.get(i) != Some(&b'"') {
                return None;
            }
            let key_start = i + 1;
            let key_end = string_end(bytes, key_start, false, &mut wide)?;
            i = skip_ws(bytes, key_end);
            if bytes.get(i) != Some(&b':') {
                return None;
            }
            let value_start = skip_ws(bytes, i + 1);
            let value_end = value_end(bytes, value_start, &mut wide)?;
            members.push(QuickMember {
                key: key_start..key_end - 1,
                value: value_start..value_end,
            });
            i = skip_ws(bytes, value_end);
            match bytes.get(i) {
                Some(b',') => i = skip_ws(bytes, i + 1),
                Some(b'}') => {
                    i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    if skip_ws(bytes, i) != bytes.len() || (wide && std::str::from_utf8(bytes).is_err()) {
        return None;
    }
    Some(members)
}

/// Offset just past the value starting at `i` (whitespace already skipped), a member's value
/// in the top-level object; `None` if it is not certainly valid.
fn value_end(bytes: &[u8], mut i: usize, wide: &mut bool) -> Option<usize> {
    // Bit 0 tells whether the innermost open container is an object, bit 1 the next one out...
    let mut objects: u128 = 0;
    // Open containers inside the value (the top-level object is one more).
    let mut depth: u32 = 0;
    let mut sep = Separator::NONE;
    loop {
        // A value starts at `i`.
        let b = *bytes.get(i)?;
        if b == b'"' {
            // Most values are strings: tested before the `match` and its jump table.
            i = string_end(bytes, i + 1, true, wide)?;
            if depth > 0 && objects & 1 == 0 {
                i = string_run(bytes, i, sep, wide)?;
            }
        } else {
            match b {
                open @ (b'{' | b'[') => {
                    depth += 1;
                    if depth >= MAX_DEPTH {
                        return None;
                    }
                    let object = open == b'{';
                    objects = objects << 1 | u128::from(object);
                    i = skip_ws(bytes, i + 1);
                    let close = if object { b'}' } else { b']' };
                    if bytes.get(i) == Some(&close) {
                        i += 1;
                        depth -= 1;
                        objects >>= 1;
                    } else {
                        if object {
                            i = member_head(bytes, i, wide)?;
                        }
                        continue;
                    }
                }
                b't' => i = literal_end(bytes, i, b"true")?,
                b'f' => i = literal_end(bytes, i, b"false")?,
                b'n' => i = literal_end(bytes, i, b"null")?,
                b'-' | b'0'..=b'9' => i = number_end(bytes, i)?,
                _ => return None,
            }
        }
        // A value ended at `i`: close containers until one goes on with a next element.
        loop {
            if depth == 0 {
                return Some(i);
            }
            let object = objects & 1 == 1;
            // The separator of the previous elements, again: one comparison instead of a walk.
            if word_at(bytes, i).is_some_and(|w| w & sep.mask == sep.bytes) {
                i = skip_ws(bytes, i + sep.len);
                if object {
                    i = member_head(bytes, i, wide)?;
                }
                break;
            }
            let end = skip_ws(bytes, i);
            match bytes.get(end) {
                Some(b',') => {
                    let next = skip_ws(bytes, end + 1);
                    sep = Separator::learn(bytes, i, next);
                    i = next;
                    if object {
                        i = member_head(bytes, i, wide)?;
                    }
                    break;
                }
                Some(b']') if !object => {}
                Some(b'}') if object => {}
                _ => return None,
            }
            i = end + 1;
            depth -= 1;
            objects >>= 1;
        }
    }
}

/// The bytes between two elements of a container (a comma and whitespace), when at most eight:
/// pretty-printed containers repeat the same one.
#[derive(Clone, Copy)]
struct Separator {
    /// The separator's bytes as a little-endian word, zero beyond `len`.
    bytes: u64,
    /// Keeps the first `len` bytes of a word.
    mask: u64,
    /// How many bytes (1 to 8; 0 in [`Separator::NONE`]).
    len: usize,
}

impl Separator {
    /// Matches no word.
    const NONE: Separator = Separator {
        bytes: 1,
        mask: 0,
        len: 0,
    };

    /// The separator `start..end`, which was checked to be a comma and whitespace.
    fn learn(bytes: &[u8], start: usize, end: usize) -> Separator {
        let len = end - start;
        match word_at(bytes, start) {
            Some(w) if (1..=8).contains(&len) => {
                let mask = u64::MAX >> (64 - 8 * len);
                Separator {
                    bytes: w & mask,
                    mask,
                    len,
                }
            }
            _ => Separator::NONE,
        }
    }
}

/// Offset just past the strings that follow the one ending at `i` in an array, each after
/// the separator `sep`: the common long list of strings, in a loop tight enough to keep its
/// state in registers. Stops (without looking further) at anything else.
#[inline(never)]
fn string_run(bytes: &[u8], mut i: usize, sep: Separator, wide: &mut bool) -> Option<usize> {
    loop {
        let Some(w) = word_at(bytes, i) else {
            return Some(i);
        };
        let next = i + sep.len;
        if w & sep.mask != sep.bytes || bytes.get(next) != Some(&b'"') {
            return Some(i);
        }
        i = string_end(bytes, next + 1, true, wide)?;
    }
}

/// Offset of the value of the nested member whose key starts at `i`: past the key, the colon
/// and the whitespace around it.
fn member_head(bytes: &[u8], i: usize, wide: &mut bool) -> Option<usize> {
    if bytes.get(i) != Some(&b'"') {
        return None;
    }
    let i = skip_ws(bytes, string_end(bytes, i + 1, true, wide)?);
    if bytes.get(i) != Some(&b':') {
        return None;
    }
    Some(skip_ws(bytes, i + 1))
}

/// Offset just past the literal `word` if it is at `i`.
fn literal_end(bytes: &[u8], i: usize, word: &[u8]) -> Option<usize> {
    let end = i + word.len();
    (bytes.get(i..end)? == word).then_some(end)
}

/// Offset just past the number starting at `i`, `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`,
/// if within the digit limits. A digit right after a leading `0` is left for the caller, which
/// refuses it as it refuses anything but a delimiter after a value.
fn number_end(bytes: &[u8], mut i: usize) -> Option<usize> {
    if bytes.get(i) == Some(&b'-') {
        i += 1;
    }
    let mut digits = match bytes.get(i)? {
        b'0' => {
            i += 1;
            1
        }
        b'1'..=b'9' => {
            let end = digits_end(bytes, i);
            let n = end - i;
            i = end;
            n
        }
        _ => return None,
    };
    if bytes.get(i) == Some(&b'.') {
        let end = digits_end(bytes, i + 1);
        let n = end - (i + 1);
        if n == 0 {
            return None;
        }
        digits += n;
        i = end;
    }
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let end = digits_end(bytes, i);
        if end == i || end - i > MAX_EXPONENT_DIGITS {
            return None;
        }
        digits += end - i;
        i = end;
    }
    (digits <= MAX_DIGITS).then_some(i)
}

/// Offset of the first non-digit at or after `i`.
fn digits_end(bytes: &[u8], i: usize) -> usize {
    let rest = bytes.get(i..).unwrap_or_default();
    i + rest
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len())
}

/// Offset just past the closing quote of the string whose contents start at `i`. Raw control
/// bytes and unknown escapes are invalid JSON; `\u` escapes, and any backslash when `escapes`
/// is false, are declined. Sets `wide` if the contents may hold a byte above 0x7F.
#[inline]
fn string_end(bytes: &[u8], mut i: usize, escapes: bool, wide: &mut bool) -> Option<usize> {
    loop {
        i = find_special(bytes, i, wide)?;
        match bytes.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' if escapes => match bytes.get(i + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// The 8 bytes at `i` as a little-endian word, if there are 8.
#[inline]
fn word_at(bytes: &[u8], i: usize) -> Option<u64> {
    let chunk: [u8; 8] = bytes.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(chunk))
}

/// The high bit of the byte lanes of `w` that hold `"`, `\\`, a control byte (below 0x20) or a
/// byte above 0x7F: every such lane is flagged, and so may be lanes above one (a subtraction's
/// borrow), but never a lane below the first one, so the lowest flagged lane is exact.
///
/// `"` ^ 0x02 is 0x20 and the control bytes ^ 0x02 stay below it (while 0x20 ^ 0x02 does not):
/// one comparison finds both. The usual `& !w` is left out: it costs two instructions per word,
/// and the lanes above 0x7F it would clear (always flagged by one term or the other, whatever
/// borrow they receive: a test checks every case) are rare enough to tell apart afterwards.
#[inline]
fn flagged_lanes(w: u64) -> u64 {
    const FLIP: u64 = LANES_LOW * 0x02;
    const BELOW: u64 = LANES_LOW * 0x21;
    const BACKSLASHES: u64 = LANES_LOW * b'\\' as u64;
    ((w ^ FLIP).wrapping_sub(BELOW) | (w ^ BACKSLASHES).wrapping_sub(LANES_LOW)) & LANES_HIGH
}

/// The first offset at or after `i` whose byte ends a plain run of string contents (see
/// [`flagged_lanes`]), a word at a time; `None` at the end of the document. Sets `wide` if a
/// byte above 0x7F may come before it.
#[inline]
fn find_special(bytes: &[u8], mut i: usize, wide: &mut bool) -> Option<usize> {
    // Four words per bounds check, each tested on its own: most strings end in the first few.
    while let Some(block) = bytes.get(i..i + 32) {
        let (w0, rest) = block.split_first_chunk::<8>()?;
        let (w1, rest) = rest.split_first_chunk::<8>()?;
        let (w2, w3) = rest.split_first_chunk::<8>()?;
        let w3: &[u8; 8] = w3.try_into().ok()?;
        for (k, w) in [w0, w1, w2, w3].into_iter().enumerate() {
            let w = u64::from_le_bytes(*w);
            let mut hits = flagged_lanes(w);
            if hits != 0 {
                if w & LANES_HIGH != 0 {
                    // Lanes above 0x7F are plain contents.
                    *wide = true;
                    hits &= !w;
                }
                if hits != 0 {
                    return Some(i + 8 * k + (hits.trailing_zeros() / 8) as usize);
                }
            }
        }
        i += 32;
    }
    let rest = bytes.get(i..)?;
    *wide |= !rest.is_ascii();
    let k = rest
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)?;
    Some(i + k)
}

/// Offset of the first non-whitespace byte at or after `i` (JSON whitespace: space, tab, line
/// feed, carriage return). The indentation after a line feed is skipped eight bytes at a time.
#[inline]
fn skip_ws(bytes: &[u8], mut i: usize) -> usize {
    // Tests in the order of likelihood: a byte after whitespace is usually a token.
    while let Some(&b) = bytes.get(i) {
        if b > b' ' {
            break;
        }
        if b == b'\n' {
            i = skip_spaces(bytes, i + 1);
        } else if b == b' ' || b == b'\t' || b == b'\r' {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// Offset of the first byte at or after `i` that is not a space, or of the last few bytes of
/// the document (which [`skip_ws`] finishes one by one).
#[inline]
fn skip_spaces(bytes: &[u8], mut i: usize) -> usize {
    while let Some(w) = word_at(bytes, i) {
        let other = w ^ SPACES;
        if other != 0 {
            return i + (other.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

#[cfg(test)]
mod tests {
    use std::ops::Range;

    use proptest::prelude::*;
    use serde_json::{Map, Value};

    use super::{find_special, flagged_lanes, members};

    /// What `serde_json` sees, as `edit::validate` runs it: the decoded keys and the spans of
    /// the raw values; `None` if it rejects the text or its top level is no object.
    fn serde_members(bytes: &[u8]) -> Option<Vec<(String, Range<usize>)>> {
        let members = crate::edit::parse_members(bytes).ok()??;
        let base = bytes.as_ptr().addr();
        Some(
            members
                .into_iter()
                .map(|(key, raw)| {
                    let start = raw.get().as_ptr().addr() - base;
                    (key, start..start + raw.get().len())
                })
                .collect(),
        )
    }

    /// The quick check of `bytes`, checked against `serde_json` when it answers: the same
    /// members, keys and value spans. Whether it answered.
    fn checked(bytes: &[u8]) -> bool {
        let Some(quick) = members(bytes) else {
            return false;
        };
        let Some(serde) = serde_members(bytes) else {
            panic!(
                "quick accepted what serde_json rejects: {:?}",
                String::from_utf8_lossy(bytes)
            );
        };
        let seen: Vec<(String, Range<usize>)> = quick
            .iter()
            .map(|m| {
                let key = std::str::from_utf8(&bytes[m.key.clone()]).unwrap();
                (key.to_owned(), m.value.clone())
            })
            .collect();
        assert_eq!(seen, serde, "{:?}", String::from_utf8_lossy(bytes));
        true
    }

    #[test]
    fn ordinary_documents_are_certainly_valid_with_serde_jsons_members() {
        let deep_ok = format!("{{\"a\":{}{}}}", "[".repeat(99), "]".repeat(99));
        let long_strings: String = (0..80)
            .map(|n| format!("\"{}\"", "x".repeat(n)))
            .collect::<Vec<_>>()
            .join(",\n    ");
        let docs = [
            "{}",
            " \t\r\n{ \t\r\n} \t\r\n",
            r#"{"a":1}"#,
            "{\n  \"theme\": \"dark\",\n  \"n\": 3\n}\n",
            "{\r\n\t\"a\": [\r\n\t\t1,\r\n\t\t2\r\n\t],\r\n\t\"b\": {}\r\n}\r\n",
            r#"{"a":{"b":{"c":[1,[2,[3,{}]],[]]}},"d":[]}"#,
            r#"{"n":[1.0,1e3,-0.5,12345678901234567890,0,-0,1E+2,1e-2,0.25e10,-1.5E-07]}"#,
            r#"{"s":"line\nbreak \"quoted\" back\\slash\ttab \/ \b \f \r"}"#,
            r#"{"nested":{"esc\"aped\\key\n":true}}"#,
            r#"{"a":true,"b":false,"c":null,"d":[true,false,null]}"#,
            r#"{"k":1,"k":2,"k":{"k":3}}"#,
            "{\"caf\u{e9}\":\"\u{4e2d}\u{6587} \u{1f600}\",\"\u{1f600}\":[\"\u{e9}\"]}",
            r#"{"a" : 1 , "b" :[ 1 , 2 ] }"#,
            &deep_ok,
            &format!("{{\n  \"allow\": [\n    {long_strings}\n  ]\n}}"),
            &format!("{{\"allow\":[{}]}}", long_strings.replace("\n    ", "")),
            // Indentation that changes between elements, deeper and shallower.
            "{\"a\": [\n  1,\n  [\n    2,\n    3\n  ],\n  4,\n      5\n]}",
            "{\"a\": [\n      \"x\",\n  \"y\",\n          \"z\"\n]}",
            // Strings after non-strings in a list, and separators longer than a word.
            "{\"a\": [1,                 \"x\",                 \"y\", 2, \"z\"]}",
            &settings_like(20_000),
        ];
        for doc in docs {
            assert!(checked(doc.as_bytes()), "{doc:?}");
        }
        let doc = r#"{"a":1, "b" : [2], "a":{"c":"d"}}"#;
        let found = members(doc.as_bytes()).unwrap();
        let spans: Vec<(&str, &str)> = found
            .iter()
            .map(|m| (&doc[m.key.clone()], &doc[m.value.clone()]))
            .collect();
        assert_eq!(spans, [("a", "1"), ("b", "[2]"), ("a", r#"{"c":"d"}"#)]);
    }

    /// A pretty-printed settings file of about `size` bytes, as in `benches/update.rs`.
    fn settings_like(size: usize) -> String {
        use std::fmt::Write as _;
        let mut doc = String::from(
            "{\n  \"$schema\": \"https://json.schemastore.org/claude-code-settings.json\",\n  \"theme\": \"dark\",\n  \"permissions\": {\n    \"allow\": [\n",
        );
        let tail = "      \"Read(//work/**)\"\n    ]\n  },\n  \"cleanupPeriodDays\": 30\n}\n";
        let mut i = 0;
        while doc.len() + 34 + tail.len() <= size {
            writeln!(doc, "      \"Bash(tool-{i:06} --flag:*)\",").unwrap();
            i += 1;
        }
        doc.push_str(tail);
        doc
    }

    #[test]
    fn invalid_documents_are_never_certainly_valid() {
        let invalid: &[&[u8]] = &[
            b"",
            b"   \n\t ",
            b"{",
            b"}",
            b"{{}}",
            b"{}}",
            b"{} {}",
            b"{}x",
            b"{}\x00",
            br#"{"a":tru}"#,
            br#"{"a":nul}"#,
            br#"{"a":truex}"#,
            br#"{"a":True}"#,
            br#"{"a":01}"#,
            br#"{"a":-01}"#,
            br#"{"a":1.}"#,
            br#"{"a":.5}"#,
            br#"{"a":-}"#,
            br#"{"a":+1}"#,
            br#"{"a":--1}"#,
            br#"{"a":1e}"#,
            br#"{"a":1e+}"#,
            br#"{"a":1.e5}"#,
            br#"{"a":0x10}"#,
            br#"{"a":NaN}"#,
            br#"{"a":Infinity}"#,
            br#"{"a":[1,]}"#,
            br#"{"a":[,1]}"#,
            br#"{"a":[1 2]}"#,
            br#"{"a":[1]]}"#,
            br#"{"a":1,}"#,
            br#"{,"a":1}"#,
            br#"{"a" 1}"#,
            br#"{"a":}"#,
            br#"{"a"}"#,
            br#"{"a":1 "b":2}"#,
            br#"{"a":1,"b"}"#,
            br#"{"a":[}"#,
            br#"{"a":[}]}"#,
            br#"{"a":{]}"#,
            br#"{"a":{"b"}}"#,
            br#"{"a":{"b":}}"#,
            br#"{"a":{,}}"#,
            br#"{"a":{"b":1,}}"#,
            br#"{"a":{1:2}}"#,
            br"{a:1}",
            br"{'a':1}",
            br#"{"a":'b'}"#,
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"tab\there\"}",
            b"{\"a\":\"line\nbreak\"}",
            b"{\"a\x1f\":1}",
            br#"{"a":"\x"}"#,
            br#"{"a":"\a"}"#,
            br#"{"a":"\'"}"#,
            br#"{"a":"\"}"#,
            br#"{"a":"b}"#,
            br#"{"a":"b"#,
            br#"{"a":[1"#,
            br#"{"a":1"#,
            br#"{"a":{"b":1}"#,
            b"{\x0c\"a\":1}",
            b"{\x0b\"a\":1}",
            b"{\xc2\xa0\"a\":1}",
            b"\xef\xbb\xbf{}",
            b"{\"a\":1}\x1a",
            br#"{"a":1}{"b":2}"#,
            br#""a":1}"#,
        ];
        for doc in invalid {
            assert!(
                serde_members(doc).is_none(),
                "{:?}",
                String::from_utf8_lossy(doc)
            );
            assert!(members(doc).is_none(), "{:?}", String::from_utf8_lossy(doc));
        }
    }

    #[test]
    fn what_the_check_declines_by_rule() {
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(100), "]".repeat(100));
        let many_digits = format!(r#"{{"a":{}}}"#, "1".repeat(101));
        let many_with_exponent = format!(r#"{{"a":{}e10}}"#, "1".repeat(99));
        let declined: &[(&[u8], bool)] = &[
            // (document, whether serde_json accepts it)
            (b"{\"a\":\"\xff\"}", false),
            (b"{\"a\":\"\xc0\xaf\"}", false),
            (b"{\"a\":\"\xed\xa0\x80\"}", false),
            (b"{\"a\":\"\xe4\xb8\"}", false),
            (b"{\"\xe4\xb8\":1}", false),
            (b"{\"a\":1}\xe4", false),
            (br#"{"a":"\u0041"}"#, true),
            (br#"{"\u0041":1}"#, true),
            (br#"{"a":{"\u0041":1}}"#, true),
            (br#"{"a":"\ud800"}"#, true),
            (br#"{"\ud800":1}"#, false),
            (br#"{"a":"\u12"}"#, false),
            (br#"{"a\\b":1}"#, true),
            (br#"{"a\"b":1}"#, true),
            (br#"{"a\nb":1}"#, true),
            (deep.as_bytes(), true),
            (many_digits.as_bytes(), true),
            (many_with_exponent.as_bytes(), true),
            (br#"{"a":1e400}"#, true),
            (br#"{"a":1e100}"#, true),
            (br#"{"a":1.5e-300}"#, true),
            (br#"{"a":1e001}"#, true),
            (b"[]", false),
            (br#"[{"a":1}]"#, false),
            (br#""a""#, false),
            (b"1", false),
            (b"null", false),
            (b"true", false),
        ];
        for (doc, accepted) in declined {
            assert_eq!(
                serde_members(doc).is_some(),
                *accepted,
                "{:?}",
                String::from_utf8_lossy(doc)
            );
            assert!(members(doc).is_none(), "{:?}", String::from_utf8_lossy(doc));
        }
        // The limits themselves are accepted.
        let deep_ok = format!("{{\"a\":{}{}}}", "[".repeat(99), "]".repeat(99));
        let digits_ok = format!(r#"{{"a":-{}.{}e-12}}"#, "1".repeat(50), "2".repeat(48));
        for doc in [deep_ok.as_str(), &digits_ok, r#"{"a":1e99}"#] {
            assert!(checked(doc.as_bytes()), "{doc}");
        }
    }

    #[test]
    fn every_byte_above_0x7f_is_flagged_whatever_borrow_it_receives() {
        for v in 0x80..=0xFF_u8 {
            for borrow_quote in 0..=1 {
                for borrow_backslash in 0..=1 {
                    let quote = (v ^ 0x02).wrapping_sub(0x21).wrapping_sub(borrow_quote);
                    let backslash = (v ^ b'\\').wrapping_sub(1).wrapping_sub(borrow_backslash);
                    assert_ne!((quote | backslash) & 0x80, 0, "{v:#x}");
                }
            }
        }
        // And in whole words: each byte in each lane, after plain, special and wide bytes.
        for v in 0..=0xFF_u8 {
            for lane in 0..8 {
                for below in [b'a', b'"', b'\\', 0x00, 0x1F, b'#', b']', 0xFF, 0x80] {
                    let mut word = [b'a'; 8];
                    word[..lane].fill(below);
                    word[lane] = v;
                    let hits = flagged_lanes(u64::from_le_bytes(word));
                    let special = |b: u8| b == b'"' || b == b'\\' || !(0x20..0x80).contains(&b);
                    let first = word.iter().position(|&b| special(b));
                    let found = (hits != 0).then(|| (hits.trailing_zeros() / 8) as usize);
                    assert_eq!(found, first, "{word:x?}");
                }
            }
        }
    }

    #[test]
    fn strings_are_scanned_alike_in_words_and_in_the_tail() {
        let plain = b"abcdefghijklmnopqrstuvwxyz0123456789 !#$%&'()*+,-./:;<=>?@[]^_`{|}~";
        for len in 0..plain.len() {
            for special in [b'"', b'\\', 0x00, 0x1F] {
                let ascii = [&plain[..len], &[special], b"#] more ASCII after it"].concat();
                let mut wide = false;
                assert_eq!(find_special(&ascii, 0, &mut wide), Some(len), "{len}");
                assert!(!wide, "{len}");
                let with_wide = [&plain[..len], "\u{e9}".as_bytes(), &[special]].concat();
                assert_eq!(
                    find_special(&with_wide, 0, &mut wide),
                    Some(len + 2),
                    "{len}"
                );
                assert!(wide, "{len}");
            }
        }
        let mut wide = false;
        assert_eq!(find_special(plain, 0, &mut wide), None);
        assert!(!wide);
    }

    /// A JSON document made from a top-level member list, with its number spellings spliced
    /// in, and whether every rule for a certain answer holds for it.
    #[derive(Debug, Clone)]
    struct Doc {
        text: String,
        within_rules: bool,
    }

    /// Where a number goes: serialized as a string holding this marker, replaced afterwards.
    fn marker(k: usize) -> String {
        format!("\u{7f}{k}\u{7f}")
    }

    /// Characters `serde_json` writes without a `\u` escape (with `hostile`, any but the
    /// marker's).
    fn text_char(hostile: bool) -> impl Strategy<Value = char> {
        let any_char = any::<char>().prop_filter("no marker, no \\u escape", move |&c| {
            c != '\u{7f}' && (hostile || c >= ' ' || "\n\t\r\u{8}\u{c}".contains(c))
        });
        prop_oneof![
            4 => proptest::char::range('a', 'z'),
            2 => proptest::sample::select(vec![' ', '"', '\\', '/', '\n', '\t', '\r', '\u{8}', '\u{c}']),
            1 => proptest::sample::select(vec!['\u{e9}', '\u{4e2d}', '\u{1f600}', '\u{80}', '\u{7ff}', '\u{ffff}']),
            1 => any_char,
        ]
    }

    /// Text for keys and strings; now and then with characters `serde_json` escapes as `\u`.
    fn text() -> impl Strategy<Value = String> {
        let chars = |hostile| {
            prop::collection::vec(text_char(hostile), 0..40).prop_map(|v| v.into_iter().collect())
        };
        prop_oneof![30 => chars(false), 1 => chars(true)]
    }

    fn number_spelling() -> impl Strategy<Value = String> {
        prop_oneof![
            40 => "-?(0|[1-9][0-9]{0,25})(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?",
            1 => "-?[1-9][0-9]{0,3}[eE][+-]?[0-9]{3}",
            1 => "-?[1-9][0-9]{95,105}",
            1 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| f.to_string()),
            1 => any::<i64>().prop_map(|n| n.to_string()),
        ]
    }

    /// A value with numbers as markers `0..n`, and the spellings of those numbers.
    fn value(depth: u32, size: u32) -> impl Strategy<Value = (Value, Vec<String>)> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            text().prop_map(Value::String),
            Just(Value::String(marker(usize::MAX))),
        ];
        leaf.prop_recursive(depth, size, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((text(), inner), 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
            ]
        })
        .prop_flat_map(|v| {
            let n = count_markers(&v);
            (Just(v), prop::collection::vec(number_spelling(), n))
        })
        .prop_map(|(mut v, spellings)| {
            let mut next = 0;
            number_markers(&mut v, &mut next);
            (v, spellings)
        })
    }

    fn count_markers(v: &Value) -> usize {
        match v {
            Value::String(s) => usize::from(*s == marker(usize::MAX)),
            Value::Array(a) => a.iter().map(count_markers).sum(),
            Value::Object(o) => o.values().map(count_markers).sum(),
            _ => 0,
        }
    }

    fn number_markers(v: &mut Value, next: &mut usize) {
        match v {
            Value::String(s) if *s == marker(usize::MAX) => {
                *s = marker(*next);
                *next += 1;
            }
            Value::Array(a) => a.iter_mut().for_each(|v| number_markers(v, next)),
            Value::Object(o) => o.values_mut().for_each(|v| number_markers(v, next)),
            _ => {}
        }
    }

    /// Whether the quick check must accept a number so spelled.
    fn within_limits(spelling: &str) -> bool {
        let (mantissa, exponent) = spelling
            .split_once(['e', 'E'])
            .map_or((spelling, ""), |(m, e)| (m, e));
        let digits = |s: &str| s.bytes().filter(u8::is_ascii_digit).count();
        digits(exponent) <= 2 && digits(mantissa) + digits(exponent) <= 100
    }

    #[derive(Debug, Clone)]
    struct Layout {
        indent: Option<&'static str>,
        newline: &'static str,
        colon: &'static str,
        trailing: &'static str,
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
            prop_oneof![Just(":"), Just(": "), Just(" : ")],
            prop_oneof![Just(""), Just("\n"), Just(" \r\n\t ")],
        )
            .prop_map(|(indent, newline, colon, trailing)| Layout {
                indent,
                newline,
                colon,
                trailing,
            })
    }

    /// The document of `members` (duplicates allowed) as `serde_json` writes it, compact or
    /// pretty with the layout's indentation and line ends.
    fn render(members: &[(String, (Value, Vec<String>))], layout: &Layout) -> Doc {
        let mut within_rules = true;
        let mut text = String::from("{");
        for (n, (key, (value, spellings))) in members.iter().enumerate() {
            if n > 0 {
                text.push(',');
            }
            let key = serde_json::to_string(key).unwrap();
            within_rules &= !key.contains('\\');
            let mut value_text = match layout.indent {
                None => serde_json::to_string(value).unwrap(),
                Some(unit) => {
                    let mut out = Vec::new();
                    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
                    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
                    serde::Serialize::serialize(value, &mut ser).unwrap();
                    // Raw line feeds only come between tokens.
                    String::from_utf8(out)
                        .unwrap()
                        .replace('\n', &format!("{}{unit}", layout.newline))
                }
            };
            for (k, spelling) in spellings.iter().enumerate() {
                within_rules &= within_limits(spelling);
                value_text = value_text.replacen(&format!("\"{}\"", marker(k)), spelling, 1);
            }
            if let Some(unit) = layout.indent {
                text.push_str(layout.newline);
                text.push_str(unit);
            }
            text.push_str(&key);
            text.push_str(layout.colon);
            text.push_str(&value_text);
        }
        if layout.indent.is_some() && !members.is_empty() {
            text.push_str(layout.newline);
        }
        text.push('}');
        text.push_str(layout.trailing);
        within_rules &= !text.contains("\\u");
        Doc { text, within_rules }
    }

    /// A document of up to `members` top-level members (one may be repeated), with values as
    /// [`value`] makes them.
    fn document(members: usize, depth: u32, size: u32) -> impl Strategy<Value = Doc> {
        let key = prop_oneof![
            10 => "[a-zA-Z$]{1,12}",
            1 => text(),
        ];
        (
            prop::collection::vec((key, value(depth, size)), 0..=members),
            layout(),
            any::<bool>(),
        )
            .prop_map(|(mut members, layout, duplicate)| {
                if duplicate && !members.is_empty() {
                    members.push(members[0].clone());
                }
                render(&members, &layout)
            })
    }

    /// Bytes that make and break JSON structure, and a few that are not ASCII.
    const ALPHABET: &[u8] = b"{}[]\",:\\ 0123456789eE.+-tfnrulas \n\t\r\x01\x7f\xc3\xa9\xff";

    #[derive(Debug, Clone)]
    enum Mutation {
        Delete(usize),
        Insert(usize, u8),
        Replace(usize, u8),
        Duplicate(usize, usize, usize),
    }

    fn mutation() -> impl Strategy<Value = Mutation> {
        let byte = proptest::sample::select(ALPHABET);
        prop_oneof![
            any::<usize>().prop_map(Mutation::Delete),
            (any::<usize>(), byte.clone()).prop_map(|(at, b)| Mutation::Insert(at, b)),
            (any::<usize>(), byte).prop_map(|(at, b)| Mutation::Replace(at, b)),
            (any::<usize>(), 1..12_usize, any::<usize>())
                .prop_map(|(from, len, to)| Mutation::Duplicate(from, len, to)),
        ]
    }

    fn mutate(bytes: &mut Vec<u8>, mutation: &Mutation) {
        let at = |n: usize, len: usize| n % (len + 1);
        match *mutation {
            Mutation::Delete(n) if !bytes.is_empty() => {
                bytes.remove(n % bytes.len());
            }
            Mutation::Insert(n, b) => bytes.insert(at(n, bytes.len()), b),
            Mutation::Replace(n, b) if !bytes.is_empty() => {
                let len = bytes.len();
                bytes[n % len] = b;
            }
            Mutation::Duplicate(from, len, to) => {
                let from = at(from, bytes.len());
                let piece = bytes[from..(from + len).min(bytes.len())].to_vec();
                let to = at(to, bytes.len());
                bytes.splice(to..to, piece);
            }
            _ => {}
        }
    }

    /// `cases` cases with a light random generator: the default one dominates a debug run.
    fn config(cases: u32) -> ProptestConfig {
        ProptestConfig {
            rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
            ..ProptestConfig::with_cases(cases)
        }
    }

    proptest! {
        #![proptest_config(config(2048))]

        #[test]
        fn generated_documents_within_the_rules_are_certainly_valid(doc in document(6, 5, 48)) {
            let answered = checked(doc.text.as_bytes());
            prop_assert!(answered || !doc.within_rules, "declined: {:?}", doc.text);
        }
    }

    proptest! {
        #![proptest_config(config(8192))]

        #[test]
        fn mutated_documents_are_never_wrongly_certain(
            doc in document(4, 4, 24),
            mutations in prop::collection::vec(mutation(), 1..5),
        ) {
            let mut bytes = doc.text.into_bytes();
            for m in &mutations {
                mutate(&mut bytes, m);
            }
            checked(&bytes);
        }

        #[test]
        fn arbitrary_bytes_are_never_wrongly_certain(
            bytes in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..64),
                prop::collection::vec(proptest::sample::select(ALPHABET), 0..64),
                prop::collection::vec(proptest::sample::select(ALPHABET), 0..16)
                    .prop_map(|v| [b"{\"a\":".as_slice(), &v, b"}"].concat()),
            ],
        ) {
            checked(&bytes);
        }
    }
}
