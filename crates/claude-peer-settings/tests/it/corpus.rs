//! Reads and updates of real files: bytes, modes, links, refusals, compare-and-swap.

use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::Path;

use claude_peer_settings::{Error, InboundPolicy, Revision, SettingsStore};
use serde_json::{Value, json};

use crate::common::{fixture, fixture_names, home_with, mode_of, revision_of, temps_in};

fn text(path: &Path) -> String {
    String::from_utf8(std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn every_corpus_file_keeps_every_other_byte_through_set_change_and_reset() {
    for name in fixture_names() {
        let original = fixture(&name);
        let (dir, path) = home_with(&original);
        let store = SettingsStore::new(&path);
        let had_key = store.read().unwrap().inbound.is_some();
        let mut parsed: Value = serde_json::from_slice(&original).unwrap();
        for policy in [
            InboundPolicy::Hold,
            InboundPolicy::Refuse,
            InboundPolicy::Accept,
        ] {
            let before = store.read().unwrap();
            let after = store.set_inbound(policy, Some(&before.revision)).unwrap();
            assert_eq!(
                after.inbound,
                Some(policy),
                "{name}: the value set is read back"
            );
            assert_eq!(
                store.read().unwrap(),
                after,
                "{name}: the snapshot is what the file holds"
            );
            let now: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            parsed["crossSessionInbound"] = json!(policy.as_str());
            assert_eq!(now, parsed, "{name}: every other member is unchanged");
        }
        if had_key {
            // The fixture that has the key holds "accept", the last value set above.
            assert_eq!(
                std::fs::read(&path).unwrap(),
                original,
                "{name}: back at its original value, the file is byte-identical"
            );
        } else {
            let reset = store.reset_inbound(None).unwrap();
            assert_eq!(reset.inbound, None);
            assert_eq!(
                std::fs::read(&path).unwrap(),
                original,
                "{name}: reset gives back the original bytes exactly"
            );
        }
        assert!(
            temps_in(dir.path()).is_empty(),
            "{name}: no temporary file remains"
        );
    }
}

#[test]
fn insertion_follows_the_files_own_layout() {
    let cases = [
        (
            "compact.json",
            r#"{"theme":"light","permissions":{"allow":["Bash(ls:*)"]},"includeCoAuthoredBy":false,"env":{"FOO":"1"},"crossSessionInbound":"hold"}"#,
        ),
        (
            "tabs.json",
            "{\n\t\"theme\": \"dark\",\n\t\"env\": {\n\t\t\"RUST_LOG\": \"debug\"\n\t},\n\t\"verbose\": true,\n\t\"crossSessionInbound\": \"hold\"\n}\n",
        ),
        (
            "crlf.json",
            "{\r\n    \"theme\": \"dark\",\r\n    \"statusLine\": {\r\n        \"type\": \"command\",\r\n        \"command\": \"~/.claude/status.sh\"\r\n    },\r\n    \"crossSessionInbound\": \"hold\"\r\n}\r\n",
        ),
        (
            "no-trailing-newline.json",
            "{\n  \"theme\": \"dark\",\n  \"autoUpdates\": false,\n  \"crossSessionInbound\": \"hold\"\n}",
        ),
        (
            "spaced.json",
            "{ \"theme\" : \"dark\" , \"a\" : [ 1 , 2 ], \"crossSessionInbound\" : \"hold\" }\n",
        ),
        (
            "empty-object.json",
            "{\n  \"crossSessionInbound\": \"hold\"\n}",
        ),
    ];
    for (name, expected) in cases {
        let (_dir, path) = home_with(&fixture(name));
        SettingsStore::new(&path)
            .set_inbound(InboundPolicy::Hold, None)
            .unwrap();
        assert_eq!(text(&path), expected, "{name}");
    }
}

#[test]
fn replacing_a_value_changes_only_its_bytes() {
    let (_dir, path) = home_with(&fixture("with-value.json"));
    SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Refuse, None)
        .unwrap();
    assert_eq!(
        text(&path),
        "{\n  \"theme\": \"dark\",\n  \"crossSessionInbound\": \"refuse\",\n  \"verbose\": true\n}\n"
    );
}

#[test]
fn setting_the_value_the_file_already_has_writes_nothing() {
    let (dir, path) = home_with(&fixture("with-value.json"));
    let inode = std::fs::metadata(&path).unwrap().ino();
    let snapshot = SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Accept, None)
        .unwrap();
    assert_eq!(
        snapshot.revision.as_str(),
        revision_of(&fixture("with-value.json"))
    );
    assert_eq!(
        std::fs::metadata(&path).unwrap().ino(),
        inode,
        "the file was not replaced"
    );
    assert!(temps_in(dir.path()).is_empty());
}

