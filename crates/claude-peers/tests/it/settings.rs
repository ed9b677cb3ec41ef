//! `settings`: read, set, reset, conflicts, invalid files, effective policy.

use std::fs;

use claude_peer_testkit::home::TempHome;

use crate::support::{CommandHome as _, redact_json};

#[test]
fn settings_read_set_and_reset_keep_every_other_byte() {
    let home = TempHome::new().unwrap();
    let original = "{\n    \"theme\": \"dark\",\n    \"permissions\": {\"allow\": [\"Bash(ls)\"]},\n    \"n\": 1.0e3\n}";
    fs::write(home.root().join("settings.json"), original).unwrap();
    let (code, before, _) = home.json(&["settings"]);
    assert_eq!(code, 0);
    assert_eq!(before["cross_session_inbound"], serde_json::Value::Null);
    let rev = before["revision"].as_str().unwrap().to_owned();
    let (code, after, _) = home.json(&["settings", "set", "hold", "--expect-revision", &rev]);
    assert_eq!(code, 0);
    assert_eq!(after["cross_session_inbound"], "hold");
    assert_eq!(
        fs::read_to_string(home.root().join("settings.json")).unwrap(),
        "{\n    \"theme\": \"dark\",\n    \"permissions\": {\"allow\": [\"Bash(ls)\"]},\n    \"n\": 1.0e3,\n    \"crossSessionInbound\": \"hold\"\n}"
    );
    let (code, reset, _) = home.json(&["settings", "reset"]);
    assert_eq!(code, 0);
    assert_eq!(
        reset["revision"], before["revision"],
        "reset gives back the original bytes"
    );
    assert_eq!(
        fs::read_to_string(home.root().join("settings.json")).unwrap(),
        original
    );
    let mut shape = after;
    redact_json(&mut shape, home.root(), &[]);
    insta::assert_json_snapshot!(shape, @r#"
    {
      "path": "[HOME]/settings.json",
      "revision": "[revision]",
      "cross_session_inbound": "hold"
    }
    "#);
}

#[test]
fn a_stale_revision_is_a_conflict_with_exit_4_and_nothing_written() {
    let home = TempHome::new().unwrap();
    fs::write(home.root().join("settings.json"), "{}").unwrap();
    let (_, before, _) = home.json(&["settings"]);
    fs::write(home.root().join("settings.json"), "{\"theme\":\"light\"}").unwrap();
    let rev = before["revision"].as_str().unwrap();
    let (code, json, _) = home.json(&["settings", "set", "accept", "--expect-revision", rev]);
    assert_eq!(code, 4);
    assert_eq!(json["error"], "conflict");
    assert_eq!(
        fs::read_to_string(home.root().join("settings.json")).unwrap(),
        "{\"theme\":\"light\"}"
    );
    let (code, _, _) = home.json(&["settings", "reset", "--expect-revision", rev]);
    assert_eq!(code, 4);
}

#[test]
fn an_invalid_settings_file_exits_1_naming_the_path_and_stays_untouched() {
    let home = TempHome::new().unwrap();
    for bad in ["{\"theme\": ", "[1, 2]"] {
        fs::write(home.root().join("settings.json"), bad).unwrap();
        for args in [&["settings"][..], &["settings", "set", "refuse"][..]] {
            let (code, json, stderr) = home.json(args);
            assert_eq!(code, 1, "{bad} {args:?}");
            let message = json["message"].as_str().unwrap();
            assert!(
                message.contains("settings.json"),
                "names the path: {message}"
            );
            assert!(stderr.contains("settings.json"));
            assert_eq!(
                fs::read_to_string(home.root().join("settings.json")).unwrap(),
                bad
            );
        }
    }
}

#[test]
fn effective_reports_every_layer_and_that_a_settings_flag_cannot_be_seen() {
    let home = TempHome::new().unwrap();
    let project = tempfile::tempdir().unwrap();
    fs::create_dir_all(project.path().join(".claude")).unwrap();
    fs::write(
        project.path().join(".claude/settings.json"),
        r#"{"crossSessionInbound":"refuse"}"#,
    )
    .unwrap();
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"accept"}"#,
    )
    .unwrap();
    let managed = home.root().join("managed-settings.json");
    let args = [
        "settings",
        "effective",
        "--cwd",
        project.path().to_str().unwrap(),
        "--managed-settings",
        managed.to_str().unwrap(),
    ];
    let (code, json, _) = home.json(&args);
    assert_eq!(code, 0);
    assert_eq!(
        json["value"], "refuse",
        "a project layer can make it stricter"
    );
    assert_eq!(json["decided_by"], "project");
    assert_eq!(json["layers"].as_array().unwrap().len(), 4);
    assert!(json["note"].as_str().unwrap().contains("--settings"));
    let out = home.run(&args);
    let text = String::from_utf8(out.stdout)
        .unwrap()
        .replace(home.root().to_str().unwrap(), "[HOME]")
        .replace(project.path().to_str().unwrap(), "[PROJECT]");
    insta::assert_snapshot!("effective_human", text);
}

#[test]
fn an_invalid_policy_value_is_an_error_to_read_and_a_valid_set_repairs_it() {
    let home = TempHome::new().unwrap();
    let bad = "{\"crossSessionInbound\": \"sometimes\", \"theme\": \"dark\"}";
    fs::write(home.root().join("settings.json"), bad).unwrap();
    let (code, json, _) = home.json(&["settings"]);
    assert_eq!(code, 1);
    assert!(
        json["message"].as_str().unwrap().contains("\"sometimes\""),
        "quotes the value: {json}"
    );
    assert_eq!(
        fs::read_to_string(home.root().join("settings.json")).unwrap(),
        bad
    );
    let (code, json, _) = home.json(&["settings", "set", "refuse"]);
    assert_eq!(code, 0);
    assert_eq!(json["cross_session_inbound"], "refuse");
    assert_eq!(
        fs::read_to_string(home.root().join("settings.json")).unwrap(),
        "{\"crossSessionInbound\": \"refuse\", \"theme\": \"dark\"}"
    );
}
