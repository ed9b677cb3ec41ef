//! Revisions: the blake3 hash of a settings file's exact bytes.

use std::fmt;
use std::str::FromStr;

/// The blake3 hash (64 lower-case hex digits) of a settings file's exact bytes; a missing
/// file has the revision of empty bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision(String);

impl Revision {
    /// The revision of `bytes`.
    pub(crate) fn of(bytes: &[u8]) -> Revision {
        Revision(blake3::hash(bytes).to_hex().to_string())
    }

    /// The 64 hex digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Text that is not a revision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid revision `{value}`, expected 64 lower-case hex digits")]
pub struct InvalidRevision {
    /// The text given.
    pub value: String,
}

impl FromStr for Revision {
    type Err = InvalidRevision;

    fn from_str(s: &str) -> Result<Self, InvalidRevision> {
        if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Revision(s.to_owned()))
        } else {
            Err(InvalidRevision {
                value: s.to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_is_the_blake3_hex_of_the_bytes_and_parses_back() {
        let r = Revision::of(b"");
        assert_eq!(
            r.as_str(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(r.as_str().parse::<Revision>().unwrap(), r);
        assert_eq!(
            "AF13".parse::<Revision>().unwrap_err(),
            InvalidRevision {
                value: "AF13".to_owned()
            }
        );
    }
}
