//! The sender's private Claude home and its per-run secret.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::{default_runtime_dir, private_dir};

/// The private Claude home senders run in: `sender-home` in the
/// [`default_runtime_dir`]. Never the user's own home: a sender there would appear in the
/// user's registry and run the user's hooks.
#[must_use]
pub fn default_sender_home() -> Option<PathBuf> {
    default_runtime_dir().map(|dir| dir.join("sender-home"))
}

/// Makes the private home ready: a [`private_dir`] (so no one else can put their own
/// settings, and so their hooks, in the home Claude Code runs with) with a
/// `.claude.json` that lets a headless Claude Code start without onboarding, and its
/// `runs/`. Returns the home with every link on its way resolved, the path the sender is
/// given.
pub(super) fn prepare_home(home: &Path) -> io::Result<PathBuf> {
    let path = private_dir(home)?;
    let config = path.join(".claude.json");
    if !config.exists() {
        fs::write(config, br#"{"hasCompletedOnboarding":true}"#)?;
    }
    private_dir(&path.join("runs"))?;
    Ok(path)
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

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    /// A fresh base (0700, ours) and the home below it, as the sender would use it.
    fn base() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("claude-peers").join("sender-home");
        (base, home)
    }

    fn refused(home: &Path) -> String {
        prepare_home(home).unwrap_err().to_string()
    }

    #[test]
    fn a_home_is_created_0700_below_a_chain_only_its_user_or_root_can_change() {
        let (dir, home) = base();
        let made = prepare_home(&home).unwrap();
        assert_eq!(made, fs::canonicalize(&home).unwrap());
        for dir in [home.parent().unwrap(), &home, &home.join("runs")] {
            assert_eq!(fs::metadata(dir).unwrap().mode() & 0o777, 0o700, "{dir:?}");
        }
        assert!(home.join(".claude.json").is_file());
        // Ready once, ready again; and a link to it resolves to where it really is.
        assert_eq!(prepare_home(&home).unwrap(), made);
        symlink(&home, dir.path().join("link")).unwrap();
        assert_eq!(prepare_home(&dir.path().join("link")).unwrap(), made);
    }

    #[test]
    fn a_directory_others_may_write_anywhere_on_the_way_is_refused_by_name() {
        let (dir, _) = base();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let home = open.join("cache").join("claude-peers").join("sender-home");
        let why = refused(&home);
        assert!(
            why.contains(&format!("`{}`", open.display())) && why.contains("mode 777"),
            "{why}"
        );
        assert_eq!(
            fs::read_dir(&open).unwrap().count(),
            0,
            "nothing is created in it"
        );

        // Group-writable is as bad; sticky and world-writable, like /tmp, is not.
        fs::set_permissions(&open, fs::Permissions::from_mode(0o770)).unwrap();
        assert!(refused(&home).contains("mode 770"));
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        prepare_home(&home).unwrap();

        // Below the base too: an existing `claude-peers` others may write.
        let (_base, home) = base();
        prepare_home(&home).unwrap();
        let ours = home.parent().unwrap();
        fs::set_permissions(ours, fs::Permissions::from_mode(0o757)).unwrap();
        assert!(refused(&home).contains(&format!("`{}`", ours.display())));
    }

    #[test]
    fn a_directory_of_another_user_on_the_way_is_refused_even_through_a_link() {
        // The tests run as root (`cargo xtask test` in CI); root may give a directory away.
        assert!(
            rustix::process::getuid().is_root(),
            "this test makes directories of another user, which needs root"
        );
        let nobody = Some(rustix::fs::Uid::from_raw(65534));
        let (dir, home) = base();
        let theirs = dir.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        rustix::fs::chown(&theirs, nobody, None).unwrap();
        let why = refused(&theirs.join("sender-home"));
        assert!(
            why.contains(&format!("`{}`", theirs.display())) && why.contains("uid 65534"),
            "{why}"
        );
        assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);

        // Our `claude-peers`, with `sender-home` a link into another user's directory.
        fs::create_dir(home.parent().unwrap()).unwrap();
        symlink(&theirs, &home).unwrap();
        assert!(refused(&home).contains("uid 65534"), "{}", refused(&home));
        assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);
    }
}
