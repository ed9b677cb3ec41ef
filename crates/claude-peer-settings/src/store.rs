//! Reading and updating one settings file.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::edit::{self, Doc, DocError, Splice};
use crate::fs::{Entry, Fs, MAX_SETTINGS_BYTES, RealFs};
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
        let exists = bytes.is_some();
        let bytes = bytes.unwrap_or_default();
        Ok(Snapshot {
            path: self.path.clone(),
            exists,
            revision: Revision::of(&bytes),
            inbound: inbound_of(&self.path, &bytes)?,
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
        let value = Value::from(policy.as_str());
        let edit = |doc: &Doc<'_>| doc.set(INBOUND_KEY, &value);
        let (exists, revision) = update(&RealFs, &self.path, expected, edit)?;
        Ok(self.snapshot(exists, revision, Some(policy)))
    }

    /// Removes `crossSessionInbound` (back to Claude Code's default), every occurrence of it.
    pub fn reset_inbound(&self, expected: Option<&Revision>) -> Result<Snapshot, Error> {
        let edit = |doc: &Doc<'_>| doc.remove(INBOUND_KEY);
        let (exists, revision) = update(&RealFs, &self.path, expected, edit)?;
        Ok(self.snapshot(exists, revision, None))
    }

    fn snapshot(
        &self,
        exists: bool,
        revision: Revision,
        inbound: Option<InboundPolicy>,
    ) -> Snapshot {
        Snapshot {
            path: self.path.clone(),
            exists,
            revision,
            inbound,
        }
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
    let doc = edit::parse(bytes).map_err(|e| doc_error(path, e))?;
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

/// What is at `path` as an update may use it (`None` when missing: empty bytes), or the
/// error that refuses it.
fn entry_bytes(
    path: &Path,
    entry: std::io::Result<Entry>,
) -> Result<Option<(Vec<u8>, u32)>, Error> {
    let path = path.to_owned();
    match entry {
        Ok(Entry::Missing) => Ok(None),
        Ok(Entry::Regular { bytes, mode }) => Ok(Some((bytes, mode))),
        Ok(Entry::TooLarge { size }) => Err(Error::TooLarge {
            path,
            size,
            limit: MAX_SETTINGS_BYTES,
        }),
        Ok(Entry::Symlink) => Err(Error::Symlink { path }),
        Ok(Entry::Other(kind)) => Err(Error::NotRegularFile { path, kind }),
        Err(source) => Err(Error::Read { path, source }),
    }
}

/// Reads `path` following links, as Claude Code does; `None` when missing.
pub(crate) fn read_bytes(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    Ok(entry_bytes(path, RealFs.load(path, true))?.map(|(bytes, _)| bytes))
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
    let loaded = entry_bytes(path, fs.load(path, false))?;
    let (old, mode) = match &loaded {
        Some((bytes, mode)) => (bytes.as_slice(), Some(*mode)),
        None => (&[][..], None),
    };
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
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    fs.sync_dir(dir).map_err(|source| Error::NotDurable {
        path: path.to_owned(),
        source,
    })?;
    Ok((true, Revision::of(&new)))
}

/// Renames the written temporary file over the settings file if that still holds `old`, what
/// the update read (`None` when the file was missing). Writers that take no lock (Claude Code)
/// are caught here, right before the rename.
fn compare_and_rename<F: Fs>(
    fs: &F,
    temp_path: &Path,
    path: &Path,
    old: Option<&[u8]>,
) -> Result<(), Error> {
    let unchanged = fs.holds(path, old).map_err(|source| Error::Read {
        path: path.to_owned(),
        source,
    })?;
    if !unchanged {
        // A link or a non-file swapped in is reported as such; nothing was written.
        let now = entry_bytes(path, fs.load(path, false))?.unwrap_or_default();
        return Err(Error::Conflict {
            path: path.to_owned(),
            expected: Revision::of(old.unwrap_or_default()),
            found: Revision::of(&now.0),
        });
    }
    fs.rename(temp_path, path)
        .map_err(|e| write_error("rename to", path, e))
}
