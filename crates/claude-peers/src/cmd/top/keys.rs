//! What each key does, in each of the dashboard's modes.

use claude_peer_deliver::MAX_MESSAGE_BYTES;
use claude_peer_settings::{InboundPolicy, Revision};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::App;
use super::board::Mail as Sent;
use super::mail::Mail;
use crate::error::Exit;
use crate::ops::settings::{self, Change};

/// The longest filter kept, in characters.
const MAX_FILTER: usize = 200;

/// What the keys act on now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The table: move, open, filter, message, policy.
    Table,
    /// One session's details, by session id (it stays open while the session lives).
    Details(String),
    /// Typing the filter (applied as typed).
    Filter,
    /// Typing a message for a session.
    Message {
        session_id: String,
        name: String,
        text: String,
    },
    /// Choosing a new inbound policy.
    Policy,
    /// Confirming it: written only if the file is still at `revision`.
    Confirm {
        policy: InboundPolicy,
        revision: Revision,
    },
    Help,
}

pub(crate) fn handle(app: &mut App, event: &Event, mail: &Mail) {
    let key = match event {
        Event::Key(key) => key,
        Event::Paste(pasted) => return paste(app, pasted),
        // A resize: the next draw measures the new size.
        _ => return,
    };
    if key.kind == KeyEventKind::Release {
        return;
    }
    if key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c') {
        app.quit = Some(Exit::Success);
        return;
    }
    match std::mem::replace(&mut app.mode, Mode::Table) {
        Mode::Table => table(app, key),
        Mode::Details(session_id) => {
            if !matches!(key.code, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) {
                app.mode = Mode::Details(session_id);
            }
        }
        Mode::Help => {}
        Mode::Filter => {
            let mut filter = app.board.filter().to_owned();
            match key.code {
                KeyCode::Enter => return app.board.set_filter(filter),
                KeyCode::Esc => return app.board.set_filter(String::new()),
                _ => edit(&mut filter, key, MAX_FILTER),
            }
            app.board.set_filter(filter);
            app.mode = Mode::Filter;
        }
        Mode::Message {
            session_id,
            name,
            mut text,
        } => match key.code {
            KeyCode::Esc => "message not sent".clone_into(&mut app.status),
            KeyCode::Enter if text.trim().is_empty() => {
                app.mode = Mode::Message {
                    session_id,
                    name,
                    text,
                };
            }
            KeyCode::Enter => {
                app.board.set_mail(&session_id, Sent::Sending);
                app.status = format!("sending to {name}…");
                mail.send(session_id, text);
            }
            _ => {
                edit(&mut text, key, MAX_MESSAGE_BYTES);
                app.mode = Mode::Message {
                    session_id,
                    name,
                    text,
                };
            }
        },
        Mode::Policy => {
            let policy = match key.code {
                KeyCode::Char('a') => InboundPolicy::Accept,
                KeyCode::Char('h') => InboundPolicy::Hold,
                KeyCode::Char('r') => InboundPolicy::Refuse,
                _ => {
                    "policy unchanged".clone_into(&mut app.status);
                    return;
                }
            };
            match &app.settings {
                Ok(snapshot) => {
                    app.mode = Mode::Confirm {
                        policy,
                        revision: snapshot.revision.clone(),
                    };
                }
                Err(why) => app.status = format!("cannot change the policy: {why}"),
            }
        }
        Mode::Confirm { policy, revision } => {
            if !matches!(key.code, KeyCode::Char('y' | 'Y')) {
                "policy unchanged".clone_into(&mut app.status);
                return;
            }
            let change = Change::Set(policy);
            app.status = match settings::change(&app.ctx, change, Some(revision.as_str())) {
                Ok(snapshot) => {
                    let status = format!(
                        "crossSessionInbound is now {} in {}",
                        policy.as_str(),
                        snapshot.path.display()
                    );
                    app.settings = Ok(snapshot);
                    status
                }
                Err(failure) => format!("policy unchanged: {}", failure.message),
            };
        }
    }
}

fn table(app: &mut App, key: &KeyEvent) {
    match key.code {
        KeyCode::Char('q') => app.quit = Some(Exit::Success),
        KeyCode::Char('j') | KeyCode::Down => app.board.move_by(1),
        KeyCode::Char('k') | KeyCode::Up => app.board.move_by(-1),
        KeyCode::PageDown => app.board.move_by(20),
        KeyCode::PageUp => app.board.move_by(-20),
        KeyCode::Char('g') | KeyCode::Home => app.board.move_to_end(false),
        KeyCode::Char('G') | KeyCode::End => app.board.move_to_end(true),
        KeyCode::Char('/') => app.mode = Mode::Filter,
        KeyCode::Esc => app.board.set_filter(String::new()),
        KeyCode::Char('?') => app.mode = Mode::Help,
        KeyCode::Char('p') => app.mode = Mode::Policy,
        KeyCode::Enter => {
            if let Some(session) = app.board.selected() {
                app.mode = Mode::Details(session.record.session_id.clone());
            }
        }
        KeyCode::Char('m') => match app.board.selected() {
            Some(session) if session.addressability.is_addressable() => {
                app.mode = Mode::Message {
                    session_id: session.record.session_id.clone(),
                    name: session.record.display_name().unwrap_or("-").to_owned(),
                    text: String::new(),
                };
            }
            Some(session) => {
                app.status = format!(
                    "{} cannot be messaged: {}",
                    session.record.display_name().unwrap_or("-"),
                    match &session.addressability {
                        claude_peer_resolve::Addressability::NotAddressable(why) => why.to_string(),
                        claude_peer_resolve::Addressability::Addressable(_) => String::new(),
                    }
                );
            }
            None => "no session selected".clone_into(&mut app.status),
        },
        _ => {}
    }
}

/// Pasted text goes into the line being typed: whole into a message (its newlines
/// kept: terminals paste them as carriage returns), as one line into the filter.
fn paste(app: &mut App, pasted: &str) {
    let pasted = &pasted.replace("\r\n", "\n").replace('\r', "\n");
    match &mut app.mode {
        Mode::Message { text, .. } if text.len() + pasted.len() <= MAX_MESSAGE_BYTES => {
            text.push_str(pasted);
        }
        Mode::Message { .. } => "too long to paste into one message".clone_into(&mut app.status),
        Mode::Filter => {
            let mut filter = app.board.filter().to_owned();
            filter.extend(pasted.chars().filter(|c| !c.is_control()).take(MAX_FILTER));
            filter = filter.chars().take(MAX_FILTER).collect();
            app.board.set_filter(filter);
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
