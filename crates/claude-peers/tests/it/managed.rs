//! A managed drop-in that refuses messages (`managed-settings.d/50-policy.json` beside a
//! managed settings file holding `{}`) is the policy for `settings effective`, the gate of
//! `send` and `doctor` alike, each naming the drop-in.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use claude_peer_testkit::home::TempHome;

use crate::receiver::{Receiver, claude, parsed};
use crate::support::CommandHome as _;

/// Writes `dir/<file>` holding `{}` and `dir/managed-settings.d/50-policy.json` refusing
/// messages; gives the file and the drop-in.
fn refusing_drop_in(dir: &Path, file: &str) -> (PathBuf, PathBuf) {
    let managed = dir.join(file);
    fs::write(&managed, "{}").unwrap();
    fs::create_dir(dir.join("managed-settings.d")).unwrap();
    let drop_in = dir.join("managed-settings.d/50-policy.json");
    fs::write(&drop_in, r#"{"crossSessionInbound":"refuse"}"#).unwrap();
    (managed, drop_in)
}

#[test]
fn settings_effective_is_refuse_decided_by_the_managed_drop_in() {
    let home = TempHome::new().unwrap();
    fs::write(
        home.root().join("settings.json"),
        r#"{"crossSessionInbound":"accept"}"#,
    )
    .unwrap();
    let etc = tempfile::tempdir().unwrap();
    let (managed, drop_in) = refusing_drop_in(etc.path(), "managed-settings.json");
    let project = tempfile::tempdir().unwrap();
    let args = [
        "settings",
        "effective",
        "--cwd",
        project.path().to_str().unwrap(),
        "--managed-settings",
        managed.to_str().unwrap(),
    ];

    let (code, json, stderr) = home.json(&args);

    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        (&json["value"], &json["decided_by"], &json["complete"]),
        (
            &"refuse".into(),
            &"managed".into(),
            &serde_json::Value::Bool(true)
        ),
        "{json:#}"
    );
    let layer = &json["layers"][0];
    assert_eq!(layer["path"], drop_in.to_str().unwrap(), "{layer:#}");
    let documents: Vec<&str> = layer["documents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        documents,
        [managed.to_str().unwrap(), drop_in.to_str().unwrap()]
    );

    let text = String::from_utf8(home.run(&args).stdout).unwrap();
    assert!(
        text.starts_with(&format!(
            "effective crossSessionInbound: refuse (decided by its managed settings `{}`)",
            drop_in.display()
        )),
        "{text}"
    );
}

#[test]
fn send_to_a_session_a_managed_drop_in_refuses_is_refused_before_a_sender_starts() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    // `Receiver::send` names `no-managed-settings.json` in the cache with
    // --managed-settings; the drop-in folder is beside it.
    let (_, drop_in) = refusing_drop_in(cache.path(), "no-managed-settings.json");

    let (code, json, stderr) = receiver.send(cache.path(), "refused by policy", &[]);

    assert_eq!(code, 3, "{json} {stderr}");
    assert_eq!(json["refusal"], "inbound_refused", "{json}");
    let message = json["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("its managed settings `{}`", drop_in.display())),
        "{message}"
    );
    assert!(
        !cache.path().join("claude-peers").exists(),
        "no sender was prepared, let alone started"
    );
    let transcript = serde_json::to_string(&receiver.transcript()).unwrap();
    assert!(!transcript.contains("refused by policy"));
}

#[test]
fn doctor_fails_inbound_naming_the_managed_drop_in() {
    let receiver = Receiver::start(Some("accept"), &[]);
    let cache = tempfile::tempdir().unwrap();
    let (managed, drop_in) = refusing_drop_in(cache.path(), "managed-settings.json");
    let pinned = claude();

    let output = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .arg("--home")
        .arg(receiver.home.path())
        .args(["--json", "doctor", &receiver.session_id, "--claude"])
        .arg(&pinned)
        .arg("--managed-settings")
        .arg(&managed)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", cache.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (code, report, stderr) = parsed(&output);

    assert_eq!(code, 1, "{report:#} {stderr}");
    let checks = report["checks"].as_array().unwrap();
    let failed: Vec<&str> = checks
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["check"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["inbound"], "{report:#}");
    let detail = |name: &str| {
        checks.iter().find(|c| c["check"] == name).unwrap()["detail"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let inbound = detail("inbound");
    assert!(
        inbound.contains("`refuse`")
            && inbound.contains(&format!("its managed settings `{}`", drop_in.display())),
        "{inbound}"
    );
    let hooks = detail("hooks");
    assert!(
        hooks.contains(&drop_in.display().to_string()) && hooks.contains("leave hooks on"),
        "both documents were read: {hooks}"
    );
}
