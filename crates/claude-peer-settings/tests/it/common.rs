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
            n.contains(".claude-peers-") && Path::new(n).extension().is_some_and(|e| e == "tmp")
        })
        .collect();
    names.sort();
    names
}

/// The permission bits of `path`.
pub(crate) fn mode_of(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// A small deterministic pseudo-random generator (xorshift64*), seeded per test run.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn from_entropy() -> Rng {
        use std::hash::{BuildHasher as _, Hasher as _};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let seed = h.finish() | 1;
        println!("rng seed {seed:#x}");
        Rng(seed)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}
