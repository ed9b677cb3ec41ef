//! Tests of updates through the file-system seam: fault injection, real processes, and what
//! only the crate's own generic edit reaches.

mod faults;
mod processes;
mod updates;

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::fs::RealFs;
use crate::store::update;
use crate::{Error, Revision};

/// The bytes of a read-only fixture in `tests/fixtures/`.
fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// A fresh home directory holding `settings.json` with `bytes`; returns the dir and the path.
fn home_with(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

/// Names of our temporary files in `dir`.
fn temps_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| {
            n.contains(".claude-peers") && Path::new(n).extension().is_some_and(|e| e == "tmp")
        })
        .collect();
    names.sort();
    names
}

/// Sets the top-level `key` of the settings file at `path` to `value`, as an update does.
fn set_key(path: &Path, key: &str, value: &Value) -> Result<Revision, Error> {
    update(&RealFs, path, None, |doc| doc.set(key, value)).map(|(_, revision)| revision)
}

/// Removes every top-level `key` of the settings file at `path`, as an update does.
fn remove_key(path: &Path, key: &str) -> Result<Revision, Error> {
    update(&RealFs, path, None, |doc| doc.remove(key)).map(|(_, revision)| revision)
}
