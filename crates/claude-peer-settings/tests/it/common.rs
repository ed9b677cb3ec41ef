//! Helpers shared by the test modules.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// The bytes of a read-only fixture in `tests/fixtures/`.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()))
}

/// The names of all fixtures, sorted.
pub(crate) fn fixture_names() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// A fresh home directory holding `settings.json` with `bytes`; returns the dir and the path.
pub(crate) fn home_with(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, bytes).unwrap();
    (dir, path)
}

/// Names of our temporary files in `dir`.
pub(crate) fn temps_in(dir: &Path) -> Vec<String> {
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

/// The permission bits of `path`.
pub(crate) fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The revision of `bytes`: the blake3 hash of the exact bytes, in lower-case hex.
pub(crate) fn revision_of(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}
