//! The history with real Claude Code: a reply recorded after the message it answers,
//! `reply` linked to it, search, pruning by a real post office, export and import, and
//! the bad input each must survive.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::mailbox::{MailboxProcess, is};
use crate::receiver::{Receiver, claude};
use crate::serve_send::{cli, private, run as peers};
use crate::support::now_ms;

fn records(home: &Path, state: &Path, args: &[&str]) -> Vec<Value> {
    let (code, log, stderr) = cli(home, state, args);
    assert_eq!(code, 0, "{args:?}: {stderr}");
    log.as_array().cloned().unwrap_or_else(|| panic!("{log}"))
}

fn texts(records: &[Value]) -> Vec<&str> {
    records
        .iter()
        .map(|r| r["text"].as_str().unwrap())
        .collect()
}

#[test]
fn a_reply_follows_the_message_it_answers_and_reply_answers_it_in_turn() {
    let receiver = Receiver::replying("PR 13 looks good");
    let home = receiver.home.path();
    let state = private();
    let mut mailbox = MailboxProcess::start_in(home, state.path());
    mailbox.request(&format!(
        r#"{{"id":"r1","send":{{"session_id":"{}","message":"review PR 13"}}}}"#,
        receiver.session_id
    ));
    let events = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        mailbox.until(Duration::from_secs(60), |e| is(e, "message"))
    }))
    .unwrap_or_else(|_| panic!("no reply; the receiver's screen:\n{}", receiver.screen()));
    let heard = events.last().unwrap().clone();
    // The mailbox ends; the history stays.
    mailbox.stdin.take();
    mailbox.until(Duration::from_secs(15), |e| is(e, "closed"));

    let with = ["log", "--with", receiver.session_id.as_str()];
    let chat = records(home, state.path(), &with);
    assert_eq!(
        texts(&chat),
        ["review PR 13", "PR 13 looks good"],
        "{chat:#?}"
    );
    let (sent, answer) = (&chat[0], &chat[1]);
    assert_eq!(
        (
            sent["direction"].as_str(),
            sent["state"].as_str(),
            sent["from"].as_str()
        ),
        (Some("out"), Some("delivered"), Some("harness"))
    );
    assert_eq!(answer["direction"], "in");
    assert_eq!(answer["state"], "received");
    assert_eq!(answer["session_id"], receiver.session_id.as_str());
    assert_eq!(
        answer["from"], heard["from_name"],
        "the replying session's name"
    );
    assert_eq!(answer["in_reply_to"], sent["id"]);
    assert_eq!(answer["inferred"], true);
    // The mailbox's event named the record.
    assert_eq!(
        (&heard["id"], &heard["in_reply_to"]),
        (&answer["id"], &sent["id"])
    );
    // By the receiver's name too, and only what came in.
    let name = answer["from"].as_str().unwrap();
    assert_eq!(
        texts(&records(home, state.path(), &["log", "--with", name])).len(),
        2
    );
    let incoming = records(home, state.path(), &["log", "--in"]);
    assert_eq!(texts(&incoming), ["PR 13 looks good"]);

    // `reply` reaches the receiver (live: sent now) and links to what it answers.
    let answer_id = answer["id"].as_str().unwrap();
    let claude = claude();
    let (code, replied, stderr) = cli(
        home,
        state.path(),
        &[
            "reply",
            answer_id,
            "--message",
            "thanks, merging",
            "--from",
            "harness",
            "--claude",
            claude.to_str().unwrap(),
            "--managed-settings",
            state.path().join("none.json").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{replied} {stderr}");
    assert_eq!(replied["receipt"], "read", "{replied}");
    let thread = records(
        home,
        state.path(),
        &["log", "--thread", sent["id"].as_str().unwrap()],
    );
    assert_eq!(
        texts(&thread),
        ["review PR 13", "PR 13 looks good", "thanks, merging"]
    );
    assert_eq!(thread[2]["in_reply_to"], answer["id"]);
    assert_eq!(thread[2]["inferred"], false);
    assert_eq!(thread[2]["session_id"], receiver.session_id.as_str());
    // Replying to one of our own messages is refused by name.
    let (code, own, _) = cli(
        home,
        state.path(),
        &["reply", sent["id"].as_str().unwrap(), "--message", "x"],
    );
    assert_eq!(
        (code, &own["error"]),
        (1, &json!("not_a_message_in")),
        "{own}"
    );

    searched(home, state.path());
}

/// Search: found, marked in words, exact in JSON; a bad search is a usage error.
fn searched(home: &Path, state: &Path) {
    let found = records(home, state, &["log", "--search", "looks"]);
    assert_eq!(texts(&found), ["PR 13 looks good"]);
    let shown = peers(home, state, &["log", "--search", "looks"]);
    let shown = String::from_utf8(shown.stdout).unwrap();
    assert!(shown.contains("PR 13 **looks** good"), "{shown}");
    let bad = peers(home, state, &["--json", "log", "--search", "\"PR 13"]);
    assert_eq!(bad.status.code(), Some(2));
    let bad: Value = serde_json::from_slice(&bad.stdout).unwrap();
    assert_eq!(bad["error"], "bad_search");
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("a quote is not closed"),
        "{bad}"
    );
}

