//! Reading and updating one settings file.

use std::ffi::{OsStr, OsString};
use std::hash::{BuildHasher as _, Hasher as _};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::Value;

use crate::Error;
use crate::edit::{self, DocError, Scanned, Splice};
use crate::fs::{Entry, MAX_SETTINGS_BYTES, RealFs, SettingsFs};
use crate::policy::{INBOUND_KEY, InboundPolicy};
use crate::revision::{Hashed, Revision};

/// Temporary files of ours older than this are left-overs of a crashed writer.
pub const STALE_TEMP_AGE: Duration = Duration::from_secs(60);

/// From this size on (old or new document), a document is big: the checks of the old document
/// (expected revision, full validation) and the hash of the new one run on a helper thread
/// while the temporary file is written and synced, and the lock file notes the revisions
/// validated. Below it the checks run inline and nothing is noted: starting a thread, or the
/// note's I/O, costs about as much as validating a small document.
const BIG_DOCUMENT: usize = 64 * 1024;

/// The most a note in the lock file is read of (a revision and a newline).
pub(crate) const NOTE_MAX: usize = 128;

/// Mode of a settings file this crate creates.
const NEW_FILE_MODE: u32 = 0o600;
/// Mode of a Claude home directory this crate creates.
const NEW_DIR_MODE: u32 = 0o700;

/// What a settings file held when it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
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

/// A settings file (normally `<claude home>/settings.json`), read and changed through `F`.
#[derive(Debug, Clone)]
pub struct SettingsStore<F: SettingsFs = RealFs> {
    path: PathBuf,
    fs: F,
}

impl SettingsStore<RealFs> {
    /// The store for the settings file at `path`, on the real file system.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SettingsStore::with_fs(path, RealFs)
    }
}

fn doc_error(path: &Path, e: DocError) -> Error {
    match e {
        DocError::InvalidJson(message) => Error::InvalidJson {
            path: path.to_owned(),
            message,
        },
        DocError::NotAnObject(found) => Error::NotAnObject {
            path: path.to_owned(),
            found,
        },
    }
}

/// The user's `crossSessionInbound` in `bytes`, validated.
pub(crate) fn inbound_of(path: &Path, bytes: &[u8]) -> Result<Option<InboundPolicy>, Error> {
    let Some((value, raw)) = edit::get(bytes, INBOUND_KEY).map_err(|e| doc_error(path, e))? else {
        return Ok(None);
    };
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .map(Some)
        .ok_or_else(|| Error::InvalidValue {
            path: path.to_owned(),
            value: raw,
        })
}

fn too_large(path: &Path, size: u64) -> Error {
    Error::TooLarge {
        path: path.to_owned(),
        size,
        limit: MAX_SETTINGS_BYTES,
    }
}

/// Reads `path` following links, as Claude Code does; a missing file is empty bytes.
pub(crate) fn read_bytes<F: SettingsFs>(fs: &F, path: &Path) -> Result<Option<Vec<u8>>, Error> {
    match fs.load(path, true) {
        Ok(Entry::Missing) => Ok(None),
        Ok(Entry::Regular { bytes, .. }) => Ok(Some(bytes)),
        Ok(Entry::TooLarge { size }) => Err(too_large(path, size)),
        Ok(Entry::Symlink) => Err(Error::Symlink {
            path: path.to_owned(),
        }),
        Ok(Entry::Other(kind)) => Err(Error::NotRegularFile {
            path: path.to_owned(),
            kind,
        }),
        Err(source) => Err(Error::Read {
            path: path.to_owned(),
            source,
        }),
    }
}

/// `.settings.json.claude-peers-` for `settings.json`.
fn temp_prefix(file_name: &OsStr) -> OsString {
    let mut prefix = OsString::from(".");
    prefix.push(file_name);
    prefix.push(".claude-peers-");
    prefix
}

const TEMP_SUFFIX: &str = ".tmp";
const RANDOM_HEX_LEN: usize = 16;

/// Whether `name` is one of our temporary files for the settings file `file_name`:
/// `.<file name>.claude-peers-<16 hex>.tmp`.
fn is_our_temp(name: &OsStr, file_name: &OsStr) -> bool {
    let prefix = temp_prefix(file_name);
    let (name, prefix) = (name.as_encoded_bytes(), prefix.as_encoded_bytes());
    name.len() == prefix.len() + RANDOM_HEX_LEN + TEMP_SUFFIX.len()
        && name.starts_with(prefix)
        && name.ends_with(TEMP_SUFFIX.as_bytes())
        && name[prefix.len()..prefix.len() + RANDOM_HEX_LEN]
            .iter()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// 64 random bits from the process id, the time, a counter and std's per-process random keys.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    hasher.write_u128(nanos);
    hasher.finish()
}

