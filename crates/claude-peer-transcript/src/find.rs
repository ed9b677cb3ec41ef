//! Finding a session's transcript by its id, among the directories of `projects/`: the
//! directory's name is Claude Code's to choose, so it is never rebuilt from a cwd.

use std::ffi::OsStr;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use claude_peer_registry::ClaudeHome;
use rustix::fs::{AtFlags, CWD, Dir, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::Error;

/// Directory entries looked at per search, at most: `projects/` has one per project.
const MAX_ENTRIES: usize = 100_000;

/// The transcript of `session_id`: `<home>/projects/<dir>/<session_id>.jsonl`.
///
/// Only the one candidate name is looked at in each real directory of `projects/`
/// (symbolic links to directories are passed over; `projects/` itself is followed, like
/// the home). A candidate that is a symbolic link, not a regular file, or owned by
/// another user is an error ([`Error::NotOurs`]), not passed over: someone else's file
/// where this session's transcript belongs must not go unnoticed. When several
/// directories hold one (a session resumed elsewhere), the last modified is taken.
/// `Ok(None)` when there is none yet: a fresh session writes its transcript (and maybe
/// `projects/`) at its first message.
pub fn find(home: &ClaudeHome, session_id: &str) -> Result<Option<PathBuf>, Error> {
    check_session_id(session_id)?;
    Ok(locate(home, session_id, &mut |_| {})?.map(|found| found.path))
}

/// Refuses anything but ASCII letters, digits and `-`: the id becomes a file name.
pub(crate) fn check_session_id(session_id: &str) -> Result<(), Error> {
    let valid = !session_id.is_empty()
        && session_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(Error::SessionId(session_id.to_owned()))
    }
}

/// A transcript found, with the directory it was found in (opened without following a
/// link), so that it is opened where it was found.
#[derive(Debug)]
pub(crate) struct Found {
    pub(crate) path: PathBuf,
    pub(crate) dir: OwnedFd,
    pub(crate) name: String,
    stat: Stat,
}

/// Searches `projects/` as [`find`] does, calling `each_dir` with every real directory
/// before looking into it (so a watch on it misses nothing the search does not see).
pub(crate) fn locate(
    home: &ClaudeHome,
    session_id: &str,
    each_dir: &mut dyn FnMut(&Path),
) -> Result<Option<Found>, Error> {
    locate_within(home, session_id, each_dir, MAX_ENTRIES)
}

/// [`locate`], looking at no more than `max_entries` entries of `projects/`.
fn locate_within(
    home: &ClaudeHome,
    session_id: &str,
    each_dir: &mut dyn FnMut(&Path),
    max_entries: usize,
) -> Result<Option<Found>, Error> {
    let projects = home.projects_dir();
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let projects_fd = match rustix::fs::openat(CWD, &projects, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::NOTDIR) => {
            return Err(Error::NotOurs {
                path: projects,
                why: "not a directory".to_owned(),
            });
        }
        Err(err) => return Err(Error::io(projects, err)),
    };
    let name = format!("{session_id}.jsonl");
    let mut listing = Dir::read_from(&projects_fd).map_err(|err| Error::io(&projects, err))?;
    let mut best: Option<Found> = None;
    let mut seen = 0;
    while let Some(entry) = listing.read() {
        let entry = entry.map_err(|err| Error::io(&projects, err))?;
        seen += 1;
        if seen > max_entries {
            return Err(Error::io(
                projects,
                io::Error::other(format!(
                    "more than {max_entries} entries; not all were looked at"
                )),
            ));
        }
        let dir_name = OsStr::from_bytes(entry.file_name().to_bytes());
        if dir_name == "." || dir_name == ".." {
            continue;
        }
        if !matches!(entry.file_type(), FileType::Directory | FileType::Unknown) {
            continue;
        }
        let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let dir = match rustix::fs::openat(&projects_fd, dir_name, dir_flags, Mode::empty()) {
            Ok(dir) => dir,
            // Gone, not a directory, or a link: nothing of ours is in it.
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => continue,
            Err(err) => return Err(Error::io(projects.join(dir_name), err)),
        };
        let dir_path = projects.join(dir_name);
        each_dir(&dir_path);
        let path = dir_path.join(&name);
        let stat = match rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // None here, or a directory this user may not search (so not its own).
            Err(Errno::NOENT | Errno::ACCESS) => continue,
            Err(err) => return Err(Error::io(path, err)),
        };
        check_ours(&stat, &path)?;
        let modified = |stat: &Stat| (stat.st_mtime, stat.st_mtime_nsec);
        if best
            .as_ref()
            .is_none_or(|best| modified(&stat) > modified(&best.stat))
        {
            best = Some(Found {
                path,
                dir,
                name: name.clone(),
                stat,
            });
        }
    }
    Ok(best)
}

/// A regular file owned by this user, or [`Error::NotOurs`] saying what it is instead.
pub(crate) fn check_ours(stat: &Stat, path: &Path) -> Result<(), Error> {
    let not_ours = |why: String| {
        Err(Error::NotOurs {
            path: path.to_owned(),
            why,
        })
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::RegularFile => {}
        FileType::Symlink => return not_ours("a symbolic link".to_owned()),
        other => return not_ours(format!("not a regular file but a {other:?}")),
    }
    let me = rustix::process::geteuid().as_raw();
    if stat.st_uid != me {
        return not_ours(format!(
            "owned by uid {}, not by this user (uid {me})",
            stat.st_uid
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_projects_directory_too_large_to_search_is_an_error_not_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let home = ClaudeHome::new(dir.path());
        let projects = home.projects_dir();
        std::fs::create_dir(&projects).unwrap();
        for n in 0..10 {
            std::fs::create_dir(projects.join(n.to_string())).unwrap();
        }
        let mut dirs = 0;
        let found = locate_within(&home, "s", &mut |_| dirs += 1, 12).unwrap();
        assert!(
            found.is_none() && dirs == 10,
            "ten directories and . and .. are twelve"
        );
        let err = locate_within(&home, "s", &mut |_| {}, 11).unwrap_err();
        assert!(
            matches!(&err, Error::Io { path, .. } if *path == projects),
            "{err}"
        );
        assert!(err.to_string().contains("more than 11 entries"), "{err}");
    }

    #[test]
    fn only_letters_digits_and_dashes_make_a_session_id() {
        assert!(check_session_id("af4c64f8-b0e2-4e2b-95a9-0d7c5bfd95cd").is_ok());
        assert!(check_session_id("ABC-123").is_ok());
        for bad in ["", "..", "a/b", "a.jsonl", "a b", "é", "a\0b", "-/../x"] {
            assert!(
                matches!(check_session_id(bad), Err(Error::SessionId(id)) if id == bad),
                "{bad:?} is refused"
            );
        }
    }
}
