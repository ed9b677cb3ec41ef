//! What each key does, in each of the dashboard's modes: a change of the state, and
//! the action the loop must then take, if any (it does the IO; this does none).

use claude_peer_deliver::MAX_MESSAGE_BYTES;
use claude_peer_resolve::Addressability;
use claude_peer_settings::{InboundPolicy, Revision};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::board::{End, Fate};
use super::state::{Mode, State};

/// The longest filter kept, in characters.
const MAX_FILTER: usize = 200;
/// How many rows Page Down and Page Up move by.
const PAGE: isize = 20;

/// A key a view answers, as its footer names it and as the help explains it. The footer
/// and the help are both drawn from the tables below, so neither offers a key that does
/// nothing where it is shown.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHelp {
    /// The keys, as the help lists them.
    pub(crate) keys: &'static str,
    /// The footer's word for it.
    pub(crate) short: &'static str,
    /// What it does, as the help says.
    pub(crate) what: &'static str,
}

/// The keys of the table of sessions.
pub(crate) const TABLE_KEYS: [KeyHelp; 7] = [
    KeyHelp {
        keys: "q, Ctrl-C",
        short: "q quit",
        what: "quit",
    },
    KeyHelp {
        keys: "j, Down / k, Up",
        short: "j/k move",
        what: "move the selection (PageDown, PageUp, g, G too)",
    },
    KeyHelp {
        keys: "Enter",
        short: "Enter details",
        what: "the selected session's details, replies included",
    },
    KeyHelp {
        keys: "m",
        short: "m message",
        what: "type a message for the selected session; Enter sends it",
    },
    KeyHelp {
        keys: "/",
        short: "/ filter",
        what: "filter by name or cwd (Enter keeps it, Esc clears it)",
    },
    KeyHelp {
        keys: "p",
        short: "p policy",
        what: "change crossSessionInbound in your settings.json, after a confirmation",
    },
    KeyHelp {
        keys: "?",
        short: "? help",
        what: "this help",
    },
];

/// The keys of one session's details.
pub(crate) const DETAILS_KEYS: [KeyHelp; 3] = [
    KeyHelp {
        keys: "m (details)",
        short: "m message",
        what: "type a message for the session shown; Enter sends it",
    },
    KeyHelp {
        keys: "Esc, Enter, q",
        short: "Esc back",
        what: "from the details, back to the table",
    },
    KeyHelp {
        keys: "Ctrl-C",
        short: "Ctrl-C quit",
        what: "quit, from any view",
    },
];

/// What a key asks of the world outside the state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Send `text` to `session_id`; the row already shows it as being sent.
    Send {
        session_id: String,
        text: String,
    },
    /// Write `crossSessionInbound: policy`, only if the file is still at `expected`.
    SetPolicy {
        policy: InboundPolicy,
        expected: Revision,
    },
    Quit,
}

/// Applies one terminal event to `state`; what the loop must do about it.
pub(crate) fn handle(state: &mut State, event: &Event) -> Option<Action> {
    match event {
        Event::Key(key) if key.kind != KeyEventKind::Release => key_press(state, key),
        Event::Paste(pasted) => {
            paste(state, pasted);
            None
        }
        // A resize reaches the state as a height, measured for the next draw.
        _ => None,
    }
}

fn key_press(state: &mut State, key: &KeyEvent) -> Option<Action> {
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        return Some(Action::Quit);
    }
    match std::mem::replace(&mut state.mode, Mode::Table) {
        Mode::Table => return table(state, key),
        Mode::Details(session_id) => match key.code {
            KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q') => state.transcript = None,
            KeyCode::Char('m') => {
                state.mode = Mode::Details(session_id.clone());
                start_message(state, Some(&session_id));
            }
            _ => state.mode = Mode::Details(session_id),
        },
        Mode::Help => {}
        Mode::Filter => filter(state, key),
        Mode::Message {
            session_id,
            name,
            text,
        } => return message(state, key, session_id, name, text),
        Mode::Policy => policy(state, key),
        Mode::Confirm { policy, revision } => {
            if matches!(key.code, KeyCode::Char('y' | 'Y')) {
                return Some(Action::SetPolicy {
                    policy,
                    expected: revision,
                });
            }
            "policy unchanged".clone_into(&mut state.status);
        }
    }
    None
}

