//! The values of `crossSessionInbound` and file revisions.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The settings key this crate manages.
pub const INBOUND_KEY: &str = "crossSessionInbound";

/// A value of `crossSessionInbound`, ordered from least to most strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InboundPolicy {
    /// Deliver messages from other sessions automatically.
    Accept,
    /// Queue them for the user's approval.
    Hold,
    /// Drop them.
    Refuse,
}

impl InboundPolicy {
    /// All values, least strict first.
    pub const ALL: [InboundPolicy; 3] = [
        InboundPolicy::Accept,
        InboundPolicy::Hold,
        InboundPolicy::Refuse,
    ];

    /// The value as written in settings files.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            InboundPolicy::Accept => "accept",
            InboundPolicy::Hold => "hold",
            InboundPolicy::Refuse => "refuse",
        }
    }
}

impl fmt::Display for InboundPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for InboundPolicy {
    type Err = Error;

    /// Exactly `accept`, `hold` or `refuse` (case-sensitive, as Claude Code reads them).
    fn from_str(s: &str) -> Result<Self, Error> {
        InboundPolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| Error::UnknownPolicy {
                value: s.to_owned(),
            })
    }
}

/// The blake3 hash (64 lower-case hex digits) of a settings file's exact bytes; a missing
/// file has the revision of empty bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Revision(String);

impl Revision {
    /// The revision of `bytes`.
    #[must_use]
    pub fn of(bytes: &[u8]) -> Revision {
        Revision(blake3::hash(bytes).to_hex().to_string())
    }

    /// The revision of the concatenation of `parts`.
    #[must_use]
    pub(crate) fn of_parts(parts: &[&[u8]]) -> Revision {
        let mut hasher = blake3::Hasher::new();
        for part in parts {
            hasher.update(part);
        }
        Revision(hasher.finalize().to_hex().to_string())
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

impl FromStr for Revision {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Revision(s.to_owned()))
        } else {
            Err(Error::InvalidRevision {
                value: s.to_owned(),
            })
        }
    }
}

impl TryFrom<String> for Revision {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<Revision> for String {
    fn from(r: Revision) -> String {
        r.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_their_names_and_order_by_strictness() {
        for p in InboundPolicy::ALL {
            assert_eq!(p.as_str().parse::<InboundPolicy>().unwrap(), p);
        }
        assert!(InboundPolicy::Accept < InboundPolicy::Hold);
        assert!(InboundPolicy::Hold < InboundPolicy::Refuse);
        let err = "Hold".parse::<InboundPolicy>().unwrap_err();
        assert_eq!(err.as_str(), "unknown_policy");
        assert_eq!(
            err.to_string(),
            "unknown inbound policy `Hold`, expected accept, hold or refuse"
        );
    }

    #[test]
    fn a_revision_is_the_blake3_hex_of_the_bytes_and_parses_back() {
        let r = Revision::of(b"");
        assert_eq!(
            r.as_str(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(r.as_str().parse::<Revision>().unwrap(), r);
        assert_eq!(
            "AF13".parse::<Revision>().unwrap_err().as_str(),
            "invalid_revision"
        );
    }
}
