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
//! [`SettingsStore::set_inbound`] and [`SettingsStore::reset_inbound`]:
//!
//! 1. take an exclusive `flock` on `.<file name>.claude-peers.lock` beside the file (created
//!    with the directory, mode 0700, when missing; left in place): our writers serialize;
//! 2. read the file without following links: a symbolic link or anything but a regular file
//!    is refused and left untouched; a missing file is empty bytes, read as `{}`;
//! 3. compare its revision (blake3 of the exact bytes) with the expected one, if given: a
//!    mismatch is a `conflict`;
//! 4. parse it once with `serde_json`, the one authority: UTF-8, valid JSON, an object at the
//!    top level (else refused, untouched). The parse gives the top-level members (decoded keys,
//!    value spans) the minimal edit (below) is computed from; no change, no write;
//! 5. write the new bytes to `.<file name>.claude-peers.tmp` beside the file, created
//!    exclusively (no link followed) with the file's permission bits (0600 for a new file),
//!    and fsync it. Under the lock that name is ours: whatever is there (a killed writer's
//!    left-over, a planted link) is removed first;
//! 6. compare the file once more with the bytes read: writers that take no lock (Claude Code
//!    itself) are caught as a `conflict`;
//! 7. rename the temporary file over the file, then fsync the directory (only that failing is
//!    [`Error::NotDurable`]: the new bytes are in place).
//!
//! A failure before the rename removes the temporary file; the file keeps its old bytes. A
//! writer that takes no lock and writes between steps 6 and 7 is overwritten: POSIX has no
//! compare-and-rename, so that window (microseconds) can be narrowed, not closed. The new
//! file belongs to the user running the update, as Claude Code's own rewrite would.
//!
//! # The minimal edit
//!
//! The new bytes are spliced into the original ones; the document is never re-serialized, so
//! key order, indentation, spacing, number spellings, escapes and a final newline (or its
//! absence) stay exactly as they were.
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
//! over 16 MiB is refused unread ([`Error::TooLarge`]), by reads and updates alike.
//!
//! # Effective policy
//!
//! [`effective_policy`] reads managed, user and the session's project settings and applies
//! Claude Code's precedence, reporting every layer and the note that a `--settings` flag on
//! the running process cannot be seen from files.
//!
//! # Managed settings
//!
//! [`ManagedSettings::read`] is the one reader of the machine's managed settings: the file
//! and the `managed-settings.d/*.json` drop-ins beside it, in name order, a later document
//! winning per top-level key. It answers the managed `crossSessionInbound` (the policy's top
//! layer) and the hook switches that keep a sender's guard hooks from running.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod edit;
mod effective;
mod error;
mod fs;
mod managed;
mod policy;
mod revision;
mod store;
#[cfg(test)]
mod tests;

pub use effective::{
    DocumentReport, EffectivePolicy, EffectiveValue, Layer, LayerReport, LayerState,
    MANAGED_SETTINGS_PATH, effective_policy,
};
pub use error::Error;
pub use managed::{
    Document, HOOK_SWITCHES, Held, HooksOff, MAX_DROP_INS, ManagedInbound, ManagedSettings,
    managed_mcp,
};
pub use policy::InboundPolicy;
pub use revision::{InvalidRevision, Revision};
pub use store::{SettingsStore, Snapshot};
