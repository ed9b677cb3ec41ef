//! What a receiver did with a message, and how that is known: the vocabulary of receipts.

/// What a receiver did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Given to the receiver's model: its transcript records the message's `msg_id`.
    Read,
    /// Taken into the receiver's queue; its model reads it after its current turn.
    Queued,
    /// Nothing said otherwise within the receipt window: most likely delivered, but
    /// unconfirmed (the receiver's transcript could not be followed).
    Accepted,
    /// Held for the receiving user's approval.
    Held,
    /// Held earlier, then approved and delivered.
    Released,
    /// Held earlier, then declined by the receiving user.
    Denied,
    /// Held earlier, and not approved before it expired.
    Expired,
    /// Refused by the receiver's policy; not delivered.
    Refused,
}

impl Outcome {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Queued => "queued",
            Self::Accepted => "accepted",
            Self::Held => "held",
            Self::Released => "released",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Refused => "refused",
        }
    }

    /// The outcome whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Read,
            Self::Queued,
            Self::Accepted,
            Self::Held,
            Self::Released,
            Self::Denied,
            Self::Expired,
            Self::Refused,
        ]
        .into_iter()
        .find(|outcome| outcome.as_str() == name)
    }
}

/// What a receipt rests on, most certain first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Basis {
    /// The receiver's own transcript, written as it acted.
    Transcript,
    /// The notice the receiver sent back to the sender.
    Notice,
    /// Nothing: no notice came within the receipt window.
    Silence,
}

impl Basis {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Transcript => "transcript",
            Self::Notice => "notice",
            Self::Silence => "silence",
        }
    }

    /// The basis whose wire name is `name`, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Transcript, Self::Notice, Self::Silence]
            .into_iter()
            .find(|basis| basis.as_str() == name)
    }
}

/// What a receiver did with one message, and what that rests on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    /// What it did.
    pub outcome: Outcome,
    /// How that is known.
    pub basis: Basis,
}

#[cfg(test)]
mod tests {
    use super::{Basis, Outcome};

    #[test]
    fn every_outcome_and_basis_is_found_by_its_wire_name_and_no_other_name_is() {
        for name in [
            "read", "queued", "accepted", "held", "released", "denied", "expired", "refused",
        ] {
            assert_eq!(Outcome::from_name(name).map(Outcome::as_str), Some(name));
        }
        for name in ["transcript", "notice", "silence"] {
            assert_eq!(Basis::from_name(name).map(Basis::as_str), Some(name));
        }
        assert_eq!(Outcome::from_name("Read"), None);
        assert_eq!(Basis::from_name(""), None);
    }
}
