//! How the dashboard looks: a header with the counts and the inbound policy, the table
//! (or one session's details, or the help), and a bottom line for input and news.
//!
//! Every text that comes from a file (names, cwds, panes, prompts, replies) goes through
//! [`field`], so it cannot steer the terminal.

use claude_peer_registry::Activity;
use claude_peer_resolve::{Entry, LiveSession};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Position, Rect, Size};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, Wrap};

use super::keys::{DETAILS_KEYS, KeyHelp, TABLE_KEYS};
use super::state::{Colors, Mode, State};
use crate::table::{StatusColor, ago, field, local_time, session_fields, status_text};

/// The columns and how wide each may grow, left to right; on a narrow terminal they drop
/// from the right. The last takes the width that is left.
const COLUMNS: [(&str, u16); 6] = [
    ("NAME", 28),
    ("STATUS", 34),
    ("MSG", 16),
    ("LAST", 5),
    ("PANE", 12),
    ("CWD", 0),
];
/// The narrowest the last column is shown at.
const MIN_LAST: u16 = 8;

/// Draws `state` as it is: the scroll position was settled when the height was given.
pub(crate) fn draw(state: &State, frame: &mut Frame<'_>) {
    let [header, body, footer] = areas(frame.area());
    frame.render_widget(Paragraph::new(header_line(state)), header);
    match &state.mode {
        Mode::Details(session_id) => details(frame, state, session_id, body),
        Mode::Help => help(frame, body),
        _ => table(frame, state, body),
    }
    frame.render_widget(Paragraph::new(footer_line(state, footer.width)), footer);
}

/// How many sessions' rows a screen of `size` has room for, below the table's titles.
pub(crate) fn table_rows(size: Size) -> usize {
    let [_, body, _] = areas(Rect::from((Position::ORIGIN, size)));
    usize::from(body.height.saturating_sub(1))
}

/// The header line, the body and the bottom line.
fn areas(screen: Rect) -> [Rect; 3] {
    Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(screen)
}

fn header_line(state: &State) -> Line<'static> {
    let counts = state.board.counts();
    let bold = Style::new().add_modifier(Modifier::BOLD);
    let mut spans = vec![
        Span::styled("claude-peers top", bold),
        Span::raw(format!("  {} live: ", state.board.live())),
        Span::styled(
            format!("{} waiting", counts.waiting),
            status_style(state.colors, Some(Activity::Waiting)),
        ),
        Span::raw(" · "),
        Span::styled(
            format!("{} busy", counts.busy),
            status_style(state.colors, Some(Activity::Busy)),
        ),
        Span::raw(" · "),
        Span::styled(
            format!("{} idle", counts.idle),
            status_style(state.colors, Some(Activity::Idle)),
        ),
    ];
    if counts.other > 0 {
        spans.push(Span::raw(format!(" · {} other", counts.other)));
    }
    let policy = match &state.settings {
        Ok(snapshot) => snapshot.inbound.map_or("unset", |p| p.as_str()).to_owned(),
        Err(_) => "unreadable".to_owned(),
    };
    spans.push(Span::raw("   inbound: "));
    spans.push(Span::styled(policy, bold));
    if !state.board.filter().is_empty() {
        spans.push(Span::raw(format!(
            "   filter: {}",
            field(state.board.filter())
        )));
    }
    Line::from(spans)
}

fn footer_line(state: &State, width: u16) -> Line<'static> {
    let text = match &state.mode {
        Mode::Filter => typing("/".to_owned(), state.board.filter(), width),
        Mode::Message { name, text, .. } => {
            typing(format!("message to {}: ", field(name)), text, width)
        }
        Mode::Policy => {
            "inbound policy for every session: a accept · h hold · r refuse · any other key cancels"
                .to_owned()
        }
        Mode::Confirm { policy, .. } => {
            let path = state.settings.as_ref().map_or_else(
                |_| "settings.json".to_owned(),
                |s| s.path.display().to_string(),
            );
            format!(
                "set crossSessionInbound to {} in {}? y / n",
                policy.as_str(),
                field(&path)
            )
        }
        _ if !state.status.is_empty() => field(&state.status).into_owned(),
        Mode::Details(_) => shorts(&DETAILS_KEYS),
        _ => shorts(&TABLE_KEYS),
    };
    Line::from(text)
}

