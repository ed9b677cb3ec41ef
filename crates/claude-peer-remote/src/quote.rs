//! Arguments for the remote shell: ssh joins its command words with spaces and hands the
//! line to the login shell on the other side, so each word is quoted whole.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

/// `words` as one POSIX shell line in which each word is exactly one argument, taken
/// literally: each wrapped in single quotes, a single quote inside written `'\''`. No
/// character is special inside single quotes (not `$`, backticks, `\`, newlines), so
/// nothing in a name, message or path can run anything there.
#[must_use]
pub fn shell_line<S: AsRef<OsStr>>(words: &[S]) -> Vec<u8> {
    let mut line = Vec::new();
    for (i, word) in words.iter().enumerate() {
        if i > 0 {
            line.push(b' ');
        }
        line.push(b'\'');
        for &byte in word.as_ref().as_bytes() {
            if byte == b'\'' {
                line.extend_from_slice(b"'\\''");
            } else {
                line.push(byte);
            }
        }
        line.push(b'\'');
    }
    line
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use proptest::prelude::*;

    use super::shell_line;

    /// What `sh` makes of the line: its words, one a line, as given.
    fn words_in_sh(line: &[u8]) -> Vec<String> {
        use std::os::unix::ffi::OsStrExt;
        let script = [
            b"for w in ".as_slice(),
            line,
            b"; do printf '%s\\0' \"$w\"; done",
        ]
        .concat();
        let out = Command::new("sh")
            .arg("-c")
            .arg(std::ffi::OsStr::from_bytes(&script))
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn hostile_words_reach_the_shell_as_they_are() {
        let words = [
            "; touch /tmp/x",
            "$(touch /tmp/x)",
            "`touch /tmp/x`",
            "it's \"quoted\"",
            "two\nlines",
            "back\\slash",
            "",
            "*",
        ];
        assert_eq!(words_in_sh(&shell_line(&words)), words);
    }

    proptest! {
        #[test]
        fn any_words_come_back_unchanged(words in prop::collection::vec("[^\u{0}]{0,12}", 1..5)) {
            prop_assert_eq!(words_in_sh(&shell_line(&words)), words);
        }
    }
}
