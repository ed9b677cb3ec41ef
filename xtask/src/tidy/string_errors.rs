//! `Result<_, String>`: an error a caller can only print, never match.

use super::source::{Source, words};

/// Every `Result<T, String>` written in `source` (test items are already blanked out),
/// as `path:line Result<T, String>`: any `Result` spelled with two type arguments whose
/// second is `String` or a path ending in `::String`.
pub(crate) fn string_errors(source: &Source, prefix: &str) -> Vec<String> {
    let code = &source.code;
    let mut found = Vec::new();
    for at in words(code, "Result") {
        let Some(arguments) = generic_arguments(&code[at + "Result".len()..]) else {
            continue;
        };
        let [_, error] = arguments.as_slice() else {
            continue;
        };
        let error: String = error.chars().filter(|c| !c.is_whitespace()).collect();
        if error == "String" || error.ends_with("::String") {
            let written: String = arguments
                .iter()
                .map(|a| a.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect::<Vec<_>>()
                .join(", ");
            found.push(format!(
                "{prefix}{}:{} Result<{written}>",
                source.relative,
                source.line_of(at)
            ));
        }
    }
    found
}

/// The top-level arguments of the `<…>` that `rest` opens (after whitespace), or `None`
/// when it opens none.
fn generic_arguments(rest: &str) -> Option<Vec<&str>> {
    let start = rest.len() - rest.trim_start().len();
    let rest = &rest[start..];
    if !rest.starts_with('<') {
        return None;
    }
    let bytes = rest.as_bytes();
    let (mut depth, mut from, mut arguments) = (0usize, 1, Vec::new());
    for (at, &b) in bytes.iter().enumerate() {
        match b {
            b'<' | b'(' | b'[' => depth += 1,
            // `->` in a function type is not a closing bracket.
            b'>' if at > 0 && bytes[at - 1] == b'-' => {}
            b'>' | b')' | b']' => {
                depth -= 1;
                if depth == 0 {
                    arguments.push(&rest[from..at]);
                    return Some(arguments);
                }
            }
            b',' if depth == 1 => {
                arguments.push(&rest[from..at]);
                from = at + 1;
            }
            b';' | b'{' => return None,
            _ => {}
        }
    }
    None
}
