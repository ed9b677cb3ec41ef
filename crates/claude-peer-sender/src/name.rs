//! The sender's name, as receivers see it.

use crate::Error;

/// The longest sender name: 64 bytes.
pub const MAX_SENDER_NAME_BYTES: usize = 64;

/// Checks a sender name: 1 to 64 ASCII letters, digits, `-`, `_` or `.`, not starting
/// with `-`. The name reaches the receiver inside its message envelope
/// (`from-name="…"`) and on its screen, so a quote, a bracket or a control character
/// could make a message look like another sender's.
pub fn check_sender_name(name: &str) -> Result<(), Error> {
    let why = if name.is_empty() {
        "it is empty"
    } else if name.len() > MAX_SENDER_NAME_BYTES {
        "it is longer than 64 bytes"
    } else if name.starts_with('-') {
        "it starts with `-`"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        "it may hold only ASCII letters, digits, `-`, `_` and `.`"
    } else {
        return Ok(());
    };
    Err(Error::SenderName {
        name: name.escape_debug().to_string(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_forge_an_envelope_are_refused_by_name() {
        for good in ["claude-peers", "build-bot", "a", "ci_1.2", &"x".repeat(64)] {
            assert!(check_sender_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "-x",
            "a b",
            "a\"b",
            "x\" from=\"uds:/other.sock",
            "<b>",
            "bell\u{7}",
            "é",
            &"x".repeat(65),
        ] {
            let err = check_sender_name(bad).unwrap_err().to_string();
            assert!(err.contains("sender name"), "{err}");
            assert!(
                !err.contains('\u{7}'),
                "control characters are escaped: {err}"
            );
        }
    }
}
