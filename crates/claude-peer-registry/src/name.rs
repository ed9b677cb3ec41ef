use std::ffi::OsStr;

use crate::{Pid, Rejection};

/// What a directory entry's name says about it, before anything is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryName {
    /// `<pid>.json` with a canonical decimal pid: a session record.
    Record(Pid),
    /// A `*.json` name that is not a canonical record name: a rejected record.
    Rejected(Rejection),
    /// Anything else (`.key` secrets, `.fleetview-heartbeat`, temporary files):
    /// not a record at all, and never looked at.
    NotARecord,
}

/// Classifies a registry entry's file name.
///
/// Only `<pid>.json` with a canonical decimal pid (ASCII digits, no sign, no leading
/// zero, within [`Pid::MIN`]`..=`[`Pid::MAX`]) is a record, exactly as Claude Code's
/// own reader decides.
///
/// ```
/// use claude_peer_registry::{EntryName, Pid, classify_entry_name};
///
/// assert_eq!(classify_entry_name("9959.json".as_ref()), EntryName::Record(Pid::new(9959).unwrap()));
/// assert_eq!(classify_entry_name("9959.0123abcd.key".as_ref()), EntryName::NotARecord);
/// assert!(matches!(classify_entry_name("007.json".as_ref()), EntryName::Rejected(_)));
/// ```
#[must_use]
pub fn classify_entry_name(name: &OsStr) -> EntryName {
    let bytes = name.as_encoded_bytes();
    let Some(stem) = bytes.strip_suffix(b".json") else {
        return EntryName::NotARecord;
    };
    let shown = || name.to_string_lossy().into_owned();
    if stem.is_empty() || !stem.iter().all(u8::is_ascii_digit) {
        return EntryName::Rejected(Rejection::NameNotDecimal { name: shown() });
    }
    if stem.len() > 1 && stem[0] == b'0' {
        return EntryName::Rejected(Rejection::NameLeadingZero { name: shown() });
    }
    // At most 10 digits can fit; longer stems are out of range without arithmetic.
    let value = if stem.len() <= 10 {
        stem.iter()
            .try_fold(0_u64, |acc, digit| Some(acc * 10 + u64::from(digit - b'0')))
    } else {
        None
    };
    match value.and_then(|v| u32::try_from(v).ok()).and_then(Pid::new) {
        Some(pid) => EntryName::Record(pid),
        None => EntryName::Rejected(Rejection::NamePidOutOfRange { name: shown() }),
    }
}
