//! The dashboard's screens, drawn from fixed sessions at a fixed time and compared with
//! the snapshots in `snapshots/`: text first, then the styled cells.

use claude_peer_transcript::Summary;
use crossterm::event::KeyCode;
use insta::assert_snapshot;

use super::{NOW, live, press, screen, session, state, type_text};
use crate::cmd::top::board::Fate;
use crate::cmd::top::state::Said;
use crate::cmd::top::state::{Colors, State};
use crate::table::local_time;

/// Sessions of every status, one each way a message can have gone, given in no order.
fn every_status() -> State {
    let mut state = state([
        session(101, "idle-api", "idle", 3 * 60_000),
        session(102, "busy-build", "busy", 45_000),
        live(
            103,
            serde_json::json!({
                "name": "late-waiter", "cwd": "/work/late", "status": "waiting",
                "waitingFor": "permission prompt", "statusUpdatedAt": NOW - 10_000,
                "tmux": "main:2.1", "messagingSocketPath": "/tmp/cc-103.sock",
            }),
        ),
        session(104, "early-waiter", "waiting", 2 * 3_600_000),
        session(105, "shell-task", "shell", 5_000),
        live(
            106,
            serde_json::json!({"name": "starting-up", "cwd": "/work/new"}),
        ),
        session(107, "compacting", "compacting", 1_000),
        live(
            108,
            serde_json::json!({"name": "no-socket", "status": "idle", "statusUpdatedAt": NOW - 86_400_000 * 3}),
        ),
    ]);
    let id = |state: &State, pid: u32| {
        state
            .board
            .visible()
            .0
            .iter()
            .find(|s| s.pid.get() == pid)
            .map(|s| s.record.session_id.clone())
            .unwrap()
    };
    state.resize(20);
    let (idle, busy, shell) = (id(&state, 101), id(&state, 102), id(&state, 105));
    state.board.set_fate(
        &idle,
        Fate::Sent {
            msg_id: "m1".to_owned(),
            outcome: "read".to_owned(),
        },
    );
    state.board.set_fate(&busy, Fate::Sending);
    state
        .board
        .set_fate(&shell, Fate::Failed("not_delivered".to_owned()));
    state
}

#[test]
fn the_table_lists_waiting_sessions_first_the_longest_waiting_at_the_top() {
    let mut state = every_status();
    press(&mut state, [KeyCode::Char('j'), KeyCode::Char('j')]);
    assert_snapshot!(screen(&mut state, 110, 14));
}

#[test]
fn with_no_color_nothing_is_coloured_but_the_selection_and_titles_still_show() {
    let mut state = every_status();
    state.colors = Colors::Off;
    let drawn = screen(&mut state, 110, 14);
    assert!(!drawn.contains("fg "), "no colour at all:\n{drawn}");
    assert_snapshot!(drawn);
}

#[test]
fn no_live_session_names_the_registry_it_watches() {
    let mut state = state([]);
    state.settings = Err("unreadable".to_owned());
    assert_snapshot!(screen(&mut state, 80, 5));
}

#[test]
fn the_details_show_the_session_its_transcript_its_last_message_and_the_conversation() {
    let mut state = every_status();
    let waiting = live(
        109,
        serde_json::json!({
            "name": "detailed", "cwd": "/work/detailed", "status": "waiting",
            "waitingFor": "question", "statusUpdatedAt": NOW - 30_000,
            "startedAt": NOW - 3_600_000, "version": "2.1.332", "kind": "interactive",
            "tmux": "main:1.0", "messagingSocketPath": "/tmp/cc-109.sock",
        }),
    );
    let id = waiting.record.session_id.clone();
    state
        .board
        .apply([claude_peer_watch::Event::Appeared(waiting)]);
    press(&mut state, [KeyCode::Char('/')]);
    type_text(&mut state, "detailed");
    press(&mut state, [KeyCode::Enter, KeyCode::Enter]);
    state.transcript_read(
        id.clone(),
        Some(Summary {
            path: "/home/u/.claude/projects/-work-detailed/t.jsonl".into(),
            last_prompt: Some("fix the build\nthen run the tests".to_owned()),
            last_activity_ms: Some(NOW - 20_000),
        }),
    );
    state.board.set_fate(
        &id,
        Fate::Sent {
            msg_id: "m9".to_owned(),
            outcome: "held".to_owned(),
        },
    );
    let said = [
        (90_000, false, "fix the build", Some("read")),
        (60_000, true, "on it", None),
        (5_000, true, "done: \u{1b}[31mred\u{1b}[0m", None),
    ];
    let said = said
        .into_iter()
        .map(|(ago, incoming, text, fate)| Said {
            at_ms: NOW - ago,
            incoming,
            text: text.to_owned(),
            fate: fate.map(str::to_owned),
        })
        .collect();
    state.conversation_read(id.clone(), said);
    // Local times are the system's time zone's: named here, whatever it is.
    let mut drawn = screen(&mut state, 100, 32);
    for (ms, name) in [
        (NOW - 3_600_000, "<started>"),
        (NOW - 4_000, "<updated>"),
        (NOW - 20_000, "<last activity>"),
        (NOW - 90_000, "<sent>"),
        (NOW - 60_000, "<first reply>"),
        (NOW - 5_000, "<second reply>"),
    ] {
        drawn = drawn.replace(&local_time(ms), name);
    }
    assert_snapshot!(drawn);
}

