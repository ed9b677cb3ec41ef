//! What a session was last asked and when it last wrote: read from the end of its
//! transcript, bounded, for views of many sessions (`show`, a dashboard).

use std::path::PathBuf;

use claude_peer_registry::ClaudeHome;
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use serde_json::Value;

use crate::Error;
use crate::find;

/// How much of a transcript's end is read: its lines hold whole requests (tens of KiB),
/// so a prompt further back than this is not looked for.
pub const TAIL_BYTES: u64 = 256 * 1024;
/// How much of a prompt is kept: enough to tell what a session is on.
pub const PROMPT_CHARS: usize = 200;

/// The end of one session's transcript.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The transcript, as [`find`] found it.
    pub path: PathBuf,
    /// The first [`PROMPT_CHARS`] characters of the last prompt its user typed or a peer
    /// session sent (not tool results, not Claude Code's own meta lines), when one is in
    /// the last [`TAIL_BYTES`].
    pub last_prompt: Option<String>,
    /// When the transcript was last written, in milliseconds since the epoch.
    pub last_activity_ms: Option<u64>,
}

/// The [`Summary`] of `session_id`'s transcript; `Ok(None)` when it has none yet. Opened
/// where [`find`] found it, never through a link, and only its last [`TAIL_BYTES`] read.
pub fn summary(home: &ClaudeHome, session_id: &str) -> Result<Option<Summary>, Error> {
    find::check_session_id(session_id)?;
    let Some(found) = find::locate(home, session_id, &mut |_| {})? else {
        return Ok(None);
    };
    let path = found.path.clone();
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(&found.dir, found.name.as_str(), flags, Mode::empty()) {
        Ok(file) => file,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => {
            return Err(Error::NotOurs {
                path,
                why: "a symbolic link".to_owned(),
            });
        }
        Err(err) => return Err(Error::io(path, err)),
    };
    let status = rustix::fs::fstat(&file).map_err(|err| Error::io(&path, err))?;
    find::check_ours(&status, &path)?;
    let size = u64::try_from(status.st_size).unwrap_or(0);
    let start = size.saturating_sub(TAIL_BYTES);
    let mut tail = vec![0; usize::try_from(size - start).unwrap_or(0)];
    let mut read = 0;
    while read < tail.len() {
        let offset = start + read as u64;
        match rustix::io::pread(&file, &mut tail[read..], offset) {
            Ok(0) => break,
            Ok(n) => read += n,
            Err(Errno::INTR) => {}
            Err(err) => return Err(Error::io(&path, err)),
        }
    }
    tail.truncate(read);
    // A tail that starts mid-line skips to the first whole line.
    let whole = if start == 0 {
        &tail[..]
    } else {
        tail.iter()
            .position(|&b| b == b'\n')
            .map_or(&[][..], |at| &tail[at + 1..])
    };
    let last_prompt = whole
        .split(|&b| b == b'\n')
        .rev()
        .find_map(prompt)
        .map(|text| text.chars().take(PROMPT_CHARS).collect());
    let modified = u64::try_from(status.st_mtime)
        .ok()
        .map(|secs| secs * 1000 + status.st_mtime_nsec / 1_000_000);
    Ok(Some(Summary {
        path,
        last_prompt,
        last_activity_ms: modified,
    }))
}

/// The prompt of a transcript line, when it is one: a user line whose content is text (a
/// string, or text blocks) rather than tool results, typed by its user or sent by a peer
/// session (Claude Code marks the latter meta, like its own reminders, which are not).
fn prompt(line: &[u8]) -> Option<String> {
    let entry: Value = serde_json::from_slice(line).ok()?;
    let from_peer = entry.pointer("/origin/kind").and_then(Value::as_str) == Some("peer");
    let meta = entry.get("isMeta") == Some(&Value::Bool(true));
    if entry.get("type")?.as_str()? != "user" || (meta && !from_peer) {
        return None;
    }
    match entry.pointer("/message/content")? {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => {
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            (!texts.is_empty()).then(|| texts.join("\n"))
        }
        _ => None,
    }
}
