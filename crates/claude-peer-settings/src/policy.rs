//! The values of `crossSessionInbound`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// The settings key this crate manages.
pub(crate) const INBOUND_KEY: &str = "crossSessionInbound";

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
        [Self::Accept, Self::Hold, Self::Refuse]
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| Error::UnknownPolicy {
                value: s.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_round_trip_through_their_names_and_order_by_strictness() {
        for p in [
            InboundPolicy::Accept,
            InboundPolicy::Hold,
            InboundPolicy::Refuse,
        ] {
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
}