#[test]
fn a_missing_file_reads_as_empty_and_resetting_it_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    let store = SettingsStore::new(&path);
    let snapshot = store.read().unwrap();
    assert!(!snapshot.exists);
    assert_eq!(snapshot.revision.as_str(), revision_of(b""));
    assert_eq!(snapshot.inbound, None);
    let reset = store.reset_inbound(Some(&snapshot.revision)).unwrap();
    assert!(!reset.exists);
    assert!(!path.exists(), "resetting a missing file writes nothing");
}

#[test]
fn a_missing_home_directory_is_created_0700_and_a_new_file_0600() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("config").join("claude");
    let path = home.join("settings.json");
    let snapshot = SettingsStore::new(&path)
        .set_inbound(
            InboundPolicy::Hold,
            Some(&revision_of(b"").parse::<Revision>().unwrap()),
        )
        .unwrap();
    assert!(snapshot.exists);
    assert_eq!(mode_of(&home), 0o700);
    assert_eq!(mode_of(&path), 0o600);
    assert_eq!(text(&path), "{\n  \"crossSessionInbound\": \"hold\"\n}\n");
}

#[test]
fn the_files_mode_is_kept() {
    for mode in [0o600, 0o640, 0o644] {
        let (_dir, path) = home_with(&fixture("pretty.json"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        SettingsStore::new(&path)
            .set_inbound(InboundPolicy::Refuse, None)
            .unwrap();
        assert_eq!(mode_of(&path), mode, "mode {mode:o} is kept");
    }
}

#[test]
fn a_symlinked_settings_file_is_refused_and_its_target_stays_untouched() {
    let (dir, target) = home_with(&fixture("pretty.json"));
    let link = dir.path().join("linked.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let store = SettingsStore::new(&link);
    assert_eq!(
        store.read().unwrap().inbound,
        None,
        "reading follows the link, as Claude Code does"
    );
    let err = store.set_inbound(InboundPolicy::Hold, None).unwrap_err();
    assert_eq!(err.as_str(), "symlink");
    assert_eq!(
        err.to_string(),
        format!(
            "refusing to update `{}`: it is a symbolic link",
            link.display()
        )
    );
    assert_eq!(std::fs::read(&target).unwrap(), fixture("pretty.json"));
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(temps_in(dir.path()).is_empty());
}

#[test]
fn a_settings_path_that_is_a_directory_or_a_fifo_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let as_dir = dir.path().join("settings.json");
    std::fs::create_dir(&as_dir).unwrap();
    let err = SettingsStore::new(&as_dir)
        .set_inbound(InboundPolicy::Hold, None)
        .unwrap_err();
    assert_eq!(err.as_str(), "not_a_regular_file");
    assert!(err.to_string().contains("it is a directory"), "{err}");

    let fifo = dir.path().join("fifo.json");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let store = SettingsStore::new(&fifo);
    assert_eq!(
        store.read().unwrap_err().as_str(),
        "not_a_regular_file",
        "reading never blocks on a fifo"
    );
    assert_eq!(
        store
            .set_inbound(InboundPolicy::Hold, None)
            .unwrap_err()
            .as_str(),
        "not_a_regular_file"
    );
}

#[test]
fn a_settings_file_over_the_limit_is_refused_unread_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    // Sparse: 1 GiB that would take a second and a gigabyte of memory to read.
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(1 << 30).unwrap();
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let store = SettingsStore::new(&path);
    let err = store.read().unwrap_err();
    assert_eq!(err.as_str(), "too_large");
    assert!(
        err.to_string().contains(&path.display().to_string())
            && err
                .to_string()
                .contains("1073741824 bytes, over the 16777216 bytes"),
        "{err}"
    );
    let err = store.set_inbound(InboundPolicy::Hold, None).unwrap_err();
    assert_eq!(err.as_str(), "too_large");
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.len(), meta.modified().unwrap()), (1 << 30, modified));
    assert!(temps_in(dir.path()).is_empty());

    // The limit itself is read.
    let mut at_limit = b"{\"a\": \"".to_vec();
    let limit = 16 * 1024 * 1024;
    at_limit.resize(limit - 2, b'x');
    at_limit.extend_from_slice(b"\"}");
    std::fs::write(&path, &at_limit).unwrap();
    assert_eq!(store.read().unwrap().inbound, None);
}

