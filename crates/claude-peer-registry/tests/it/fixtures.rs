//! Every record written by a real Claude Code process parses, and its parse is pinned.

use claude_peer_registry::{Activity, EntryName, Kind, NameSource, Record, classify_entry_name};

/// The repo's copy of the real records, embedded at compile time (this crate does no IO).
const REAL_RECORDS: &[(&str, &str, &[u8])] = &[
    (
        "2.1.197-idle",
        "9242.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.197-idle/sessions/9242.json"),
    ),
    (
        "2.1.332-cleared",
        "9959.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-cleared/sessions/9959.json"),
    ),
    (
        "2.1.332-crashed",
        "3839.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-crashed/sessions/3839.json"),
    ),
    (
        "2.1.332-crashed",
        "9959.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-crashed/sessions/9959.json"),
    ),
    (
        "2.1.332-idle",
        "3839.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-idle/sessions/3839.json"),
    ),
    (
        "2.1.332-renamed",
        "9959.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-renamed/sessions/9959.json"),
    ),
    (
        "2.1.332-two-live",
        "3839.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-two-live/sessions/3839.json"),
    ),
    (
        "2.1.332-two-live",
        "9959.json",
        include_bytes!("../../../../fixtures/claude-code-real/2.1.332-two-live/sessions/9959.json"),
    ),
];

fn parse_real(folder: &str, file: &str) -> Record {
    let (_, _, bytes) = REAL_RECORDS
        .iter()
        .find(|(f, n, _)| *f == folder && *n == file)
        .expect("fixture is listed");
    let EntryName::Record(pid) = classify_entry_name(file.as_ref()) else {
        panic!("{file} is a record name");
    };
    Record::parse(pid, bytes).unwrap_or_else(|err| panic!("{folder}/{file} must parse: {err}"))
}

#[test]
fn every_real_record_parses_and_its_parse_is_pinned() {
    for (folder, file, _) in REAL_RECORDS {
        let record = parse_real(folder, file);
        insta::assert_debug_snapshot!(format!("{folder}__{file}"), record);
    }
}

#[test]
fn every_real_record_serializes_back_to_the_same_json_value() {
    for (folder, file, bytes) in REAL_RECORDS {
        let record = parse_real(folder, file);
        let original: serde_json::Value = serde_json::from_slice(bytes).unwrap();
        let mut again: serde_json::Value = serde_json::from_str(&record.to_json()).unwrap();
        // `asksForConvertedSkills: null` carries nothing and is not written back.
        let mut original = original;
        original
            .as_object_mut()
            .unwrap()
            .remove("asksForConvertedSkills");
        again
            .as_object_mut()
            .unwrap()
            .remove("asksForConvertedSkills");
        assert_eq!(
            again, original,
            "{folder}/{file} must keep every field it had"
        );
    }
}

#[test]
fn the_old_version_has_no_domain_and_no_socket_but_is_still_a_full_record() {
    let record = parse_real("2.1.197-idle", "9242.json");
    assert_eq!(record.pid_domain, None);
    assert_eq!(record.messaging_socket_path, None);
    assert_eq!(record.proc_start.as_deref(), Some("67117"));
    assert_eq!(record.activity(), Some(Activity::Idle));
    assert_eq!(record.name_source, Some(NameSource::Derived));
}

#[test]
fn a_session_without_a_status_yet_has_no_activity() {
    let record = parse_real("2.1.332-two-live", "9959.json");
    assert_eq!(record.status, None);
    assert_eq!(record.activity(), None);
    assert_eq!(record.name.as_deref(), Some("reviewer"));
    assert_eq!(record.kind, Some(Kind::Interactive));
}

#[test]
fn a_rename_keeps_the_former_name_and_a_clear_changes_only_the_session_id() {
    let renamed = parse_real("2.1.332-renamed", "9959.json");
    let cleared = parse_real("2.1.332-cleared", "9959.json");
    let former = renamed.former_names.as_deref().unwrap_or_default();
    assert_eq!(former.len(), 1);
    assert_eq!(former[0].name, "reviewer");
    assert_eq!(renamed.name_source, Some(NameSource::User));
    assert_ne!(
        renamed.session_id, cleared.session_id,
        "/clear gives a new session id"
    );
    assert_eq!(
        renamed.proc_start, cleared.proc_start,
        "/clear keeps the same process"
    );
}
