//! The sender's private Claude home and its per-run secret.

use std::fmt::Write as _;
use std::fs::{self, DirBuilder};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The private Claude home senders run in: `claude-peers/sender-home` under
/// `$XDG_RUNTIME_DIR` when it is this user's own and 0700 (as the XDG spec requires of
/// it), else under `$XDG_CACHE_HOME`, else `~/.cache`. Never the user's own home: a
/// sender there would appear in the user's registry and run the user's hooks.
#[must_use]
pub fn default_sender_home() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let uid = rustix::process::getuid().as_raw();
    let base = var("XDG_RUNTIME_DIR")
        .filter(|dir| {
            fs::symlink_metadata(dir)
                .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o777 == 0o700)
        })
        .or_else(|| var("XDG_CACHE_HOME"))
        .or_else(|| var("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("claude-peers").join("sender-home"))
}

/// Makes the private home ready: every directory on its way, from `/` down, belongs to
/// this user or root and no one else may write to it (but for sticky ones such as
/// `/tmp`, where others cannot move what is ours); the missing ones are created 0700,
/// one by one; the home itself is this user's, 0700, with a `.claude.json` that lets a
/// headless Claude Code start without onboarding. Otherwise someone else could put their
/// own settings, and so their hooks, in the home Claude Code runs with. Returns the home
/// with every link on its way resolved, the path the sender is given.
pub(super) fn prepare_home(home: &Path) -> io::Result<PathBuf> {
    let uid = rustix::process::getuid().as_raw();
    let (existing, missing) = split_existing(home)?;
    let mut path = fs::canonicalize(&existing)?;
    for dir in path.ancestors().collect::<Vec<_>>().into_iter().rev() {
        check_dir(dir, uid, Some(0))?;
    }
    for name in missing {
        path.push(name);
        match DirBuilder::new().mode(0o700).create(&path) {
            Err(err) if err.kind() != io::ErrorKind::AlreadyExists => return Err(err),
            _ => check_dir(&path, uid, None)?,
        }
    }
    check_dir(&path, uid, None)?;
    if fs::symlink_metadata(&path)?.mode() & 0o777 != 0o700 {
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700))?;
    }
    let config = path.join(".claude.json");
    if !config.exists() {
        fs::write(config, br#"{"hasCompletedOnboarding":true}"#)?;
    }
    match DirBuilder::new().mode(0o700).create(path.join("runs")) {
        Err(err) if err.kind() != io::ErrorKind::AlreadyExists => return Err(err),
        _ => check_dir(&path.join("runs"), uid, None)?,
    }
    Ok(path)
}

/// The longest existing prefix of `path` and the names below it, in order.
fn split_existing(path: &Path) -> io::Result<(PathBuf, Vec<std::ffi::OsString>)> {
    let mut existing = path.to_path_buf();
    let mut missing = Vec::new();
    while fs::symlink_metadata(&existing).is_err() {
        let Some(name) = existing.file_name() else {
            return Err(io::Error::other(format!(
                "`{}` has no existing directory on its way",
                path.display()
            )));
        };
        missing.push(name.to_owned());
        existing.pop();
    }
    missing.reverse();
    Ok((existing, missing))
}

/// A directory of `uid` (or of `also`, root for the system's directories above the
/// home) that no one else may write to, unless it is sticky; the error names it.
fn check_dir(dir: &Path, uid: u32, also: Option<u32>) -> io::Result<()> {
    let meta = fs::symlink_metadata(dir)?;
    let wrong = if !meta.is_dir() {
        "is not a directory".to_owned()
    } else if meta.uid() != uid && Some(meta.uid()) != also {
        format!("belongs to uid {}, not to this user", meta.uid())
    } else if meta.mode() & 0o022 != 0 && meta.mode() & 0o1000 == 0 {
        format!(
            "may be written by other users (mode {:o}), who could replace what is below it",
            meta.mode() & 0o777
        )
    } else {
        return Ok(());
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("`{}` {wrong}", dir.display()),
    ))
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
    use std::os::unix::fs::symlink;

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
