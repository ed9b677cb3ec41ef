//! A Rust source file as the tidy rules read it: its code with comments and literals
//! blanked out and its test items removed, so a scan of the text sees only what compiles
//! into the library.
//!
//! Blanking keeps every newline, so a byte offset in [`Source::code`] has the same line
//! as in the file.

use std::path::{Path, PathBuf};

/// One source file under a crate's `src/`.
#[derive(Debug)]
pub(crate) struct Source {
    /// The path inside `src/`, `/`-separated: `scan/entry.rs`.
    pub(crate) relative: String,
    /// The code, comments, string and char literals and test items replaced by spaces.
    pub(crate) code: String,
}

impl Source {
    /// Reads `path`, which lies under `src`.
    pub(crate) fn read(src: &Path, path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| format!("cannot read `{}`: {err}", path.display()))?;
        let relative = path
            .strip_prefix(src)
            .unwrap_or(path)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        Ok(Self::new(relative, &text))
    }

    /// The source of `text`, found at `relative`.
    pub(crate) fn new(relative: String, text: &str) -> Self {
        let code = without_tests(&blank_literals(text));
        Self { relative, code }
    }

    /// The 1-based line of byte `offset`.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.code[..offset].matches('\n').count() + 1
    }
}

/// Every `.rs` file under `src`, but for tests: a file named `tests.rs` or anything
/// under a folder named `tests`. Sorted by path.
pub(crate) fn rust_files(src: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let is_test = path
                .file_name()
                .is_some_and(|n| n == "tests" || n == "tests.rs");
            if is_test {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Whether `c` can be part of an identifier.
pub(crate) fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The identifier `code` starts with; empty when it starts with anything else.
pub(crate) fn ident_at(code: &str) -> &str {
    let len = code.bytes().take_while(|&b| is_ident(b)).count();
    &code[..len]
}

/// The offsets where the word `word` starts as a whole token in `code`.
pub(crate) fn words<'a>(code: &'a str, word: &'a str) -> impl Iterator<Item = usize> + 'a {
    let bytes = code.as_bytes();
    code.match_indices(word)
        .map(|(at, _)| at)
        .filter(move |&at| {
            let before = at.checked_sub(1).map(|i| bytes[i]);
            let after = bytes.get(at + word.len()).copied();
            !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
        })
}

/// The offset just past the brace that closes the one at `open`, or the end of `code`.
pub(crate) fn closing_brace(code: &str, open: usize) -> usize {
    let mut depth = 0usize;
    for (at, b) in code.bytes().enumerate().skip(open) {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return at + 1;
                }
            }
            _ => {}
        }
    }
    code.len()
}

/// From `from`, the first `{` or `;` outside parentheses and brackets: where an item's
/// head ends and its body (or its end) begins.
pub(crate) fn item_body(code: &str, from: usize) -> Option<(usize, u8)> {
    let mut depth = 0usize;
    for (at, b) in code.bytes().enumerate().skip(from) {
        match b {
            b'(' | b'[' => depth += 1,
            b')' | b']' => depth = depth.saturating_sub(1),
            b'{' | b';' if depth == 0 => return Some((at, b)),
            _ => {}
        }
    }
    None
}

