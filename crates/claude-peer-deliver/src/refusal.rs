//! Why the gate refused a send, in the stable words clients match on.

use std::fmt;

/// Which refusal. Clients match on [`RefusalKind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The target is not one live session that can be messaged: the resolver's refusal
    /// (`not_live`, `identity_mismatch`, `not_addressable`).
    Unresolved(claude_peer_resolve::RefusalKind),
    /// The receiving session's inbound policy (as far as files show) refuses messages,
    /// or cannot be told; nothing was relayed.
    InboundRefused,
    /// The relay did not confirm the send: it failed, timed out or crashed.
    DeliveryFailed,
}

impl RefusalKind {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unresolved(kind) => kind.as_str(),
            Self::InboundRefused => "inbound_refused",
            Self::DeliveryFailed => "delivery_failed",
        }
    }

    /// The refusal whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        claude_peer_resolve::RefusalKind::from_name(name)
            .map(Self::Unresolved)
            .or_else(|| {
                [Self::InboundRefused, Self::DeliveryFailed]
                    .into_iter()
                    .find(|kind| kind.as_str() == name)
            })
    }
}

impl From<claude_peer_resolve::RefusalKind> for RefusalKind {
    fn from(kind: claude_peer_resolve::RefusalKind) -> Self {
        Self::Unresolved(kind)
    }
}

/// A refused send, with a message a person can act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which refusal.
    pub kind: RefusalKind,
    /// What was found, naming pids, names and paths.
    pub message: String,
    /// Whether it stands until a person changes something: the receiver's policy is
    /// `refuse`, so trying again cannot help. Every other refusal may pass later (a
    /// session that starts, a name that becomes unique, a settings file that becomes
    /// readable).
    pub standing: bool,
    /// Whether the message may have gone all the same: the relay failed after it could
    /// have sent (it timed out, crashed or ended mid-send). Sending it again could
    /// deliver it twice.
    pub uncertain: bool,
}

impl From<claude_peer_resolve::Refusal> for Refusal {
    fn from(refusal: claude_peer_resolve::Refusal) -> Self {
        Self {
            kind: refusal.kind.into(),
            message: refusal.message,
            standing: false,
            uncertain: false,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

#[cfg(test)]
mod tests {
    use super::RefusalKind;

    #[test]
    fn every_kind_is_found_by_its_wire_name_and_no_other_name_is() {
        use claude_peer_resolve::RefusalKind as Unresolved;
        let kinds = [
            RefusalKind::Unresolved(Unresolved::NotLive),
            RefusalKind::Unresolved(Unresolved::IdentityMismatch),
            RefusalKind::Unresolved(Unresolved::NotAddressable),
            RefusalKind::InboundRefused,
            RefusalKind::DeliveryFailed,
        ];
        for kind in kinds {
            assert_eq!(RefusalKind::from_name(kind.as_str()), Some(kind));
        }
        assert_eq!(RefusalKind::from_name("Not_Live"), None);
        assert_eq!(RefusalKind::from_name(""), None);
    }
}