/// A record as `log --export` writes one, `age_ms` old.
fn exported(id: &str, text: &str, age_ms: u64) -> String {
    let at = now_ms() - age_ms;
    json!({
        "id": id, "direction": "out", "from": "harness", "key": null, "to": "reviewer",
        "to_kind": "name", "text": text, "state": "delivered", "reason": null,
        "receipt": "read", "receipt_basis": "transcript", "msg_id": null,
        "session_id": "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57", "session_name": "reviewer",
        "in_reply_to": null, "inferred": false, "attempts": 1, "created_at_ms": at,
        "expires_at_ms": at + 86_400_000,
        "timeline": [{"state": "delivered", "at_ms": at, "receipt": "read",
                      "receipt_basis": "transcript", "detail": null}],
    })
    .to_string()
}

/// A post office started and left idle prunes what is past the age its user's
/// config.toml sets; a config it cannot use stops it before it starts, named.
fn pruned_as_the_config_says(home: &Path, state: &Path) {
    let claude = claude();
    let serve = || {
        peers(
            home,
            state,
            &[
                "serve",
                "--idle-exit",
                "1",
                "--claude",
                claude.to_str().unwrap(),
                "--managed-settings",
                "/nonexistent.json",
            ],
        )
    };
    let config = state.join("config/claude-peers/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[history]\nkeep_for = \"50 days\"\n").unwrap();
    let refused = serve();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains(config.to_str().unwrap()) && said.contains("history.keep_for"),
        "{said}"
    );
    std::fs::write(&config, "[history]\nkeep_for = \"50d\"\n").unwrap();
    let serve = serve();
    assert!(
        serve.status.success(),
        "{}",
        String::from_utf8_lossy(&serve.stderr)
    );
}

#[test]
fn the_post_office_prunes_old_history_and_an_export_imports_whole_or_not_at_all() {
    let home = private();
    let state = private();
    let hour = 3_600_000;
    let file = state.path().join("history.jsonl");
    let lines = [
        exported("00000000000000a1", "zebra seen an hour ago \u{1b}[2J", hour),
        exported("00000000000000a2", "zebra seen in spring", 100 * 24 * hour),
        exported("00000000000000a3", "the build is green", 2 * hour),
        exported("00000000000000a4", "zebra seen in autumn", 60 * 24 * hour),
    ];
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let (code, done, stderr) = cli(
        home.path(),
        state.path(),
        &["log", "--import", file.to_str().unwrap()],
    );
    assert_eq!(
        (code, done),
        (0, json!({"imported": 4, "skipped": 0})),
        "{stderr}"
    );
    let search = ["log", "--search", "zebra"];
    assert_eq!(texts(&records(home.path(), state.path(), &search)).len(), 3);

    pruned_as_the_config_says(home.path(), state.path());
    let found = records(home.path(), state.path(), &search);
    assert_eq!(
        texts(&found),
        ["zebra seen an hour ago \u{1b}[2J"],
        "exact in JSON, the pruned one gone"
    );
    let words = peers(home.path(), state.path(), &["log", "--search", "zebra"]);
    let words = String::from_utf8(words.stdout).unwrap();
    assert!(
        words.contains(r"\u{1b}[2J") && !words.contains('\u{1b}'),
        "{words}"
    );

    // Exported, then imported into an empty store: the same log.
    let export = peers(home.path(), state.path(), &["log", "--export"]);
    assert!(export.status.success());
    let dump = state.path().join("dump.jsonl");
    std::fs::write(&dump, &export.stdout).unwrap();
    let other = private();
    let (code, done, _) = cli(
        home.path(),
        other.path(),
        &["log", "--import", dump.to_str().unwrap()],
    );
    assert_eq!((code, done), (0, json!({"imported": 2, "skipped": 0})));
    assert_eq!(
        records(home.path(), other.path(), &["log"]),
        records(home.path(), state.path(), &["log"])
    );

    // A torn, hostile or conflicting line: its number and why, nothing imported.
    let conflicting = exported("00000000000000a1", "other text, same id", hour);
    for (bad, why) in [
        (
            "{\"id\": \"00000000000000b1\", \"text\": \"torn",
            "not a message record",
        ),
        (conflicting.as_str(), "with other content"),
        (&"x".repeat(2 << 20), "longer than"),
    ] {
        let fresh = exported("00000000000000b2", "would be new", hour);
        std::fs::write(&dump, format!("{fresh}\n{bad}\n")).unwrap();
        let (code, failed, _) = cli(
            home.path(),
            other.path(),
            &["log", "--import", dump.to_str().unwrap()],
        );
        assert_eq!(
            (code, &failed["error"]),
            (1, &json!("bad_import")),
            "{failed}"
        );
        let message = failed["message"].as_str().unwrap();
        assert!(
            message.contains("line 2 of") && message.contains(why),
            "{message}"
        );
        assert_eq!(
            records(home.path(), other.path(), &["log"]).len(),
            2,
            "{why}"
        );
    }
}
