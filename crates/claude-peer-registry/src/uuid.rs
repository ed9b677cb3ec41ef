//! The shape of Claude Code's session ids and message ids.

/// Whether `text` is UUID-shaped (8-4-4-4-12 hex digits, either case), as Claude Code's
/// session ids and `msg_id`s are. A shape only: a session's name may look like one too.
#[must_use]
pub fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(group, len)| group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::is_uuid;

    #[test]
    fn only_five_hex_groups_of_8_4_4_4_12_are_uuid_shaped() {
        assert!(is_uuid("8668bde0-50ff-4b1e-a7dc-8a4dcbefad57"));
        assert!(is_uuid("8668BDE0-50FF-4B1E-A7DC-8A4DCBEFAD57"));
        for text in [
            "reviewer",
            "8668bde0-50ff-4b1e-a7dc",
            "8668bde0-50ff-4b1e-a7dc-8a4dcbefad5z",
            "",
            "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57-1",
        ] {
            assert!(!is_uuid(text), "{text}");
        }
    }
}