#[test]
fn invalid_json_and_a_non_object_are_refused_with_the_file_unchanged() {
    for (bytes, kind, message_part) in [
        (
            &b"{\"theme\": \"dark\",}"[..],
            "invalid_json",
            "is not valid JSON: ",
        ),
        (
            &b"[\"crossSessionInbound\"]\n"[..],
            "not_an_object",
            "holds an array at the top level, not an object",
        ),
        (
            &b"\"hold\""[..],
            "not_an_object",
            "holds a string at the top level",
        ),
        (&b"{} trailing"[..], "invalid_json", "is not valid JSON"),
    ] {
        let (dir, path) = home_with(bytes);
        let store = SettingsStore::new(&path);
        for err in [
            store.read().unwrap_err(),
            store.set_inbound(InboundPolicy::Hold, None).unwrap_err(),
            store.reset_inbound(None).unwrap_err(),
        ] {
            assert_eq!(err.as_str(), kind);
            let message = err.to_string();
            assert!(message.contains(&path.display().to_string()), "{message}");
            assert!(message.contains(message_part), "{message}");
        }
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(temps_in(dir.path()).is_empty());
    }
}

#[test]
fn an_invalid_value_is_quoted_when_read_and_can_be_fixed_by_an_update() {
    let (_dir, path) = home_with(b"{\"crossSessionInbound\": \"allow\", \"a\": 1}");
    let store = SettingsStore::new(&path);
    let err = store.read().unwrap_err();
    assert_eq!(err.as_str(), "invalid_value");
    assert_eq!(
        err.to_string(),
        format!(
            "`{}`: crossSessionInbound is `\"allow\"`, expected \"accept\", \"hold\" or \"refuse\"",
            path.display()
        )
    );
    let (_dir2, path2) = home_with(b"{\"crossSessionInbound\": true}");
    assert!(
        SettingsStore::new(&path2)
            .read()
            .unwrap_err()
            .to_string()
            .contains("is `true`")
    );

    store.set_inbound(InboundPolicy::Hold, None).unwrap();
    assert_eq!(text(&path), "{\"crossSessionInbound\": \"hold\", \"a\": 1}");
}

#[test]
fn a_stale_expected_revision_is_a_conflict_and_nothing_is_written() {
    let (dir, path) = home_with(&fixture("pretty.json"));
    let store = SettingsStore::new(&path);
    let old = store.read().unwrap();
    std::fs::write(&path, fixture("compact.json")).unwrap();
    let err = store
        .set_inbound(InboundPolicy::Hold, Some(&old.revision))
        .unwrap_err();
    assert_eq!(err.as_str(), "conflict");
    let Error::Conflict {
        expected, found, ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(expected, &old.revision);
    assert_eq!(found.as_str(), revision_of(&fixture("compact.json")));
    assert_eq!(std::fs::read(&path).unwrap(), fixture("compact.json"));
    assert!(temps_in(dir.path()).is_empty());
}

#[test]
fn duplicate_keys_are_read_as_the_last_and_reset_removes_them_all() {
    let (_dir, path) = home_with(
        b"{\"crossSessionInbound\": \"refuse\", \"a\": 1, \"crossSessionInbound\": \"accept\"}",
    );
    let store = SettingsStore::new(&path);
    assert_eq!(store.read().unwrap().inbound, Some(InboundPolicy::Accept));
    store.set_inbound(InboundPolicy::Hold, None).unwrap();
    assert_eq!(
        text(&path),
        "{\"crossSessionInbound\": \"refuse\", \"a\": 1, \"crossSessionInbound\": \"hold\"}"
    );
    store.reset_inbound(None).unwrap();
    assert_eq!(text(&path), "{\"a\": 1}");
}
