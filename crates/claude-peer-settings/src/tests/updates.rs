//! Updates of real files that only the crate's own seams reach: the generic key edit, the
//! fixed temporary file, the lock file.

use std::os::unix::fs::PermissionsExt as _;

use serde_json::json;

use super::{fixture, home_with, mode_of, remove_key, set_key, temps_in};
use crate::{InboundPolicy, Revision, SettingsStore};

#[test]
fn the_generic_key_edit_keeps_nested_values_in_the_files_indentation() {
    let (_dir, path) = home_with(&fixture("tabs.json"));
    set_key(&path, "permissions", &json!({"allow": ["Read"]})).unwrap();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "{\n\t\"theme\": \"dark\",\n\t\"env\": {\n\t\t\"RUST_LOG\": \"debug\"\n\t},\n\t\"verbose\": true,\n\t\"permissions\": {\n\t\t\"allow\": [\n\t\t\t\"Read\"\n\t\t]\n\t}\n}\n"
    );
    remove_key(&path, "permissions").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), fixture("tabs.json"));
}

#[test]
fn a_temporary_file_left_by_a_killed_writer_is_replaced_and_never_read() {
    let (dir, path) = home_with(&fixture("pretty.json"));
    let temp = dir.path().join(".settings.json.claude-peers.tmp");
    std::fs::write(
        &temp,
        b"{\"crossSessionInbound\": \"accept\", \"left\": \"over\"}",
    )
    .unwrap();
    std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o666)).unwrap();
    let store = SettingsStore::new(&path);
    assert_eq!(
        store.read().unwrap().inbound,
        None,
        "a temporary file is never read as settings"
    );
    let after = store.set_inbound(InboundPolicy::Refuse, None).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(after.revision, Revision::of(&bytes));
    assert!(!String::from_utf8(bytes).unwrap().contains("left"));
    assert_eq!(
        mode_of(&path),
        0o644,
        "the settings file's own mode, not the left-over's"
    );
    assert!(temps_in(dir.path()).is_empty());
}

#[test]
fn a_link_planted_at_the_temporary_name_is_removed_not_followed() {
    let (dir, path) = home_with(&fixture("pretty.json"));
    let target = dir.path().join("precious");
    std::fs::write(&target, b"precious bytes").unwrap();
    let temp = dir.path().join(".settings.json.claude-peers.tmp");
    std::os::unix::fs::symlink(&target, &temp).unwrap();
    SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Hold, None)
        .unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), b"precious bytes");
    assert!(
        !std::fs::symlink_metadata(&path)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the settings file is the file written, not the link"
    );
    assert!(std::fs::read_to_string(&path).unwrap().contains("\"hold\""));
    assert!(temps_in(dir.path()).is_empty());

    // A dangling link is no different.
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &temp).unwrap();
    SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Refuse, None)
        .unwrap();
    assert!(!dir.path().join("nowhere").exists());
    assert!(temps_in(dir.path()).is_empty());
}

#[test]
fn a_directory_at_the_temporary_name_fails_the_update_and_leaves_the_file_untouched() {
    let (dir, path) = home_with(&fixture("pretty.json"));
    std::fs::create_dir(dir.path().join(".settings.json.claude-peers.tmp")).unwrap();
    let err = SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Hold, None)
        .unwrap_err();
    assert_eq!(err.as_str(), "write_failed");
    assert!(
        err.to_string().contains(".settings.json.claude-peers.tmp"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), fixture("pretty.json"));
}

#[test]
fn what_the_lock_file_holds_never_spares_the_validation() {
    let invalid = b"{\"a\": tru, \"crossSessionInbound\": \"hold\"}";
    let (dir, path) = home_with(invalid);
    let lock = dir.path().join(".settings.json.claude-peers.lock");
    std::fs::write(&lock, format!("{}\n", Revision::of(invalid))).unwrap();
    let err = SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Refuse, None)
        .unwrap_err();
    assert_eq!(err.as_str(), "invalid_json", "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), invalid);
    assert!(lock.exists(), "the lock file is left in place");
}
