use std::fmt;

/// A process id that a registry record may name: `2..=2147483647`.
///
/// Claude Code never registers pid 0 or 1, and anything above `i32::MAX` would turn
/// into a negative number (a process group) at the `kill` boundary. Holding a `Pid`
/// is the proof that none of that can happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pid(u32);

impl Pid {
    /// The smallest pid a record may name.
    pub const MIN: u32 = 2;
    /// The largest pid a record may name (`i32::MAX`).
    pub const MAX: u32 = 2_147_483_647;

    /// Accepts `raw` when it lies in `2..=2147483647`.
    #[must_use]
    pub const fn new(raw: u32) -> Option<Self> {
        if raw >= Self::MIN && raw <= Self::MAX {
            Some(Self(raw))
        } else {
            None
        }
    }

    /// The pid as an unsigned number.
    #[must_use]
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The pid as the positive `i32` the kernel interfaces take; never 0, 1 or negative.
    #[must_use]
    pub const fn as_i32(self) -> i32 {
        // In range by construction: 2..=i32::MAX.
        self.0.cast_signed()
    }
}

impl fmt::Display for Pid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl serde::Serialize for Pid {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u32(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Pid {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = u32::deserialize(deserializer)?;
        Self::new(raw).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "pid {raw} is outside {}..={}",
                Self::MIN,
                Self::MAX
            ))
        })
    }
}
