//! Read and change Claude Code's `crossSessionInbound` setting (`accept` | `hold` |
//! `refuse`) in `<claude home>/settings.json` without ever losing, reordering or
//! half-writing anything else in that file, and without overwriting an edit made after we read.
//!
//! # Example
//!
//! ```
//! use claude_peer_settings::{InboundPolicy, SettingsStore};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! let path = dir.path().join("settings.json");
//! std::fs::write(&path, "{\n  \"theme\": \"dark\"\n}\n")?;
//!
//! let store = SettingsStore::new(&path);
//! let before = store.read()?;
//! assert_eq!(before.inbound, None); // Claude Code's default, which is not `accept`
//!
//! // A compare-and-swap: fails with a `conflict` if the file changed since `before`.
//! let after = store.set_inbound(InboundPolicy::Hold, Some(&before.revision))?;
//! assert_eq!(after.inbound, Some(InboundPolicy::Hold));
//! assert_eq!(
//!     std::fs::read_to_string(&path)?,
//!     "{\n  \"theme\": \"dark\",\n  \"crossSessionInbound\": \"hold\"\n}\n",
//! );
//!
//! // Resetting gives back the original bytes exactly.
//! store.reset_inbound(Some(&after.revision))?;
//! assert_eq!(std::fs::read_to_string(&path)?, "{\n  \"theme\": \"dark\"\n}\n");
//! # Ok(())
//! # }
//! ```
//!
//! # What an update does
//!
//! [`SettingsStore::set_inbound`], [`SettingsStore::reset_inbound`], and the generic
//! [`SettingsStore::set_key`] / [`SettingsStore::remove_key`] all run the same steps:
//!
//! 1. create the settings directory if missing (mode 0700, missing ancestors too);
//! 2. take an exclusive `flock` on `.<file name>.claude-peers.lock` beside the file, so the
//!    writers of this project never lose each other's updates (the lock file stays in place,
//!    holding the note of step 7);
//! 3. read the file without following links: a symbolic link or anything but a regular file
//!    is refused and left untouched; a missing file is empty bytes, read as `{}`;
//! 4. find the members the edit needs with a fast structural scan (below) and compute the
//!    minimal edit; when it changes nothing (or the scan fails), run the checks of step 7
//!    and stop without writing (a failed scan reports the error those checks give);
//! 5. remove our temporary files older than a minute (left by a crashed writer);
//! 6. create `.<file name>.claude-peers-<16 hex>.tmp` in the same directory, exclusively and
//!    without following links, with the original file's permission bits (0600 for a new file),
//!    write and fsync it;
//! 7. meanwhile, on a helper thread for a document of 64 KiB or more (before step 5 for a
//!    smaller one), check the bytes of step 3: their revision (blake3 of the exact bytes)
//!    against the expected one, if given (a mismatch is a `conflict`), then their full
//!    validation (a fast, conservative check that hands anything unusual — `\u` escapes,
//!    long numbers, deep nesting, any doubt — to `serde_json`), which must also see exactly
//!    the members the scan found;
//!    and hash the new bytes (the revision returned). A failure removes the temporary file:
//!    nothing is written. For a document of 64 KiB or more, the lock file notes the revision
//!    of the last document our writers wrote or validated: bytes that hash to it were
//!    validated before and are not validated again (the note names bytes, not the file, so it
//!    never goes stale; a missing, torn or foreign note costs a full validation). The new
//!    revision is hashed from the kept 64 KiB slices' BLAKE3 chaining values plus the bytes
//!    from the edit on, not from scratch;
//! 8. compare the file once more with the bytes of step 3 (through a buffer, without
//!    following links): writers that take no lock (Claude Code itself) are caught here as a
//!    `conflict`, and the temporary file is removed;
//! 9. rename the temporary file over the settings file, then fsync the directory (a failure
//!    of that last fsync is [`Error::NotDurable`]: the new bytes are in place).
//!
//! The check of step 8 and the rename are two system calls: a writer that takes no lock and
//! writes between them is overwritten. POSIX offers no compare-and-rename, so that window
//! (microseconds) can be narrowed but not closed. Without an expected revision, the revision check of
//! step 7 is skipped but step 8 still applies, and a conflict there is reported, not retried.
//!
//! Ownership is not carried over to the new file (that needs privileges); the file is
//! created by the user running the update, as Claude Code's own rewrite would be.
//!
//! # The minimal edit
//!
//! A byte-level scan (strings with their escapes, bracket nesting) finds the byte span of each
//! top-level member it needs: setting a key scans backwards from the closing brace and stops at
//! the key's last occurrence (the one `JSON.parse` honours), so members before it, however
//! big, are not walked; removing a key scans every member. The scan does not validate: the
//! document is validated in one pass (step 7): it must be UTF-8, valid JSON with an object at
//! the top level (otherwise the update is refused, the file untouched) and have exactly the
//! scanned members at the scanned spans. The new bytes are spliced into
//! the original ones; the document is never re-serialized (the new file is written as three
//! slices: the bytes before the member, the new member bytes, the bytes after it), so key
//! order, indentation, spacing, number spellings, escapes and a final newline (or its absence)
//! stay exactly as they were.
//!
//! - **Replacing** a value changes only the value's bytes. Setting a value equal to the
//!   current one (compared as JSON values, so `"ho\u006cd"` equals `"hold"`) writes nothing.
//! - **Inserting** appends the member after the last one, copying that member's own
//!   layout: the whitespace before its key (newline and indentation, tabs, CRLF, a space, or
//!   nothing in compact files) and the spelling of its colon. Objects and arrays given as
//!   values are indented in the same unit. An object without members gets the member on its
//!   own line with two-space indentation (CRLF if the file uses CRLF), as
//!   `JSON.stringify(v, null, 2)` writes it; an empty or missing file becomes
//!   `{\n  "key": value\n}\n`.
//! - **Removing** takes the member, one adjacent comma and the whitespace that belonged to
//!   it, so removing a member that was inserted gives back the original bytes exactly. The one
//!   exception: the last member of an object written as `{` newline `}` comes back as `{}`.
//! - **Duplicate keys**: `JSON.parse` (and `serde_json`) honour the last occurrence, so reads and
//!   replacements use the last one; removal removes every occurrence, so the key is truly unset.
//! - Keys are compared decoded: `"\u0063rossSessionInbound"` is the same key.
//!
//! # Reading
//!
//! [`SettingsStore::read`] follows a symbolic link (it reports what Claude Code reads); a
//! file that exists but is empty or whitespace-only reads as `{}`, like a missing one. A file
//! over [`MAX_SETTINGS_BYTES`] (16 MiB) is refused unread ([`Error::TooLarge`]), by reads and
//! updates alike.
//!
//! # Effective policy
//!
//! [`effective_policy`] reads managed, user and the session's project settings and applies
//! Claude Code's precedence, reporting every layer and the note that a `--settings` flag on
//! the running process cannot be seen from files.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod edit;
mod effective;
mod error;
mod fs;
mod policy;
mod quick;
mod revision;
mod store;

pub use effective::{
    EffectivePolicy, EffectiveValue, Layer, LayerReport, LayerState, MANAGED_SETTINGS_PATH,
    SETTINGS_FLAG_NOTE, effective_policy, effective_policy_with,
};
pub use error::Error;
pub use fs::{Entry, MAX_SETTINGS_BYTES, RealFs, SettingsFs, Stat};
pub use policy::{INBOUND_KEY, InboundPolicy};
pub use revision::Revision;
pub use store::{STALE_TEMP_AGE, SettingsStore, Snapshot};