/// A line being typed after `prompt`: its end, where the typing is, when it is longer
/// than the width.
fn typing(prompt: String, typed: &str, width: u16) -> String {
    let typed = field(typed);
    let room = usize::from(width).saturating_sub(prompt.chars().count() + 1);
    let skip = typed.chars().count().saturating_sub(room);
    let mut line = prompt;
    if skip > 0 {
        line.push('…');
    }
    line.extend(typed.chars().skip(skip + usize::from(skip > 0)));
    line
}

fn table(frame: &mut Frame<'_>, state: &State, area: Rect) {
    if state.board.live() == 0 {
        let text = format!(
            "No live Claude Code sessions (registry: {}).",
            field(&state.registry.to_string_lossy())
        );
        frame.render_widget(Paragraph::new(text), area);
        return;
    }
    let (sessions, selected) = state.board.visible();
    let columns = columns(state);
    let status_at = columns.iter().position(|(title, _)| *title == "STATUS");
    let cells: Vec<Vec<String>> = sessions.iter().map(|s| cells(state, s)).collect();
    let widths = widths(area.width, &columns, &cells);
    let rows = sessions
        .iter()
        .zip(cells)
        .enumerate()
        .map(|(i, (session, cells))| {
            let status = status_style(state.colors, session.record.activity());
            let row = Row::new(cells.into_iter().take(widths.len()).enumerate().map(
                |(c, text)| {
                    Cell::from(text).style(if Some(c) == status_at {
                        status
                    } else {
                        Style::new()
                    })
                },
            ));
            if Some(i) == selected {
                row.style(Style::new().add_modifier(Modifier::REVERSED))
            } else {
                row
            }
        });
    let header = Row::new(columns.iter().take(widths.len()).map(|(title, _)| *title))
        .style(Style::new().add_modifier(Modifier::BOLD));
    let table = Table::new(rows, widths.iter().map(|&w| Constraint::Length(w)))
        .header(header)
        .column_spacing(1);
    frame.render_widget(table, area);
}

/// The table's columns: [`COLUMNS`], with `HOST` after the name when other hosts are
/// asked.
fn columns(state: &State) -> Vec<(&'static str, u16)> {
    let mut columns = COLUMNS.to_vec();
    if state.board.has_hosts() {
        columns.insert(1, ("HOST", 24));
    }
    columns
}

/// One row's cells, in [`columns`]' order.
fn cells(state: &State, session: &LiveSession) -> Vec<String> {
    let now = state.now_ms;
    let record = &session.record;
    let message = match state.board.fate(&record.session_id) {
        Some(fate) => fate.word().to_owned(),
        None if session.addressability.is_addressable() => "yes".to_owned(),
        None => "no".to_owned(),
    };
    let mut cells = vec![
        field(record.display_name().unwrap_or("-")).into_owned(),
        field(&status_text(Some(record), now)).into_owned(),
        field(&message).into_owned(),
        record
            .updated_at
            .map_or_else(|| "-".to_owned(), |at| ago(now, at)),
        field(record.tmux.as_deref().unwrap_or("-")).into_owned(),
        field(record.cwd.as_deref().unwrap_or("-")).into_owned(),
    ];
    if state.board.has_hosts() {
        let host = state.board.host_of(&record.session_id).unwrap_or(0);
        cells.insert(1, field(state.board.host_name(host)).into_owned());
    }
    cells
}

/// The widths of the columns that fit in `width`, left to right, one space between:
/// each as wide as its title and the cells on screen, up to its cap.
fn widths(width: u16, columns: &[(&str, u16)], rows: &[Vec<String>]) -> Vec<u16> {
    let mut widths = Vec::new();
    let mut used: u16 = 0;
    for (i, &(title, cap)) in columns.iter().enumerate() {
        let widest = rows
            .iter()
            .map(|r| Span::raw(r[i].as_str()).width())
            .max()
            .unwrap_or(0);
        let want = u16::try_from(widest.max(title.len()))
            .unwrap_or(u16::MAX)
            .min(cap);
        let gap = u16::from(i > 0);
        let left = width.saturating_sub(used + gap);
        let last = i == columns.len() - 1;
        if last && left >= MIN_LAST {
            widths.push(left);
        } else if i == 0 {
            // The name is always shown, cut to the terminal's width when it must be.
            widths.push(want.min(width));
        } else if !last && left >= want {
            widths.push(want);
        } else {
            break;
        }
        used += gap + widths[i];
    }
    widths
}

