//! Each key, in each mode: the state it leaves and the action it asks for.

use claude_peer_settings::InboundPolicy;
use crossterm::event::{Event as Terminal, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{REVISION, ctrl, live, press, session, settings, state, type_text};
use crate::cmd::top::board::Fate;
use crate::cmd::top::keys::{Action, handle};
use crate::cmd::top::state::{Mode, State};
use crate::error::Failure;

/// Fifty idle sessions, `s00` to `s49` in display order, on a screen of ten rows.
fn fifty() -> State {
    let mut state = state((0..50).map(|i| session(100 + i, &format!("s{i:02}"), "idle", 1000)));
    state.resize(10);
    state
}

fn selected(state: &State) -> String {
    state
        .board
        .selected()
        .and_then(|s| s.record.name.clone())
        .unwrap_or_default()
}

#[test]
fn movement_keys_move_the_selection_within_the_rows_and_keep_it_in_view() {
    let mut state = fifty();
    assert_eq!(selected(&state), "s00");
    let moves = [
        (KeyCode::Char('j'), "s01"),
        (KeyCode::Down, "s02"),
        (KeyCode::Char('k'), "s01"),
        (KeyCode::Up, "s00"),
        (KeyCode::Up, "s00"),
        (KeyCode::PageDown, "s20"),
        (KeyCode::PageDown, "s40"),
        (KeyCode::PageDown, "s49"),
        (KeyCode::PageUp, "s29"),
        (KeyCode::Char('g'), "s00"),
        (KeyCode::Char('G'), "s49"),
        (KeyCode::Home, "s00"),
        (KeyCode::End, "s49"),
    ];
    for (code, expected) in moves {
        assert_eq!(press(&mut state, [code]), [], "{code:?} asks for nothing");
        assert_eq!(selected(&state), expected, "after {code:?}");
        let (rows, at) = state.board.visible();
        let at = at.unwrap_or_else(|| panic!("the selection is off screen after {code:?}"));
        assert_eq!(rows[at].record.name.as_deref(), Some(expected));
    }
}

#[test]
fn a_release_of_a_key_does_nothing() {
    let mut state = fifty();
    let release = KeyEvent::new_with_kind(
        KeyCode::Char('j'),
        KeyModifiers::NONE,
        KeyEventKind::Release,
    );
    assert_eq!(handle(&mut state, &Terminal::Key(release)), None);
    assert_eq!(selected(&state), "s00");
}

#[test]
fn enter_opens_the_selected_sessions_details_and_esc_enter_or_q_closes_them() {
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('j'), KeyCode::Enter]);
    let id = state.board.selected().unwrap().record.session_id.clone();
    assert_eq!(state.mode, Mode::Details(id.clone()));
    assert_eq!(
        state.transcript_due(false),
        Some(id.as_str()),
        "read once opened"
    );
    state.transcript_read(id.clone(), None);
    assert_eq!(
        state.transcript_due(false),
        None,
        "not again until the tick"
    );
    assert_eq!(state.transcript_due(true), Some(id.as_str()));
    assert_eq!(press(&mut state, [KeyCode::Char('j')]), []);
    assert_eq!(
        state.mode,
        Mode::Details(id.clone()),
        "other keys keep them open"
    );
    for close in [KeyCode::Esc, KeyCode::Enter, KeyCode::Char('q')] {
        press(&mut state, [KeyCode::Enter]);
        assert_eq!(press(&mut state, [close]), [], "{close:?} does not quit");
        assert_eq!(state.mode, Mode::Table, "{close:?} closes them");
        assert_eq!(
            state.transcript, None,
            "the transcript is dropped with them"
        );
        assert_eq!(state.transcript_due(true), None);
    }
}

#[test]
fn m_then_text_then_enter_sends_that_text_to_the_selected_session() {
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('j'), KeyCode::Char('m')]);
    let id = state.board.selected().unwrap().record.session_id.clone();
    assert_eq!(
        type_text(&mut state, "hello, q and j"),
        [],
        "typing asks nothing"
    );
    press(&mut state, [KeyCode::Backspace, KeyCode::Char('k')]);
    let actions = press(&mut state, [KeyCode::Enter]);
    assert_eq!(
        actions,
        [Action::Send {
            session_id: id.clone(),
            text: "hello, q and k".to_owned(),
        }]
    );
    assert_eq!(state.mode, Mode::Table);
    assert_eq!(
        state.board.fate(&id),
        Some(&Fate::Sending),
        "the row shows it at once"
    );
    assert_eq!(state.status, "sending to s01…");
}

#[test]
fn an_empty_message_is_not_sent_and_esc_cancels_one() {
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('m')]);
    type_text(&mut state, "  ");
    assert_eq!(press(&mut state, [KeyCode::Enter]), [], "blank: not sent");
    assert!(matches!(state.mode, Mode::Message { .. }), "still typing");
    type_text(&mut state, "never sent");
    assert_eq!(handle(&mut state, &ctrl('u')), None);
    let Mode::Message { text, .. } = &state.mode else {
        panic!("Ctrl-U keeps the line open");
    };
    assert_eq!(text, "", "Ctrl-U clears the line");
    type_text(&mut state, "never sent");
    assert_eq!(press(&mut state, [KeyCode::Esc]), []);
    assert_eq!(state.mode, Mode::Table);
    assert_eq!(state.status, "message not sent");
    let id = state.board.selected().unwrap().record.session_id.clone();
    assert_eq!(state.board.fate(&id), None);
}

