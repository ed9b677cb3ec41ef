//! The end of a transcript: its last prompt and when it was last written.

use std::fs;
use std::os::unix::fs::symlink;

use claude_peer_transcript::{Error, PROMPT_CHARS, TAIL_BYTES, summary};

use crate::{Home, SESSION, append, fixture};

/// A line as large as the requests Claude Code records (`api-request`), which no
/// prompt is in.
fn request_line(bytes: usize) -> String {
    format!(
        "{{\"type\":\"api-request\",\"body\":\"{}\"}}\n",
        "x".repeat(bytes)
    )
}

#[test]
fn the_last_typed_or_peer_prompt_is_found_past_tool_results_and_meta_lines() {
    let home = Home::with_project();
    let path = home.transcript();
    assert_eq!(summary(&home.home, SESSION).unwrap(), None, "none yet");

    // A typed prompt, then a peer's message given to the model once that turn ended (a
    // meta line of origin `peer`): the peer's.
    append(&path, fixture("busy.jsonl").as_bytes());
    let found = summary(&home.home, SESSION).unwrap().unwrap();
    assert_eq!(found.path, path);
    let last = found.last_prompt.unwrap();
    assert!(
        last.starts_with("Another Claude session sent a message") && last.contains("hello busy"),
        "{last}"
    );
    let written = fs::metadata(&path).unwrap().modified().unwrap();
    let written_ms = written
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    assert_eq!(u128::from(found.last_activity_ms.unwrap()), written_ms);

    // A tool result, a meta reminder and a long prompt after it: the long prompt, cut.
    let long = "y".repeat(PROMPT_CHARS * 2);
    append(
        &path,
        format!(
            "{}\n{}\n{}\n",
            r#"{"type":"user","message":{"role":"user","content":"typed before"}}"#,
            serde_json::json!({"type":"user","message":{"role":"user","content":[{"type":"text","text": long}]}}),
            r#"{"type":"user","isMeta":true,"message":{"role":"user","content":"<system-reminder>x</system-reminder>"}}"#,
        )
        .as_bytes(),
    );
    append(
        &path,
        format!(
            "{}\n",
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"ok"}]}}"#
        )
        .as_bytes(),
    );
    let last = summary(&home.home, SESSION).unwrap().unwrap().last_prompt;
    assert_eq!(last, Some("y".repeat(PROMPT_CHARS)));
}

#[test]
fn only_the_end_is_read_so_an_older_prompt_is_not_found() {
    let home = Home::with_project();
    let path = home.transcript();
    append(
        &path,
        format!(
            "{}\n",
            r#"{"type":"user","message":{"role":"user","content":"long ago"}}"#
        )
        .as_bytes(),
    );
    let tail = usize::try_from(TAIL_BYTES).unwrap();
    append(&path, request_line(tail / 2).as_bytes());
    assert_eq!(
        summary(&home.home, SESSION)
            .unwrap()
            .unwrap()
            .last_prompt
            .as_deref(),
        Some("long ago"),
        "within the tail"
    );
    append(&path, request_line(tail).as_bytes());
    let found = summary(&home.home, SESSION).unwrap().unwrap();
    assert_eq!(found.last_prompt, None, "past the tail");
    assert!(found.last_activity_ms.is_some());
}

#[test]
fn a_link_where_the_transcript_belongs_is_not_read() {
    let home = Home::with_project();
    let elsewhere = home.home.root().join("secret.jsonl");
    fs::write(
        &elsewhere,
        r#"{"type":"user","message":{"role":"user","content":"not yours to show"}}"#,
    )
    .unwrap();
    symlink(&elsewhere, home.transcript()).unwrap();
    assert!(matches!(
        summary(&home.home, SESSION),
        Err(Error::NotOurs { .. })
    ));
}