/// A status's colour, by the rule `list` paints with too; none without colours.
fn status_style(colors: Colors, activity: Option<Activity>) -> Style {
    match (colors, StatusColor::of(activity)) {
        (Colors::Off, _) => Style::new(),
        (Colors::On, StatusColor::Magenta) => Style::new().fg(Color::Magenta),
        (Colors::On, StatusColor::Yellow) => Style::new().fg(Color::Yellow),
        (Colors::On, StatusColor::Green) => Style::new().fg(Color::Green),
        (Colors::On, StatusColor::Dim) => Style::new().add_modifier(Modifier::DIM),
    }
}

/// The selected session as `show` prints it, with its transcript's last prompt and
/// last activity, what became of the last message sent to it, and its replies.
fn details(frame: &mut Frame<'_>, state: &State, session_id: &str, area: Rect) {
    let mut lines: Vec<Line<'static>> = Vec::new();
    let transcript = state
        .transcript
        .as_ref()
        .filter(|(id, _)| id == session_id)
        .and_then(|(_, t)| t.as_ref());
    match state.board.session(session_id) {
        Some(live) => {
            let session = Entry::from(live.clone());
            for (name, value) in session_fields(&session, transcript, state.now_ms) {
                lines.push(Line::from(vec![
                    Span::styled(
                        format!("{name:<14}"),
                        Style::new().add_modifier(Modifier::BOLD),
                    ),
                    // Lines of a prompt read as one (the screen has no room for more).
                    Span::raw(field(&value.replace(['\n', '\t'], " ")).into_owned()),
                ]));
            }
        }
        None => lines.push(Line::from("This session is no longer live.")),
    }
    if let Some(fate) = state.board.fate(session_id) {
        lines.push(Line::from(format!(
            "{:<14}{}",
            "last message",
            field(fate.word())
        )));
    }
    let said = state
        .conversation
        .as_ref()
        .filter(|(id, _)| id == session_id)
        .map_or(&[][..], |(_, said)| said.as_slice());
    if !said.is_empty() {
        lines.push(Line::from(""));
        lines.push(Line::styled(
            "conversation",
            Style::new().add_modifier(Modifier::BOLD),
        ));
        for line in said {
            let (arrow, fate) = if line.incoming {
                ("<-", String::new())
            } else {
                (
                    "->",
                    line.fate
                        .as_deref()
                        .map(|f| format!("  ({})", field(f)))
                        .unwrap_or_default(),
                )
            };
            lines.push(Line::from(format!(
                "{}  {arrow} {}{fate}",
                local_time(line.at_ms),
                field(&line.text)
            )));
        }
    }
    let block = Block::new()
        .borders(Borders::TOP)
        .title(" details · Esc back ");
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}

/// A footer naming `keys`.
fn shorts(keys: &[KeyHelp]) -> String {
    let words: Vec<&str> = keys.iter().map(|key| key.short).collect();
    words.join(" · ")
}

fn help(frame: &mut Frame<'_>, area: Rect) {
    let mut lines: Vec<Line<'static>> = TABLE_KEYS
        .iter()
        .chain(&DETAILS_KEYS)
        .map(|key| Line::from(format!("{:<18}{}", key.keys, key.what)))
        .collect();
    lines.push(Line::from(""));
    lines.push(Line::from(
        "Rows: waiting on their user first, then busy, then idle. MSG: whether the session \
         can be messaged, or what became of the last message sent from here. LAST: when \
         Claude Code last updated its record. Any key closes this help.",
    ));
    let block = Block::new().borders(Borders::TOP).title(" help ");
    frame.render_widget(
        Paragraph::new(lines)
            .block(block)
            .wrap(Wrap { trim: false }),
        area,
    );
}