#[test]
fn the_message_line_shows_what_is_typed_and_its_end_when_it_is_long() {
    let mut state = every_status();
    press(&mut state, [KeyCode::Char('m')]);
    type_text(&mut state, "please rebase on main");
    assert_snapshot!("message_line", screen(&mut state, 110, 6));
    type_text(
        &mut state,
        " and then run the whole test suite again, twice",
    );
    assert_snapshot!("message_line_long", screen(&mut state, 60, 6));
}

#[test]
fn the_policy_question_then_its_confirmation() {
    let mut state = every_status();
    press(&mut state, [KeyCode::Char('p')]);
    assert_snapshot!("policy_choose", screen(&mut state, 110, 4));
    press(&mut state, [KeyCode::Char('r')]);
    assert_snapshot!("policy_confirm", screen(&mut state, 110, 4));
}

#[test]
fn the_help_lists_every_key() {
    let mut state = every_status();
    press(&mut state, [KeyCode::Char('?')]);
    assert_snapshot!(screen(&mut state, 90, 20));
}

#[test]
fn a_narrow_terminal_drops_columns_from_the_right() {
    let mut state = every_status();
    for width in [72, 48, 30, 12] {
        let drawn = screen(&mut state, width, 6);
        assert_snapshot!(format!("narrow_{width}"), drawn);
    }
}

#[test]
fn hostile_names_and_cwds_are_shown_escaped_and_wide_characters_keep_the_columns() {
    let mut state = state([
        live(
            201,
            serde_json::json!({
                "name": "evil\u{1b}[2Jname\u{202e}", "cwd": "/tmp/\u{1b}]0;owned\u{7}",
                "status": "idle", "statusUpdatedAt": NOW - 1_000, "tmux": "x\ny",
            }),
        ),
        live(
            202,
            serde_json::json!({
                "name": "two\nlines", "cwd": "/work/two", "status": "busy",
                "statusUpdatedAt": NOW - 1_000,
            }),
        ),
        live(
            203,
            serde_json::json!({
                "name": "x".repeat(300), "cwd": format!("/{}", "d/".repeat(200)),
                "status": "idle", "statusUpdatedAt": NOW - 1_000,
            }),
        ),
        live(
            204,
            serde_json::json!({
                "name": "日本語のセッション名前です長い長い", "cwd": "/work/日本",
                "status": "waiting", "waitingFor": "許可\u{1b}[0m",
                "statusUpdatedAt": NOW - 1_000,
            }),
        ),
    ]);
    let drawn = screen(&mut state, 100, 8);
    assert!(
        !drawn.contains('\u{1b}'),
        "no escape reaches the screen:\n{drawn}"
    );
    assert_snapshot!(drawn);
}

#[test]
fn the_header_counts_other_statuses_and_names_the_filter_and_the_policy() {
    let mut state = every_status();
    state.settings = Ok(super::settings(None, super::REVISION));
    press(&mut state, [KeyCode::Char('/')]);
    type_text(&mut state, "wait");
    press(&mut state, [KeyCode::Enter]);
    assert_snapshot!(screen(&mut state, 110, 5));
}
