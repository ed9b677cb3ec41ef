//! Reading and updating one settings file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use claude_peer_probe::Links;
use serde_json::Value;

use crate::edit::{self, Doc, DocError, Splice};
use crate::fs::{Fs, RealFs};
use crate::policy::{INBOUND_KEY, InboundPolicy};
use crate::{Error, Revision};

/// Mode of a settings file this crate creates.
const NEW_FILE_MODE: u32 = 0o600;

/// What a settings file held when it was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The settings file.
    pub path: PathBuf,
    /// Whether the file exists (a missing file reads as `{}`).
    pub exists: bool,
    /// The revision of the exact bytes; pass it to an update to make it a compare-and-swap.
    pub revision: Revision,
    /// The user's value; `None` means Claude Code's default, which is not `accept`.
    pub inbound: Option<InboundPolicy>,
}

/// A settings file, normally `<claude home>/settings.json`.
#[derive(Debug, Clone)]
pub struct SettingsStore {
    path: PathBuf,
}

impl SettingsStore {
    /// The store for the settings file at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SettingsStore { path: path.into() }
    }

    /// Reads the file (following a symbolic link, as Claude Code does) and validates it.
    pub fn read(&self) -> Result<Snapshot, Error> {
        let bytes = read_bytes(&self.path)?;
        let text = bytes.as_deref().unwrap_or_default();
        Ok(Snapshot {
            path: self.path.clone(),
            exists: bytes.is_some(),
            revision: Revision::of(text),
            inbound: inbound_of(&self.path, text)?,
        })
    }

    /// Sets `crossSessionInbound` to `policy`. With `expected`, the update is a
    /// compare-and-swap against that revision. Setting the value the file already has writes
    /// nothing. Returns what the file holds afterwards.
    pub fn set_inbound(
        &self,
        policy: InboundPolicy,
        expected: Option<&Revision>,
    ) -> Result<Snapshot, Error> {
        self.update_inbound(Some(policy), expected)
    }

    /// Removes `crossSessionInbound` (back to Claude Code's default), every occurrence of it.
    pub fn reset_inbound(&self, expected: Option<&Revision>) -> Result<Snapshot, Error> {
        self.update_inbound(None, expected)
    }

    /// Changes `crossSessionInbound` to `after` (`None`: removed).
    fn update_inbound(
        &self,
        after: Option<InboundPolicy>,
        expected: Option<&Revision>,
    ) -> Result<Snapshot, Error> {
        let (exists, revision) = update(&RealFs, &self.path, expected, |doc| match after {
            Some(policy) => doc.set(INBOUND_KEY, &Value::from(policy.as_str())),
            None => doc.remove(INBOUND_KEY),
        })?;
        Ok(Snapshot {
            path: self.path.clone(),
            exists,
            revision,
            inbound: after,
        })
    }
}

fn doc_error(path: &Path, e: DocError) -> Error {
    let path = path.to_owned();
    match e {
        DocError::InvalidJson(message) => Error::InvalidJson { path, message },
        DocError::NotAnObject(found) => Error::NotAnObject { path, found },
    }
}

/// The user's `crossSessionInbound` in `bytes`, validated.
pub(crate) fn inbound_of(path: &Path, bytes: &[u8]) -> Result<Option<InboundPolicy>, Error> {
    inbound_in(path, &parse_doc(path, bytes)?)
}

/// The document in `bytes`, read from `path`: an object, or empty text (read as `{}`).
pub(crate) fn parse_doc<'a>(path: &Path, bytes: &'a [u8]) -> Result<Doc<'a>, Error> {
    edit::parse(bytes).map_err(|e| doc_error(path, e))
}

/// The `crossSessionInbound` of `doc`, read from `path`, validated.
pub(crate) fn inbound_in(path: &Path, doc: &Doc<'_>) -> Result<Option<InboundPolicy>, Error> {
    let Some(raw) = doc.get(INBOUND_KEY) else {
        return Ok(None);
    };
    serde_json::from_str::<String>(raw)
        .ok()
        .and_then(|s| s.parse().ok())
        .map(Some)
        .ok_or_else(|| Error::InvalidValue {
            path: path.to_owned(),
            value: raw.to_owned(),
        })
}

/// Reads `path` following links, as Claude Code does; `None` when missing.
pub(crate) fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    Ok(RealFs.load(path, Links::Follow)?.map(|(bytes, _)| bytes))
}

/// `.<file name>.claude-peers.<suffix>` beside the settings file.
fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or("settings.json".as_ref()));
    name.push(".claude-peers.");
    name.push(suffix);
    path.with_file_name(name)
}

fn write_error(action: &'static str, path: &Path, source: std::io::Error) -> Error {
    Error::Write {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Applies `edit` to the settings file at `path` under our lock, as a compare-and-swap against
/// `expected` (see the crate docs for the steps). Returns whether the file exists afterwards
/// and its revision.
pub(crate) fn update<F: Fs>(
    fs: &F,
    path: &Path,
    expected: Option<&Revision>,
    edit: impl Fn(&Doc<'_>) -> Option<Splice>,
) -> Result<(bool, Revision), Error> {
    let lock_path = beside(path, "lock");
    let _lock = fs
        .lock(&lock_path)
        .map_err(|e| write_error("lock", &lock_path, e))?;
    let loaded = fs.load(path, Links::Refuse)?;
    let old = loaded
        .as_ref()
        .map_or(&[][..], |(bytes, _)| bytes.as_slice());
    let mode = loaded.as_ref().map(|&(_, mode)| mode);
    let revision = Revision::of(old);
    if let Some(expected) = expected
        && *expected != revision
    {
        return Err(Error::Conflict {
            path: path.to_owned(),
            expected: expected.clone(),
            found: revision,
        });
    }
    let doc = edit::parse(old).map_err(|e| doc_error(path, e))?;
    let Some(splice) = edit(&doc) else {
        return Ok((mode.is_some(), revision));
    };
    let new = splice.apply(old);
    let temp_path = beside(path, "tmp");
    let replaced = fs
        .write_temp(&temp_path, mode.unwrap_or(NEW_FILE_MODE), &new)
        .map_err(|e| write_error("write temporary file", &temp_path, e))
        .and_then(|()| compare_and_rename(fs, &temp_path, path, mode.map(|_| old)));
    if let Err(e) = replaced {
        // Best effort; after a failed rename it may already be gone.
        let _ = fs.remove(&temp_path);
        return Err(e);
    }
    let dir = path.parent().filter(|dir| !dir.as_os_str().is_empty());
    fs.sync_dir(dir.unwrap_or(Path::new(".")))
        .map_err(|source| Error::NotDurable {
            path: path.to_owned(),
            source,
        })?;
    Ok((true, Revision::of(&new)))
}

/// Renames the written temporary file over the settings file if that still holds `old`, what
/// the update read (`None` when the file was missing). Writers that take no lock (Claude Code)
/// are caught here, right before the rename; a link or a non-file swapped in is refused.
fn compare_and_rename<F: Fs>(
    fs: &F,
    temp_path: &Path,
    path: &Path,
    old: Option<&[u8]>,
) -> Result<(), Error> {
    let now = fs.load(path, Links::Refuse)?;
    let now = now.as_ref().map(|(bytes, _)| bytes.as_slice());
    if now != old {
        return Err(Error::Conflict {
            path: path.to_owned(),
            expected: Revision::of(old.unwrap_or_default()),
            found: Revision::of(now.unwrap_or_default()),
        });
    }
    fs.rename(temp_path, path)
        .map_err(|e| write_error("rename to", path, e))
}
