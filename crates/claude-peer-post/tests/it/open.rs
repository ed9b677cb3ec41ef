//! Opening a store: what is created, and every file that is refused by name, untouched.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use claude_peer_post::{Error, Store};

use crate::{NOW, message};

/// A private base directory (0700, ours) and the store path below it.
fn place() -> (tempfile::TempDir, PathBuf) {
    let base = tempfile::tempdir().unwrap();
    fs::set_permissions(base.path(), fs::Permissions::from_mode(0o700)).unwrap();
    let path = base.path().join("state/claude-peers/post.db");
    (base, path)
}

/// Opens `path`, which must be refused as `kind`, naming `path`; the file's bytes are
/// the same after.
fn refused(path: &Path, kind: &str) -> Error {
    let before = fs::read(path).ok();
    let err = Store::open(path).unwrap_err();
    assert_eq!(err.as_str(), kind, "{err}");
    let named = path.file_name().unwrap().to_str().unwrap();
    assert!(err.to_string().contains(named), "names the file: {err}");
    assert_eq!(fs::read(path).ok(), before, "the file is untouched");
    err
}

#[test]
fn a_new_store_is_created_0600_in_private_directories_and_reopens_with_what_it_holds() {
    let (_base, path) = place();
    let id = {
        let mut store = Store::open(&path).unwrap();
        store
            .post(&message("reviewer", "hi"), NOW)
            .unwrap()
            .message
            .id
    };
    let mode = |p: &Path| fs::symlink_metadata(p).unwrap().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
    assert_eq!(mode(path.parent().unwrap().parent().unwrap()), 0o700);
    let store = Store::open(&path).unwrap();
    let again = store.get(&id).unwrap().unwrap();
    assert_eq!((again.text.as_str(), again.timeline.len()), ("hi", 1));
}

#[test]
fn a_directory_others_may_write_on_the_way_is_refused_by_name() {
    let (base, path) = place();
    let open = base.path().join("state");
    fs::create_dir(&open).unwrap();
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.as_str(), "store_dir_unsafe", "{err}");
    assert!(
        err.to_string().contains(&format!(
            "`{}` may be written by other users",
            open.display()
        )),
        "{err}"
    );
    assert!(!path.exists(), "nothing is created below it");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_by_name_and_left_untouched() {
    let (_base, path) = place();
    Store::open(&path).unwrap();
    for bytes in [
        &b"{\"not\": \"a database\"}\n"[..],
        &[0_u8; 4096][..],
        b"SQLite format 3",
    ] {
        fs::write(&path, bytes).unwrap();
        let err = refused(&path, "not_a_store");
        assert!(err.to_string().contains("not an SQLite database"), "{err}");
    }
}

#[test]
fn another_programs_sqlite_database_is_refused_and_left_untouched() {
    let (_base, path) = place();
    Store::open(&path).unwrap();
    fs::remove_file(&path).unwrap();
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine');")
        .unwrap();
    drop(other);
    let err = refused(&path, "not_a_store");
    assert!(
        err.to_string()
            .contains("another program's SQLite database"),
        "{err}"
    );
}

#[test]
fn a_truncated_store_is_refused_and_left_untouched() {
    let (_base, path) = place();
    {
        let mut store = Store::open(&path).unwrap();
        for n in 0..200 {
            store
                .post(
                    &message("reviewer", &format!("message {n} {}", "x".repeat(500))),
                    NOW,
                )
                .unwrap();
        }
    }
    let len = fs::metadata(&path).unwrap().len();
    assert!(len > 8192, "the store has pages to lose: {len}");
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    let err = refused(&path, "store_truncated");
    assert!(
        err.to_string().contains(&format!("{} bytes", len / 2)),
        "{err}"
    );
}

#[test]
fn a_store_of_a_newer_schema_is_refused_and_never_rewritten() {
    let (_base, path) = place();
    Store::open(&path).unwrap();
    let newer = rusqlite::Connection::open(&path).unwrap();
    newer.pragma_update(None, "user_version", 99).unwrap();
    newer.pragma_update(None, "journal_mode", "DELETE").unwrap();
    drop(newer);
    let err = refused(&path, "store_newer");
    assert!(err.to_string().contains("schema version 99"), "{err}");
}

#[test]
fn a_link_or_a_directory_in_place_of_the_store_is_refused() {
    let (base, path) = place();
    Store::open(&path).unwrap();
    fs::remove_file(&path).unwrap();
    let elsewhere = base.path().join("elsewhere.db");
    fs::write(&elsewhere, b"").unwrap();
    symlink(&elsewhere, &path).unwrap();
    refused(&path, "not_a_store");
    assert_eq!(
        fs::read(&elsewhere).unwrap(),
        b"",
        "the link's target is untouched"
    );
    fs::remove_file(&path).unwrap();
    fs::create_dir(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert_eq!(err.as_str(), "not_a_store", "{err}");
}

#[test]
fn a_store_in_an_existing_directory_of_the_users_leaves_its_mode_alone() {
    let (base, _) = place();
    let mine = base.path().join("mine");
    fs::create_dir(&mine).unwrap();
    fs::set_permissions(&mine, fs::Permissions::from_mode(0o755)).unwrap();
    Store::open(&mine.join("post.db")).unwrap();
    let mode = |p: &Path| fs::symlink_metadata(p).unwrap().mode() & 0o777;
    assert_eq!(
        mode(&mine),
        0o755,
        "readable by others as before, writable by no one else"
    );
    assert_eq!(mode(&mine.join("post.db")), 0o600);
}
