//! The sender's private Claude home and its per-run secret.

use std::fmt::Write as _;
use std::fs::{self, DirBuilder};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The private Claude home senders run in: `claude-peers/sender-home` under
/// `$XDG_RUNTIME_DIR`, else `$XDG_CACHE_HOME`, else `~/.cache`. Never the user's own
/// home: a sender there would appear in the user's registry and run the user's hooks.
#[must_use]
pub fn default_sender_home() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = var("XDG_RUNTIME_DIR")
        .filter(|dir| dir.is_dir())
        .or_else(|| var("XDG_CACHE_HOME"))
        .or_else(|| var("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("claude-peers").join("sender-home"))
}

/// Creates the private home (0700, ours, not a link) with a `.claude.json` that lets a
/// headless Claude Code start without onboarding.
pub(super) fn prepare_home(home: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(home)?;
    let meta = fs::symlink_metadata(home)?;
    if !meta.is_dir() || meta.uid() != rustix::process::getuid().as_raw() {
        return Err(io::Error::other(format!(
            "the sender home `{}` is not a directory of this user",
            home.display()
        )));
    }
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(home, fs::Permissions::from_mode(0o700))?;
    }
    let config = home.join(".claude.json");
    if !config.exists() {
        fs::write(config, br#"{"hasCompletedOnboarding":true}"#)?;
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home.join("runs"))
}

/// The prefix of this process's run directories: `run-<pid>-`, so a later start can tell
/// whose a leftover is.
pub(super) fn run_prefix() -> String {
    format!("run-{}-", std::process::id())
}

/// Removes the run directories under `runs` left by processes that no longer run (killed
/// before they could remove their own): only directories of this user, named by a pid
/// that `kill(pid, 0)` says is gone. A pid run by another process now keeps its
/// directory; nothing but `run-<pid>-…` directories is touched.
pub(super) fn remove_leftover_runs(runs: &Path) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let uid = rustix::process::getuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("run-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        let gone = rustix::process::test_kill_process(pid) == Err(rustix::io::Errno::SRCH);
        let ours = entry
            .metadata()
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == uid);
        if gone && ours {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// A per-run secret: 16 bytes of the kernel's randomness, in hex.
pub(super) fn secret() -> io::Result<String> {
    let mut bytes = [0_u8; 16];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    }))
}
