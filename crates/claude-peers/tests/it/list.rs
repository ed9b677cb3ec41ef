//! `list` and `show`, human and JSON, on empty, live and leftover registries.

use std::process::Command;

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::Sleeper;

use crate::support::{CommandHome as _, assert_aligned, redact_json};

#[test]
fn a_machine_without_sessions_says_so_plainly() {
    let home = TempHome::without_registry().unwrap();
    let out = home.run(&["list"]);
    assert_eq!(out.status.code(), Some(0));
    let text = home.redact(&String::from_utf8(out.stdout).unwrap(), &[]);
    insta::assert_snapshot!(text, @"No Claude Code sessions: [HOME]/sessions does not exist.");
    let (code, json, _) = home.json(&["list"]);
    assert_eq!((code, json), (0, serde_json::json!([])));

    let home = TempHome::new().unwrap();
    let out = home.run(&["list"]);
    let text = home.redact(&String::from_utf8(out.stdout).unwrap(), &[]);
    insta::assert_snapshot!(text, @"No live Claude Code sessions (registry: [HOME]/sessions).");
}

/// Two live sessions (one addressable), a crashed leftover and a rejected name.
fn busy_home() -> (TempHome, Sleeper, Sleeper) {
    let mut home = TempHome::new().unwrap();
    let (reviewer, builder) = (Sleeper::spawn().unwrap(), Sleeper::spawn().unwrap());
    home.live_record(
        &reviewer,
        "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57",
        "reviewer",
        "idle",
        true,
    );
    home.live_record(
        &builder,
        "75c834bc-f549-4085-a152-f9973dc50b30",
        "builder",
        "shell",
        false,
    );
    home.copy_fixture("2.1.332-crashed", "3839.json");
    home.write_entry("007.json", "{}").unwrap();
    (home, reviewer, builder)
}

#[test]
fn list_json_prints_every_documented_key_for_each_live_session_sorted_by_pid() {
    let (home, a, b) = busy_home();
    let (code, mut json, stderr) = home.json(&["list"]);
    assert_eq!(code, 0, "{stderr}");
    let sessions = json.as_array().unwrap();
    assert_eq!(
        sessions.len(),
        2,
        "the leftover and the rejected name are not live"
    );
    let pids: Vec<u64> = sessions
        .iter()
        .map(|s| s["pid"].as_u64().unwrap())
        .collect();
    assert!(
        pids.windows(2).all(|w| w[0] < w[1]),
        "sorted by pid: {pids:?}"
    );
    let builder = sessions.iter().find(|s| s["name"] == "builder").unwrap();
    assert_eq!(builder["status"], "busy", "shell is reported as busy");
    assert_eq!(
        builder["vendor_status"], "shell",
        "the raw spelling is kept"
    );
    let mut pids = [a.pid(), b.pid()];
    pids.sort_unstable();
    redact_json(&mut json, home.root(), &pids);
    insta::assert_json_snapshot!("list_live", json);
}