#[test]
fn a_session_that_cannot_be_messaged_says_why_instead_of_opening_the_line() {
    let mut state = state([live(
        7,
        serde_json::json!({"name": "socketless", "status": "idle"}),
    )]);
    assert_eq!(press(&mut state, [KeyCode::Char('m')]), []);
    assert_eq!(state.mode, Mode::Table);
    assert_eq!(
        state.status,
        "socketless cannot be messaged: its record names no messaging socket (Claude Code before peer messaging)"
    );
}

#[test]
fn a_pasted_paragraph_is_one_message_with_its_newlines() {
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('m')]);
    type_text(&mut state, "first: ");
    let pasted = Terminal::Paste("line one\r\nline two\rline three\n".to_owned());
    assert_eq!(handle(&mut state, &pasted), None, "a paste sends nothing");
    let actions = press(&mut state, [KeyCode::Enter]);
    let [Action::Send { text, .. }] = actions.as_slice() else {
        panic!("one message: {actions:?}");
    };
    assert_eq!(text, "first: line one\nline two\nline three\n");
}

#[test]
fn slash_filters_as_typed_enter_keeps_the_filter_and_esc_clears_it() {
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('/')]);
    assert_eq!(state.mode, Mode::Filter);
    type_text(&mut state, "S4");
    assert_eq!(state.board.filter(), "S4");
    assert_eq!(state.board.visible().0.len(), 10, "s40 to s49");
    type_text(&mut state, "9x");
    press(&mut state, [KeyCode::Backspace]);
    assert_eq!(state.board.filter(), "S49");
    assert_eq!(selected(&state), "s49", "the only row is selected");
    handle(&mut state, &Terminal::Paste("\u{1b}[2J".to_owned()));
    assert_eq!(
        state.board.filter(),
        "S49[2J",
        "no control character is kept"
    );
    press(&mut state, [KeyCode::Backspace; 3]);
    press(&mut state, [KeyCode::Enter]);
    assert_eq!(state.mode, Mode::Table);
    assert_eq!(state.board.filter(), "S49", "Enter keeps it");
    press(&mut state, [KeyCode::Char('/'), KeyCode::Esc]);
    assert_eq!(state.board.filter(), "", "Esc while typing clears it");
    assert_eq!(state.mode, Mode::Table);
    press(
        &mut state,
        [KeyCode::Char('/'), KeyCode::Char('7'), KeyCode::Enter],
    );
    press(&mut state, [KeyCode::Esc]);
    assert_eq!(state.board.filter(), "", "Esc on the table clears it too");
}

#[test]
fn p_then_a_policy_then_y_writes_it_at_the_revision_that_was_shown() {
    for (letter, policy) in [
        ('a', InboundPolicy::Accept),
        ('h', InboundPolicy::Hold),
        ('r', InboundPolicy::Refuse),
    ] {
        let mut state = fifty();
        press(&mut state, [KeyCode::Char('p')]);
        assert_eq!(state.mode, Mode::Policy);
        assert_eq!(press(&mut state, [KeyCode::Char(letter)]), []);
        // The loop reads the file again while the question is open: the answer is about
        // what was shown when the policy was chosen.
        let newer = "0".repeat(64);
        state.settings = Ok(settings(Some(InboundPolicy::Refuse), &newer));
        let actions = press(&mut state, [KeyCode::Char('y')]);
        assert_eq!(
            actions,
            [Action::SetPolicy {
                policy,
                expected: REVISION.parse().unwrap(),
            }]
        );
        assert_eq!(state.mode, Mode::Table);
    }
}

#[test]
fn any_other_answer_leaves_the_policy_unchanged() {
    let mut state = fifty();
    for keys in [
        vec![KeyCode::Char('p'), KeyCode::Char('x')],
        vec![KeyCode::Char('p'), KeyCode::Char('a'), KeyCode::Char('n')],
        vec![KeyCode::Char('p'), KeyCode::Char('r'), KeyCode::Esc],
    ] {
        state.status.clear();
        assert_eq!(press(&mut state, keys.clone()), [], "{keys:?}");
        assert_eq!(state.mode, Mode::Table);
        assert_eq!(state.status, "policy unchanged", "{keys:?}");
    }
    state.settings = Err("settings.json: not JSON".to_owned());
    assert_eq!(
        press(&mut state, [KeyCode::Char('p'), KeyCode::Char('a')]),
        []
    );
    assert_eq!(
        state.mode,
        Mode::Table,
        "no question about an unreadable file"
    );
    assert_eq!(
        state.status,
        "cannot change the policy: settings.json: not JSON"
    );
}

