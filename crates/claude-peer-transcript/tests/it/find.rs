//! Finding a transcript by session id.

use std::fs;
use std::os::unix::fs::symlink;

use claude_peer_registry::ClaudeHome;
use claude_peer_transcript::{Error, find};
use rustix::fs::{CWD, FileType, Mode};

use crate::{CWD_DIR, Home, SESSION, append};

#[test]
fn a_transcript_is_found_by_session_id_in_whichever_directory_holds_it() {
    let home = Home::with_project();
    assert_eq!(find(&home.home, SESSION).unwrap(), None, "none yet");
    append(&home.transcript(), b"{}\n");
    let other = home.home.projects_dir().join("-elsewhere");
    append(&other.join("0000-other-session.jsonl"), b"{}\n");
    assert_eq!(find(&home.home, SESSION).unwrap(), Some(home.transcript()));
}

#[test]
fn a_home_without_projects_or_without_anything_has_no_transcript() {
    let home = Home::empty();
    assert_eq!(find(&home.home, SESSION).unwrap(), None);
    let nowhere = ClaudeHome::new(home.home.root().join("missing"));
    assert_eq!(find(&nowhere, SESSION).unwrap(), None);
}

#[test]
fn a_session_id_that_could_name_another_file_is_refused() {
    let home = Home::with_project();
    for bad in ["", "../x", "a/b", "a.b", "a b", "*"] {
        let err = find(&home.home, bad).unwrap_err();
        assert!(
            matches!(&err, Error::SessionId(id) if id == bad),
            "{bad:?}: {err}"
        );
        assert_eq!(err.as_str(), "session_id");
    }
}

#[test]
fn a_symlinked_project_directory_is_not_looked_in() {
    let home = Home::empty();
    let real = home.home.root().join("real");
    fs::create_dir_all(&real).unwrap();
    fs::create_dir_all(home.home.projects_dir()).unwrap();
    append(&real.join(format!("{SESSION}.jsonl")), b"{}\n");
    symlink(&real, home.home.projects_dir().join(CWD_DIR)).unwrap();
    assert_eq!(find(&home.home, SESSION).unwrap(), None);
}

#[test]
fn a_symlink_or_a_fifo_where_the_transcript_belongs_is_not_ours() {
    let home = Home::with_project();
    let elsewhere = home.home.root().join("elsewhere.jsonl");
    append(&elsewhere, b"{}\n");
    symlink(&elsewhere, home.transcript()).unwrap();
    let err = find(&home.home, SESSION).unwrap_err();
    assert!(
        matches!(&err, Error::NotOurs { path, .. } if *path == home.transcript()),
        "{err}"
    );
    assert_eq!(err.as_str(), "not_ours");

    fs::remove_file(home.transcript()).unwrap();
    rustix::fs::mknodat(
        CWD,
        home.transcript(),
        FileType::Fifo,
        Mode::RUSR | Mode::WUSR,
        0,
    )
    .unwrap();
    let err = find(&home.home, SESSION).unwrap_err();
    assert!(
        matches!(err, Error::NotOurs { .. }),
        "a fifo is no transcript: {err}"
    );
}

#[test]
fn a_transcript_owned_by_another_user_is_not_ours() {
    let home = Home::with_project();
    append(&home.transcript(), b"{}\n");
    let me = rustix::process::geteuid();
    let other = rustix::process::Uid::from_raw(me.as_raw().wrapping_add(1));
    if rustix::fs::chown(home.transcript(), Some(other), None).is_err() {
        // Only root can give a file away: as anyone else there is nothing to check.
        assert!(!me.is_root(), "root can give a file away");
        return;
    }
    let err = find(&home.home, SESSION).unwrap_err();
    assert!(
        matches!(&err, Error::NotOurs { why, .. } if why.contains("owned by uid")),
        "{err}"
    );
}

#[test]
fn the_most_recently_written_of_two_transcripts_is_taken() {
    let home = Home::with_project();
    let older = home
        .home
        .projects_dir()
        .join("-elsewhere")
        .join(format!("{SESSION}.jsonl"));
    append(&older, b"{}\n");
    append(&home.transcript(), b"{}\n");
    let old = fs::File::options().write(true).open(&older).unwrap();
    old.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
    assert_eq!(find(&home.home, SESSION).unwrap(), Some(home.transcript()));
}
