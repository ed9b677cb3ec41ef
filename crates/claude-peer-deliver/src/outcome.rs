//! What a receiver did with a message: the vocabulary of receipts.

/// What a receiver did with a message, as its notice says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Delivered: no notice came within the receipt window.
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
            Self::Accepted => "accepted",
            Self::Held => "held",
            Self::Released => "released",
            Self::Denied => "denied",
            Self::Expired => "expired",
            Self::Refused => "refused",
        }
    }
}