/// How an update changes the bytes: the structural scan the edit was computed from (to be
/// validated) and the edit, `None` = nothing to write.
type EditFn<'a> = &'a dyn Fn(&[u8]) -> Result<(Scanned, Option<Splice>), DocError>;

/// The checks an update's old bytes must pass before anything derived from them replaces the
/// file: the expected revision (a mismatch is a `conflict`), then full validation (with the scan
/// the edit was computed from, see [`edit::validate`]), skipped for the document `validated`
/// names. Returns their hash.
fn check_old(
    path: &Path,
    old: &[u8],
    expected: Option<&Revision>,
    scanned: Option<&Scanned>,
    validated: Option<&Revision>,
) -> Result<Hashed, Error> {
    let hashed = Hashed::new(old);
    if let Some(expected) = expected
        && *expected != hashed.revision
    {
        return Err(Error::Conflict {
            path: path.to_owned(),
            expected: expected.clone(),
            found: hashed.revision,
        });
    }
    if validated != Some(&hashed.revision) {
        edit::validate(old, scanned).map_err(|e| doc_error(path, e))?;
    }
    Ok(hashed)
}

/// What an update checks of the old bytes and the new ones it computed from them: the checks of
/// [`check_old`], then the revision of the new bytes.
struct Checks<'a> {
    path: &'a Path,
    old: &'a [u8],
    new: &'a [&'a [u8]],
    /// How many leading bytes of `old` the new bytes keep.
    kept: usize,
    expected: Option<&'a Revision>,
    scanned: &'a Scanned,
    validated: Option<&'a Revision>,
}

impl Checks<'_> {
    /// The revision of the new bytes, once the old ones passed.
    fn run(&self) -> Result<Revision, Error> {
        let old = check_old(
            self.path,
            self.old,
            self.expected,
            Some(self.scanned),
            self.validated,
        )?;
        Ok(old.edited(self.new, self.kept))
    }
}

impl<F: SettingsFs> SettingsStore<F> {
    /// The store for the settings file at `path`, on the file system `fs`.
    pub fn with_fs(path: impl Into<PathBuf>, fs: F) -> Self {
        SettingsStore {
            path: path.into(),
            fs,
        }
    }