fn table(state: &mut State, key: &KeyEvent) -> Option<Action> {
    let board = &mut state.board;
    match key.code {
        KeyCode::Char('q') => return Some(Action::Quit),
        KeyCode::Char('j') | KeyCode::Down => board.move_by(1),
        KeyCode::Char('k') | KeyCode::Up => board.move_by(-1),
        KeyCode::PageDown => board.move_by(PAGE),
        KeyCode::PageUp => board.move_by(-PAGE),
        KeyCode::Char('g') | KeyCode::Home => board.move_to_end(End::First),
        KeyCode::Char('G') | KeyCode::End => board.move_to_end(End::Last),
        KeyCode::Char('/') => state.mode = Mode::Filter,
        KeyCode::Esc => board.set_filter(String::new()),
        KeyCode::Char('?') => state.mode = Mode::Help,
        KeyCode::Char('p') => state.mode = Mode::Policy,
        KeyCode::Enter => {
            if let Some(session) = board.selected() {
                state.mode = Mode::Details(session.record.session_id.clone());
            }
        }
        KeyCode::Char('m') => start_message(state, None),
        _ => {}
    }
    None
}

/// Opens the message line for the session `session_id` (else the selected one), when it
/// can be messaged.
fn start_message(state: &mut State, session_id: Option<&str>) {
    let session = match session_id {
        Some(id) => state.board.session(id),
        None => state.board.selected(),
    };
    let Some(session) = session else {
        "no session selected".clone_into(&mut state.status);
        return;
    };
    let name = session.record.display_name().unwrap_or("-").to_owned();
    match &session.addressability {
        Addressability::Addressable(_) => {
            state.mode = Mode::Message {
                session_id: session.record.session_id.clone(),
                name,
                text: String::new(),
            };
        }
        Addressability::NotAddressable(why) => {
            state.status = format!("{name} cannot be messaged: {why}");
        }
    }
}

fn filter(state: &mut State, key: &KeyEvent) {
    let mut filter = state.board.filter().to_owned();
    match key.code {
        KeyCode::Enter => {}
        KeyCode::Esc => filter.clear(),
        _ => {
            edit(&mut filter, key, MAX_FILTER);
            state.mode = Mode::Filter;
        }
    }
    state.board.set_filter(filter);
}

fn message(
    state: &mut State,
    key: &KeyEvent,
    session_id: String,
    name: String,
    mut text: String,
) -> Option<Action> {
    match key.code {
        KeyCode::Esc => "message not sent".clone_into(&mut state.status),
        KeyCode::Enter if !text.trim().is_empty() => {
            state.board.set_fate(&session_id, Fate::Sending);
            state.status = format!("sending to {name}…");
            return Some(Action::Send { session_id, text });
        }
        _ => {
            edit(&mut text, key, MAX_MESSAGE_BYTES);
            state.mode = Mode::Message {
                session_id,
                name,
                text,
            };
        }
    }
    None
}

fn policy(state: &mut State, key: &KeyEvent) {
    let policy = match key.code {
        KeyCode::Char('a') => InboundPolicy::Accept,
        KeyCode::Char('h') => InboundPolicy::Hold,
        KeyCode::Char('r') => InboundPolicy::Refuse,
        _ => {
            "policy unchanged".clone_into(&mut state.status);
            return;
        }
    };
    match &state.settings {
        Ok(snapshot) => {
            state.mode = Mode::Confirm {
                policy,
                revision: snapshot.revision.clone(),
            };
        }
        Err(why) => state.status = format!("cannot change the policy: {why}"),
    }
}

/// Pasted text goes into the line being typed: whole into a message (its newlines
/// kept: terminals paste them as carriage returns), as one line into the filter.
fn paste(state: &mut State, pasted: &str) {
    let pasted = &pasted.replace("\r\n", "\n").replace('\r', "\n");
    match &mut state.mode {
        Mode::Message { text, .. } if text.len() + pasted.len() <= MAX_MESSAGE_BYTES => {
            text.push_str(pasted);
        }
        Mode::Message { .. } => "too long to paste into one message".clone_into(&mut state.status),
        Mode::Filter => {
            let mut filter = state.board.filter().to_owned();
            filter.extend(pasted.chars().filter(|c| !c.is_control()));
            state
                .board
                .set_filter(filter.chars().take(MAX_FILTER).collect());
        }
        _ => {}
    }
}

/// Edits a line of input: typed characters (up to `max` bytes), Backspace, Ctrl-U.
fn edit(text: &mut String, key: &KeyEvent, max: usize) {
    match key.code {
        KeyCode::Backspace => {
            text.pop();
        }
        KeyCode::Char('u') if key.modifiers.contains(KeyModifiers::CONTROL) => text.clear(),
        KeyCode::Char(c)
            if !key.modifiers.contains(KeyModifiers::CONTROL)
                && !c.is_control()
                && text.len() + c.len_utf8() <= max =>
        {
            text.push(c);
        }
        _ => {}
    }
}
