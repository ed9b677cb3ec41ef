//! A directory only this user can change: where private state is kept.

use std::ffi::OsString;
use std::fs::{self, DirBuilder};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Where this user's private runtime state lives (the sender's home, the post office's
/// lock and socket): `claude-peers` under `$XDG_RUNTIME_DIR` when it is this user's own
/// and 0700 (as the XDG spec requires of it), else under `$XDG_CACHE_HOME`, else
/// `~/.cache`; absolute paths only.
#[must_use]
pub fn default_runtime_dir() -> Option<PathBuf> {
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
    Some(base.join("claude-peers"))
}

/// Makes `path` a directory only this user can change, and returns it with every link
/// on its way resolved: every directory on its way, from `/` down, belongs to this user
/// or root and no one else may write to it (but for sticky ones such as `/tmp`, where
/// others cannot move what is ours); the missing ones are created 0700, one by one; the
/// directory itself is this user's. One that exists keeps its mode (a `--store` in a
/// directory of the user's own does not change who may read it), as long as no one else
/// may write to it. The error names the directory that fails.
/// Otherwise someone else could replace what is kept there (a sender's settings and
/// hooks, the post office's store).
pub fn private_dir(path: &Path) -> io::Result<PathBuf> {
    let uid = rustix::process::getuid().as_raw();
    let (existing, missing) = split_existing(path)?;
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
    Ok(path)
}

/// The longest existing prefix of `path` and the names below it, in order.
fn split_existing(path: &Path) -> io::Result<(PathBuf, Vec<OsString>)> {
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
/// private one) that no one else may write to, unless it is sticky; the error names it.
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