/// `text` with every comment, string literal and char literal replaced by spaces
/// (newlines kept). Lifetimes and labels stay.
fn blank_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, part: &[char]| {
        for &c in part {
            if c == '\n' {
                out.push('\n');
            } else {
                out.extend(std::iter::repeat_n(' ', c.len_utf8()));
            }
        }
    };
    while i < chars.len() {
        let end = literal_end(&chars, i);
        if end > i {
            blank(&mut out, &chars[i..end]);
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Where the comment or literal starting at `i` ends, or `i` when none starts there.
fn literal_end(chars: &[char], i: usize) -> usize {
    let at = |k: usize| chars.get(k).copied();
    let ident_before = i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_');
    match chars[i] {
        '/' if at(i + 1) == Some('/') => (i..chars.len())
            .find(|&k| chars[k] == '\n')
            .unwrap_or(chars.len()),
        '/' if at(i + 1) == Some('*') => block_comment_end(chars, i),
        '"' => quoted_end(chars, i + 1, '"'),
        'r' if !ident_before
            || (i >= 1 && chars[i - 1] == 'b' && !ident_before_at(chars, i - 1)) =>
        {
            raw_string_end(chars, i).unwrap_or(i)
        }
        '\'' if at(i + 1) == Some('\\') => quoted_end(chars, i + 1, '\''),
        '\'' if at(i + 2) == Some('\'') => i + 3,
        _ => i,
    }
}

fn ident_before_at(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

fn block_comment_end(chars: &[char], start: usize) -> usize {
    let mut depth = 0usize;
    let mut k = start;
    while k + 1 < chars.len() {
        match (chars[k], chars[k + 1]) {
            ('/', '*') => {
                depth += 1;
                k += 2;
            }
            ('*', '/') => {
                depth -= 1;
                k += 2;
                if depth == 0 {
                    return k;
                }
            }
            _ => k += 1,
        }
    }
    chars.len()
}

/// The end of a literal whose body starts at `from` and closes with `close`, honouring
/// backslash escapes.
fn quoted_end(chars: &[char], from: usize, close: char) -> usize {
    let mut k = from;
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            c if c == close => return k + 1,
            _ => k += 1,
        }
    }
    chars.len()
}

/// `r"…"`, `r#"…"#` and so on starting at the `r` at `i`; `None` for a raw identifier
/// (`r#type`) or a plain `r`.
fn raw_string_end(chars: &[char], i: usize) -> Option<usize> {
    let hashes = chars[i + 1..].iter().take_while(|&&c| c == '#').count();
    if chars.get(i + 1 + hashes) != Some(&'"') {
        return None;
    }
    let body = i + 2 + hashes;
    (body..chars.len())
        .find(|&k| {
            chars[k] == '"'
                && chars[k + 1..]
                    .iter()
                    .take(hashes)
                    .filter(|&&c| c == '#')
                    .count()
                    == hashes
        })
        .map(|k| k + 1 + hashes)
        .or(Some(chars.len()))
}

/// `code` with every test item blanked: an item under `#[test]`, `#[cfg(test)]` or
/// `#[cfg(all(test, …))]`, from its attribute to the end of its body (or its `;`).
fn without_tests(code: &str) -> String {
    let mut out = code.to_owned();
    let mut from = 0;
    while let Some(start) = next_test_attribute(&out, from) {
        let end = match item_body(&out, start) {
            Some((open, b'{')) => closing_brace(&out, open),
            Some((semi, _)) => semi + 1,
            None => out.len(),
        };
        let blanked: String = out[start..end]
            .chars()
            .map(|c| if c == '\n' { '\n' } else { ' ' })
            .collect();
        out.replace_range(start..end, &blanked);
        from = start + blanked.len();
    }
    out
}

/// The offset of the next attribute at or after `from` that marks a test item.
fn next_test_attribute(code: &str, from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(found) = code[at..].find("#[") {
        let start = at + found;
        let inner_end = code[start..].find(']').map_or(code.len(), |e| start + e);
        let inner: String = code[start + 2..inner_end]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        if inner == "test" || inner == "cfg(test)" || inner.starts_with("cfg(all(test,") {
            return Some(start);
        }
        at = start + 2;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_literals_and_test_items_are_blanked_and_lines_kept() {
        let text = "fn a() -> &'static str { \"crate::x // not a comment\" }\n\
                    // use crate::y;\n/* nested /* crate::z */ still */ let c = '\"';\n\
                    let r = r#\"crate::raw\"#; let life: &'a u8;\n\
                    #[cfg(test)]\nmod tests {\n    use crate::t;\n}\nfn after() {}\n";
        let source = Source::new("x.rs".to_owned(), text);
        assert_eq!(source.code.lines().count(), text.lines().count());
        assert!(!source.code.contains("crate::"), "{}", source.code);
        assert!(source.code.contains("&'static str"), "{}", source.code);
        assert!(source.code.contains("&'a u8"), "{}", source.code);
        assert!(source.code.contains("fn after() {}"), "{}", source.code);
        assert!(!source.code.contains("mod tests"), "{}", source.code);
        assert_eq!(source.line_of(source.code.find("after").unwrap()), 9);
    }
}
