//! Functions too long to read at once.

use super::source::{Source, closing_brace, ident_at, item_body, words};

/// The most lines a function may span, from the line of its `fn` to its closing brace.
pub(crate) const MAX_FUNCTION_LINES: usize = 100;

/// Every function in `source` longer than [`MAX_FUNCTION_LINES`] (test items are already
/// blanked out of the source), as `path:line fn name has N lines`. A function inside
/// another counts on its own and as part of the outer one; `fn` types (`fn(u8) -> u8`) and
/// bodiless trait methods are not functions here.
pub(crate) fn long_functions(source: &Source, prefix: &str) -> Vec<String> {
    let code = &source.code;
    let mut long = Vec::new();
    for at in words(code, "fn") {
        let rest = code[at + 2..].trim_start();
        let name = ident_at(rest);
        if name.is_empty() {
            continue;
        }
        let Some((open, b'{')) = item_body(code, at) else {
            continue;
        };
        let close = closing_brace(code, open);
        let first = source.line_of(at);
        let lines = source.line_of(close.saturating_sub(1)) - first + 1;
        if lines > MAX_FUNCTION_LINES {
            long.push(format!(
                "{prefix}{}:{first} fn {name} has {lines} lines, above {MAX_FUNCTION_LINES}",
                source.relative
            ));
        }
    }
    long
}