    /// The settings file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The lock file our writers share: `.<file name>.claude-peers.lock` beside the settings file.
    /// It is left in place (removing a lock file races with the next writer).
    #[must_use]
    pub fn lock_path(&self) -> PathBuf {
        let mut name = OsString::from(".");
        name.push(
            self.path
                .file_name()
                .unwrap_or_else(|| OsStr::new("settings.json")),
        );
        name.push(".claude-peers.lock");
        self.dir().join(name)
    }

    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
            _ => PathBuf::from("."),
        }
    }

    fn file_name(&self) -> &OsStr {
        self.path
            .file_name()
            .unwrap_or_else(|| OsStr::new("settings.json"))
    }

    /// Reads the file (following a symbolic link, as Claude Code does) and validates it.
    pub fn read(&self) -> Result<Snapshot, Error> {
        let bytes = read_bytes(&self.fs, &self.path)?;
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
        self.update_inbound(expected, Some(policy), &|bytes| {
            edit::plan_set(bytes, INBOUND_KEY, &value)
        })
    }

    /// Removes `crossSessionInbound` (back to Claude Code's default), every occurrence of it.
    pub fn reset_inbound(&self, expected: Option<&Revision>) -> Result<Snapshot, Error> {
        self.update_inbound(expected, None, &|bytes| {
            edit::plan_remove(bytes, INBOUND_KEY)
        })
    }

    /// Runs the update; the file afterwards holds `after` (or, when nothing was written,
    /// the value it was compared equal to).
    fn update_inbound(
        &self,
        expected: Option<&Revision>,
        after: Option<InboundPolicy>,
        edit: EditFn<'_>,
    ) -> Result<Snapshot, Error> {
        let (exists, revision) = self.update(expected, edit)?;
        Ok(Snapshot {
            path: self.path.clone(),
            exists,
            revision,
            inbound: after,
        })
    }

    /// Sets the top-level `key` to `value` with the minimal byte edit (see the crate docs).
    /// Returns the file's revision afterwards.
    pub fn set_key(
        &self,
        key: &str,
        value: &Value,
        expected: Option<&Revision>,
    ) -> Result<Revision, Error> {
        self.update(expected, &|old| edit::plan_set(old, key, value))
            .map(|(_, revision)| revision)
    }

    /// Removes every top-level occurrence of `key`. Returns the file's revision afterwards.
    pub fn remove_key(&self, key: &str, expected: Option<&Revision>) -> Result<Revision, Error> {
        self.update(expected, &|old| edit::plan_remove(old, key))
            .map(|(_, revision)| revision)
    }

    fn write_error(&self, action: &'static str, path: &Path, source: io::Error) -> Error {
        let _ = self;
        Error::Write {
            action,
            path: path.to_owned(),
            source,
        }
    }

    /// Loads the settings file for an update: no link followed, only a regular file or nothing.
    fn load_for_update(&self) -> Result<(Option<u32>, Vec<u8>), Error> {
        match self.fs.load(&self.path, false) {
            Ok(Entry::Missing) => Ok((None, Vec::new())),
            Ok(Entry::Regular { bytes, mode }) => Ok((Some(mode), bytes)),
            Ok(Entry::TooLarge { size }) => Err(too_large(&self.path, size)),
            Ok(Entry::Symlink) => Err(Error::Symlink {
                path: self.path.clone(),
            }),
            Ok(Entry::Other(kind)) => Err(Error::NotRegularFile {
                path: self.path.clone(),
                kind,
            }),
            Err(source) => Err(Error::Read {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// The whole update under our lock; returns whether the file exists and its bytes afterwards.
    fn update(
        &self,
        expected: Option<&Revision>,
        edit: EditFn<'_>,
    ) -> Result<(bool, Revision), Error> {
        let dir = self.dir();
        let lock_path = self.lock_path();
        // The directory is created only when the lock file cannot be, as it is missing.
        let lock = match self.fs.lock(&lock_path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.fs
                    .create_dir_all(&dir, NEW_DIR_MODE)
                    .map_err(|e| self.write_error("create directory", &dir, e))?;
                self.fs.lock(&lock_path)
            }
            locked => locked,
        }
        .map_err(|e| self.write_error("lock", &lock_path, e))?;

        let (mode, old) = self.load_for_update()?;
        let validated = if old.len() >= BIG_DOCUMENT {
            self.validated_note(&lock)
        } else {
            None
        };
        let path = self.path.as_path();
        let (scanned, splice) = match edit(&old) {
            // The scan looks at strings and brackets only: the checks give the error to report.
            Err(e) => {
                check_old(path, &old, expected, None, None)?;
                return Err(doc_error(path, e));
            }
            Ok((scanned, None)) => {
                let hashed = check_old(path, &old, expected, Some(&scanned), validated.as_ref())?;
                if old.len() >= BIG_DOCUMENT {
                    self.note_validated(&lock, validated.as_ref(), &hashed.revision);
                }
                return Ok((mode.is_some(), hashed.revision));
            }
            Ok((scanned, Some(splice))) => (scanned, splice),
        };
        let new = splice.parts(&old);
        let checks = Checks {
            path,
            old: &old,
            new: &new,
            kept: splice.kept(),
            expected,
            scanned: &scanned,
            validated: validated.as_ref(),
        };
        let new_len: usize = new.iter().map(|p| p.len()).sum();
        let big = old.len().max(new_len) >= BIG_DOCUMENT;
        let checked_inline = if big { None } else { Some(checks.run()?) };

        self.remove_stale_temps(&dir);
        let (temp_path, mut temp) = self.create_temp(&dir, mode.unwrap_or(NEW_FILE_MODE))?;
        // A big document is checked, and its new revision hashed, on a helper thread while the
        // kernel writes and syncs the temporary file; the rename waits for both.
        let result = std::thread::scope(|scope| {
            let helper = big
                .then(|| {
                    let checks = &checks;
                    std::thread::Builder::new()
                        .spawn_scoped(scope, move || checks.run())
                        .ok()
                })
                .flatten();
            let written = self
                .fs
                .write_temp(&mut temp, &new)
                .map_err(|e| self.write_error("write", &temp_path, e));
            let joined = helper.and_then(|h| h.join().ok());
            // Small (checked above), or the helper could not start or failed: inline.
            let checked = match (checked_inline, joined) {
                (Some(revision), _) => Ok(revision),
                (None, Some(checked)) => checked,
                (None, None) => checks.run(),
            };
            let revision = checked?;
            written?;
            self.compare_and_rename(&temp_path, mode.map(|_| &old[..]))?;
            Ok::<_, Error>(revision)
        });
        drop(temp);
        let revision = match result {
            Ok(revision) => revision,
            Err(e) => {
                // Best effort; after a failed rename it may already be gone.
                let _ = self.fs.remove(&temp_path);
                return Err(e);
            }
        };
        self.fs.sync_dir(&dir).map_err(|source| Error::NotDurable {
            path: self.path.clone(),
            source,
        })?;
        if big {
            self.note_validated(&lock, validated.as_ref(), &revision);
        }
        Ok((true, revision))
    }

    /// The revision the lock file notes as validated: the last document our writers wrote or
    /// fully validated. An update that finds exactly that document again does not validate it
    /// again (for a big file, most of the work). The note names bytes, not the file: it stays
    /// true whatever the file holds later, and a missing, torn or foreign note only costs a
    /// full validation.
    fn validated_note(&self, lock: &F::Lock) -> Option<Revision> {
        let note = self.fs.read_note(lock).ok()?;
        std::str::from_utf8(&note)
            .ok()?
            .strip_suffix('\n')?
            .parse()
            .ok()
    }

    /// Notes `revision` as validated in the lock file, unless it already is; best effort.
    fn note_validated(&self, lock: &F::Lock, noted: Option<&Revision>, revision: &Revision) {
        if noted != Some(revision) {
            let _ = self.fs.write_note(lock, format!("{revision}\n").as_bytes());
        }
    }

    fn create_temp(&self, dir: &Path, mode: u32) -> Result<(PathBuf, F::Temp), Error> {
        let prefix = temp_prefix(self.file_name());
        let mut attempt = 0;
        loop {
            let mut name = prefix.clone();
            name.push(format!("{:016x}{TEMP_SUFFIX}", random_u64()));
            let path = dir.join(name);
            match self.fs.create_temp(&path, mode) {
                Ok(temp) => return Ok((path, temp)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 8 => attempt += 1,
                Err(e) => return Err(self.write_error("create temporary file", &path, e)),
            }
        }
    }

    /// Renames the written temporary file over the settings file if that still holds `old`,
    /// what the update read (`None` when the file was missing).
    fn compare_and_rename(&self, temp_path: &Path, old: Option<&[u8]>) -> Result<(), Error> {
        // Writers that take no lock (Claude Code) are caught here: compare once more right
        // before the rename.
        let unchanged = self
            .fs
            .holds(&self.path, old)
            .map_err(|source| Error::Read {
                path: self.path.clone(),
                source,
            })?;
        if !unchanged {
            // A link or a non-file swapped in is reported as such; nothing was written.
            let (_, now) = self.load_for_update()?;
            let found = Revision::of(&now);
            return Err(Error::Conflict {
                path: self.path.clone(),
                expected: Revision::of(old.unwrap_or_default()),
                found,
            });
        }
        self.fs
            .rename(temp_path, &self.path)
            .map_err(|e| self.write_error("rename to", &self.path, e))
    }

    /// Removes our temporary files older than [`STALE_TEMP_AGE`]; best effort (a failure here
    /// must not stop the update).
    fn remove_stale_temps(&self, dir: &Path) {
        let Ok(names) = self.fs.list_dir(dir) else {
            return;
        };
        let now = SystemTime::now();
        for name in names.iter().filter(|n| is_our_temp(n, self.file_name())) {
            let path = dir.join(name);
            let stale = self.fs.stat(&path).ok().flatten().is_some_and(|s| {
                s.regular
                    && now
                        .duration_since(s.modified)
                        .is_ok_and(|age| age > STALE_TEMP_AGE)
            });
            if stale {
                let _ = self.fs.remove(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_exact_temp_names_are_recognized() {
        let f = OsStr::new("settings.json");
        assert!(is_our_temp(
            OsStr::new(".settings.json.claude-peers-0123456789abcdef.tmp"),
            f
        ));
        for other in [
            "settings.json",
            ".settings.json.claude-peers.lock",
            ".settings.json.claude-peers-0123456789abcdeF.tmp",
            ".settings.json.claude-peers-0123456789abcde.tmp",
            ".settings.local.json.claude-peers-0123456789abcdef.tmp",
            ".settings.json.claude-peers-0123456789abcdef.tmp.bak",
        ] {
            assert!(!is_our_temp(OsStr::new(other), f), "{other}");
        }
    }

    #[test]
    fn validation_is_skipped_for_exactly_the_noted_bytes_and_never_the_expected_revision() {
        let path = Path::new("settings.json");
        let invalid = b"{\"a\": tru}";
        let noted = Revision::of(invalid);
        let other = Revision::of(b"{}");
        let check = |expected, validated| {
            check_old(path, invalid, expected, None, validated).map(|h| h.revision)
        };
        assert_eq!(check(None, Some(&noted)).unwrap(), noted);
        assert_eq!(
            check(None, Some(&other)).unwrap_err().as_str(),
            "invalid_json"
        );
        assert_eq!(check(None, None).unwrap_err().as_str(), "invalid_json");
        assert_eq!(
            check(Some(&other), Some(&noted)).unwrap_err().as_str(),
            "conflict"
        );
    }

    #[test]
    fn random_names_differ_between_calls() {
        assert_ne!(random_u64(), random_u64());
    }
}
