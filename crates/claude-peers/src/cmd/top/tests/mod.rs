//! The dashboard without a terminal: its keys as state changes and actions, and its
//! screens drawn on ratatui's `TestBackend`, from fixed sessions at a fixed time.

mod key_handling;
mod screens;

use std::fmt::Write as _;
use std::path::PathBuf;

use claude_peer_registry::{Pid, Record};
use claude_peer_resolve::{Addressability, LiveSession, Unaddressable};
use claude_peer_settings::{InboundPolicy, Revision, Snapshot};
use claude_peer_watch::Event;
use crossterm::event::{Event as Terminal, KeyCode, KeyEvent, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::Size;
use ratatui::style::{Color, Modifier};
use ratatui::text::Span;

use super::keys::{Action, handle};
use super::state::{Colors, State};
use super::view;

/// The time every test runs at: 2027-01-15 08:00:00 UTC.
const NOW: u64 = 1_800_000_000_000;
/// The revision of the settings file the tests' state last read.
const REVISION: &str = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";

/// A live session from record fields (`pid`, `sessionId` and `updatedAt` filled in).
/// It can be messaged when the record names a socket.
fn live(pid: u32, fields: serde_json::Value) -> LiveSession {
    let mut fields = fields;
    let object = fields.as_object_mut().unwrap();
    object.insert("pid".to_owned(), pid.into());
    object
        .entry("sessionId")
        .or_insert_with(|| format!("0000000{pid}-aaaa-4bbb-8ccc-dddddddddddd").into());
    object.entry("updatedAt").or_insert((NOW - 4_000).into());
    let record: Record = serde_json::from_value(fields).unwrap();
    let addressability = match &record.messaging_socket_path {
        Some(socket) => Addressability::Addressable(PathBuf::from(socket)),
        None => Addressability::NotAddressable(Unaddressable::NoSocket),
    };
    LiveSession {
        file: PathBuf::from(format!("/home/u/.claude/sessions/{pid}.json")),
        pid: Pid::new(pid).unwrap(),
        record,
        addressability,
    }
}

/// A session named `name` with `status`, its status that old, and a socket.
fn session(pid: u32, name: &str, status: &str, for_ms: u64) -> LiveSession {
    live(
        pid,
        serde_json::json!({
            "name": name,
            "cwd": format!("/work/{name}"),
            "status": status,
            "statusUpdatedAt": NOW - for_ms,
            "messagingSocketPath": format!("/tmp/cc-{pid}.sock"),
        }),
    )
}

/// What the settings file held when the state read it.
fn settings(inbound: Option<InboundPolicy>, revision: &str) -> Snapshot {
    Snapshot {
        path: PathBuf::from("/home/u/.claude/settings.json"),
        exists: true,
        revision: revision.parse::<Revision>().unwrap(),
        inbound,
    }
}

/// The dashboard over `sessions`, with colours, the policy `hold`, at [`NOW`].
fn state(sessions: impl IntoIterator<Item = LiveSession>) -> State {
    let mut state = State::new(
        PathBuf::from("/home/u/.claude/sessions"),
        Ok(settings(Some(InboundPolicy::Hold), REVISION)),
        Colors::On,
        NOW,
    );
    state.board.apply(sessions.into_iter().map(Event::Appeared));
    state
}

fn key(code: KeyCode) -> Terminal {
    Terminal::Key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl(c: char) -> Terminal {
    Terminal::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

/// Presses each key in turn; the actions they asked for.
fn press(state: &mut State, keys: impl IntoIterator<Item = KeyCode>) -> Vec<Action> {
    keys.into_iter()
        .filter_map(|code| handle(state, &key(code)))
        .collect()
}

/// Types `text`, a key per character.
fn type_text(state: &mut State, text: &str) -> Vec<Action> {
    press(state, text.chars().map(KeyCode::Char))
}

/// `state` drawn on a `width` × `height` screen: its text, a line per row (trailing
/// blanks cut), then every run of cells styled otherwise than plain, by row and columns.
fn screen(state: &mut State, width: u16, height: u16) -> String {
    state.resize(view::table_rows(Size { width, height }));
    let mut terminal =
        ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height)).unwrap();
    terminal.draw(|frame| view::draw(state, frame)).unwrap();
    let buffer = terminal.backend().buffer();
    let mut out = text(buffer);
    out.push_str("\n-- styles --\n");
    out.push_str(&styles(buffer));
    out
}

/// Which cells of row `y` are hidden under the wide character before them.
fn hidden(buffer: &Buffer, y: u16) -> Vec<bool> {
    let mut under = 0;
    (0..buffer.area.width)
        .map(|x| {
            if under > 0 {
                under -= 1;
                return true;
            }
            under = Span::raw(buffer[(x, y)].symbol()).width().saturating_sub(1);
            false
        })
        .collect()
}

fn text(buffer: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let line: String = hidden(buffer, y)
            .into_iter()
            .zip(0..)
            .filter(|&(hidden, _)| !hidden)
            .map(|(_, x)| buffer[(x, y)].symbol())
            .collect();
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The runs of cells of the same style, row by row; a cell under a wide character
/// counts as part of it.
fn styles(buffer: &Buffer) -> String {
    let mut out = String::new();
    for y in 0..buffer.area.height {
        let hidden = hidden(buffer, y);
        let mut runs: Vec<(u16, u16, (Color, Color, Modifier))> = Vec::new();
        for x in 0..buffer.area.width {
            let cell = &buffer[(x, y)];
            let style = (cell.fg, cell.bg, cell.modifier);
            match runs.last_mut() {
                Some(run) if hidden[usize::from(x)] || run.2 == style => run.1 = x + 1,
                _ => runs.push((x, x + 1, style)),
            }
        }
        for (start, end, (fg, bg, modifier)) in runs {
            let mut what = Vec::new();
            if fg != Color::Reset {
                what.push(format!("fg {fg}"));
            }
            if bg != Color::Reset {
                what.push(format!("bg {bg}"));
            }
            if !modifier.is_empty() {
                what.push(format!("{modifier:?}"));
            }
            if !what.is_empty() {
                let _ = writeln!(
                    out,
                    "row {y:>2} cols {start:>3}..{end:<3} {}",
                    what.join(", ")
                );
            }
        }
    }
    out
}