#[test]
fn what_the_settings_store_answered_is_shown() {
    let mut state = fifty();
    let newer = "1".repeat(64);
    state.policy_written(
        InboundPolicy::Accept,
        Ok(settings(Some(InboundPolicy::Accept), &newer)),
    );
    assert_eq!(
        state.status,
        "crossSessionInbound is now accept in /home/u/.claude/settings.json"
    );
    let shown = state.settings.as_ref().unwrap();
    assert_eq!(
        (shown.inbound, shown.revision.as_str()),
        (Some(InboundPolicy::Accept), newer.as_str())
    );
    state.policy_written(InboundPolicy::Refuse, Err("the file changed".to_owned()));
    assert_eq!(state.status, "policy unchanged: the file changed");
    assert_eq!(state.settings.unwrap().inbound, Some(InboundPolicy::Accept));
}

#[test]
fn q_quits_from_the_table_and_ctrl_c_from_anywhere() {
    let mut state = fifty();
    assert_eq!(press(&mut state, [KeyCode::Char('q')]), [Action::Quit]);
    for opening in [
        vec![],
        vec![KeyCode::Char('m')],
        vec![KeyCode::Char('/')],
        vec![KeyCode::Char('p')],
        vec![KeyCode::Char('p'), KeyCode::Char('a')],
        vec![KeyCode::Char('?')],
        vec![KeyCode::Enter],
    ] {
        let mut state = fifty();
        press(&mut state, opening.clone());
        assert_eq!(
            handle(&mut state, &ctrl('c')),
            Some(Action::Quit),
            "{opening:?}"
        );
    }
    press(&mut state, [KeyCode::Char('m')]);
    assert_eq!(
        press(&mut state, [KeyCode::Char('q')]),
        [],
        "q is a letter of a message"
    );
}

#[test]
fn question_mark_opens_the_help_and_any_key_closes_it() {
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('?')]);
    assert_eq!(state.mode, Mode::Help);
    assert_eq!(
        press(&mut state, [KeyCode::Char('q')]),
        [],
        "closes, does not quit"
    );
    assert_eq!(state.mode, Mode::Table);
}

#[test]
fn a_reply_is_announced_on_the_status_line_and_a_failure_marks_the_row() {
    let mut state = fifty();
    let id = state.board.selected().unwrap().record.session_id.clone();
    state.tick(super::NOW + 5_000);
    state.heard(crate::cmd::top::mail::Heard::Event(
        claude_peer_sender::MailboxEvent::Message {
            from: "uds:/tmp/cc-100.sock".to_owned(),
            from_name: Some("s00".to_owned()),
            session_id: Some(id.clone()),
            text: "done".to_owned(),
        },
    ));
    assert_eq!(state.status, "reply from s00 (Enter on its row shows it)");
    state.heard(crate::cmd::top::mail::Heard::Sent {
        session_id: id.clone(),
        result: Err(Failure::error("inbound_refused", "s00 refuses messages")),
    });
    assert_eq!(state.status, "not sent: s00 refuses messages");
    assert_eq!(
        state.board.fate(&id),
        Some(&Fate::Failed("inbound_refused".to_owned()))
    );
}

/// The key a footer's word names: its first word.
fn footer_key(short: &str) -> Terminal {
    match short.split(' ').next().unwrap() {
        "Enter" => super::key(KeyCode::Enter),
        "Esc" => super::key(KeyCode::Esc),
        "Ctrl-C" => ctrl('c'),
        "j/k" => super::key(KeyCode::Char('j')),
        one => super::key(KeyCode::Char(one.chars().next().unwrap())),
    }
}

#[test]
fn every_key_a_view_offers_does_something_there_and_m_messages_from_the_details_too() {
    use crate::cmd::top::keys::{DETAILS_KEYS, TABLE_KEYS};
    for (keys, details) in [(&TABLE_KEYS[..], false), (&DETAILS_KEYS[..], true)] {
        for offered in keys {
            let mut state = fifty();
            if details {
                press(&mut state, [KeyCode::Char('j'), KeyCode::Enter]);
            }
            let before = (state.mode.clone(), selected(&state), state.status.clone());
            let action = handle(&mut state, &footer_key(offered.short));
            let after = (state.mode.clone(), selected(&state), state.status.clone());
            assert!(
                action.is_some() || after != before,
                "`{}` does nothing in {:?}",
                offered.short,
                before.0
            );
        }
    }
    let mut state = fifty();
    press(&mut state, [KeyCode::Char('j'), KeyCode::Enter]);
    let shown = state.board.selected().unwrap().record.session_id.clone();
    press(&mut state, [KeyCode::Char('m')]);
    assert!(
        matches!(&state.mode, Mode::Message { session_id, .. } if *session_id == shown),
        "{:?}",
        state.mode
    );
    type_text(&mut state, "from the details");
    assert_eq!(
        press(&mut state, [KeyCode::Enter]),
        [Action::Send {
            session_id: shown,
            text: "from the details".to_owned()
        }]
    );
}