#[test]
fn list_json_keys_come_in_the_documented_order() {
    let (home, _a, _b) = busy_home();
    let out = home.run(&["--json", "list"]);
    let text = String::from_utf8(out.stdout).unwrap();
    let first = &text[..text.find('}').unwrap()];
    let keys = [
        "file",
        "pid",
        "session_id",
        "name",
        "name_source",
        "cwd",
        "kind",
        "entrypoint",
        "version",
        "status",
        "vendor_status",
        "waiting_for",
        "started_at_ms",
        "updated_at_ms",
        "status_updated_at_ms",
        "tmux",
        "socket_path",
        "addressable",
        "liveness",
        "reason",
    ];
    let positions: Vec<usize> = keys
        .iter()
        .map(|k| {
            first
                .find(&format!("\"{k}\":"))
                .unwrap_or_else(|| panic!("key {k} present"))
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "documented order: {first}"
    );
}

#[test]
fn list_all_gives_every_record_its_verdict_and_reason() {
    let (home, a, b) = busy_home();
    let (code, mut json, _) = home.json(&["list", "--all"]);
    assert_eq!(code, 0);
    let verdicts: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["liveness"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts.iter().filter(|v| **v == "live").count(), 2);
    assert!(
        verdicts.contains(&"gone") && verdicts.contains(&"invalid"),
        "{verdicts:?}"
    );
    let mut pids = [a.pid(), b.pid()];
    pids.sort_unstable();
    redact_json(&mut json, home.root(), &pids);
    // Sorted by pid, the fixture's leftover lands anywhere among the children: pin the
    // contents in a stable order (the pid order is checked above).
    json.as_array_mut()
        .unwrap()
        .sort_by_key(|s| s["file"].as_str().unwrap().to_owned());
    insta::assert_json_snapshot!("list_all", json);
}

#[test]
fn the_human_list_is_an_aligned_table_without_colour_off_a_terminal() {
    let (home, a, b) = busy_home();
    let mut pids = [a.pid(), b.pid()];
    pids.sort_unstable();
    let out = home.run(&["list"]);
    let raw = String::from_utf8(out.stdout).unwrap();
    assert!(!raw.contains('\x1b'), "no escape codes off a terminal");
    assert_aligned(&raw);
    insta::assert_snapshot!("human_list", home.redact(&raw, &pids));
    let out = home.run(&["list", "--all"]);
    let raw = String::from_utf8(out.stdout).unwrap();
    assert_aligned(&raw);
    // Rows follow pids, which vary from run to run: pin them in a stable order.
    let redacted = home.redact(&raw, &pids);
    let mut lines: Vec<&str> = redacted.lines().collect();
    let last = lines.len() - 1;
    lines[1..last].sort_unstable();
    insta::assert_snapshot!("human_list_all", lines.join("\n"));
}

#[test]
fn show_finds_a_session_by_id_or_name_and_prints_it_in_full() {
    let (home, a, _b) = busy_home();
    let (code, mut by_name, _) = home.json(&["show", "reviewer"]);
    assert_eq!(code, 0);
    let (_, by_id, _) = home.json(&["show", "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57"]);
    assert_eq!(by_name, by_id);
    assert_eq!(by_name["peer_features"], serde_json::json!(["notify_idle"]));
    redact_json(&mut by_name, home.root(), &[a.pid()]);
    insta::assert_json_snapshot!("show_json", by_name);
    let out = home.run(&["show", "reviewer"]);
    insta::assert_snapshot!(
        "show_human",
        home.redact(&String::from_utf8(out.stdout).unwrap(), &[a.pid()])
    );
}

#[test]
fn show_of_a_former_or_shared_name_explains_itself() {
    let home = TempHome::new().unwrap();
    home.copy_fixture("2.1.332-renamed", "9959.json");
    let (code, json, stderr) = home.json(&["show", "nobody"]);
    assert_eq!(code, 1);
    assert_eq!(json["error"], "not_found");
    assert!(stderr.contains("nobody"), "{stderr}");
    // A leftover record is still shown by its session id, with its verdict.
    let (code, json, _) = home.json(&["show", "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57"]);
    assert_eq!(code, 0);
    assert_eq!(json["liveness"], "gone");
    assert_eq!(json["former_names"][0]["name"], "reviewer");

    let mut home = TempHome::new().unwrap();
    let (x, y) = (Sleeper::spawn().unwrap(), Sleeper::spawn().unwrap());
    home.live_record(&x, "s-x", "twin", "idle", true);
    home.live_record(&y, "s-y", "twin", "idle", true);
    let (code, json, _) = home.json(&["show", "twin"]);
    assert_eq!(code, 3);
    assert_eq!(json["refusal"], "identity_mismatch");
}

#[test]
fn a_registry_writable_by_others_is_warned_about_on_stderr_only() {
    use std::os::unix::fs::PermissionsExt;
    let home = TempHome::new().unwrap();
    std::fs::set_permissions(home.sessions(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, json, stderr) = home.json(&["list"]);
    assert_eq!((code, json), (0, serde_json::json!([])));
    assert!(stderr.contains("writable by group or others"), "{stderr}");
}

#[test]
fn usage_errors_exit_2_and_help_documents_the_exit_codes() {
    let home = TempHome::new().unwrap();
    assert_eq!(home.run(&["frobnicate"]).status.code(), Some(2));
    assert_eq!(
        home.run(&["settings", "set", "sometimes"]).status.code(),
        Some(2)
    );
    let help = String::from_utf8(home.run(&["--help"]).stdout).unwrap();
    for line in [
        "0  success",
        "1  error",
        "2  usage error",
        "3  refusal",
        "4  conflict",
    ] {
        assert!(help.contains(line), "--help documents `{line}`");
    }
}

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    let home = TempHome::new().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let out = home.run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0));
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(
            script.contains("claude-peers") && script.contains("resolve"),
            "{shell}"
        );
    }
}

#[test]
fn a_registry_that_cannot_be_listed_exits_1_naming_it() {
    let home = TempHome::without_registry().unwrap();
    std::fs::write(home.root().join("sessions"), "not a directory").unwrap();
    let (code, json, stderr) = home.json(&["list"]);
    assert_eq!(code, 1, "{stderr}");
    assert_eq!(json["error"], "registry_unreadable");
    assert!(
        json["message"].as_str().unwrap().contains("sessions"),
        "{json}"
    );
}

#[test]
fn show_gives_times_as_local_dates_in_the_users_time_zone() {
    let home = TempHome::new().unwrap();
    // A leftover record from the fixtures: startedAt 1796030547041 is
    // 2026-11-30 09:22:27 UTC.
    home.copy_fixture("2.1.332-idle", "3839.json");
    let started = |tz: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(home.root())
            .args(["show", "75c834bc-f549-4085-a152-f9973dc50b30"])
            .env("TZ", tz)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .find(|l| l.starts_with("started"))
            .unwrap_or_else(|| panic!("no started line: {text}"))
            .to_owned()
    };
    let utc = started("UTC");
    let tokyo = started("Asia/Tokyo");
    assert!(utc.contains("2026-11-30 09:22:27 UTC ("), "{utc}");
    assert!(tokyo.contains("2026-11-30 18:22:27 JST ("), "{tokyo}");
    assert!(utc.ends_with(" ago)"), "{utc}");
}
