//! Human output: aligned tables whose columns each have their own style, the words for
//! times and statuses they show, and the escaping that keeps file contents from
//! steering the terminal.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use claude_peer_registry::{Activity, Record};
use claude_peer_resolve::Entry;
use claude_peer_transcript::Summary;

/// Terminal styling: only on a terminal, and never with `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    pub(crate) color: bool,
}

impl Style {
    /// No colour at all.
    pub(crate) const PLAIN: Self = Self { color: false };

    pub(crate) fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// How the cells of one column are painted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Paint {
    /// As they are.
    Plain,
    /// By the status word they begin with: busy, idle, waiting, anything else dimmed.
    Status,
}

impl Paint {
    fn cell(self, style: Style, text: &str) -> String {
        match self {
            Self::Plain => text.to_owned(),
            Self::Status => {
                let word = text.split(' ').next();
                let activity = [Activity::Waiting, Activity::Busy, Activity::Idle]
                    .into_iter()
                    .find(|a| Some(a.as_str()) == word);
                style.paint(StatusColor::of(activity).sgr(), text)
            }
        }
    }
}

/// The colour of a status wherever one is shown (`list`'s column, `top`'s rows and
/// counts): waiting stands out, busy warns, idle is calm, anything else is dimmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusColor {
    Magenta,
    Yellow,
    Green,
    Dim,
}

impl StatusColor {
    pub(crate) const fn of(activity: Option<Activity>) -> Self {
        match activity {
            Some(Activity::Waiting) => Self::Magenta,
            Some(Activity::Busy) => Self::Yellow,
            Some(Activity::Idle) => Self::Green,
            None => Self::Dim,
        }
    }

    /// Its SGR code, for [`Style::paint`].
    const fn sgr(self) -> &'static str {
        match self {
            Self::Magenta => "35",
            Self::Yellow => "33",
            Self::Green => "32",
            Self::Dim => "2",
        }
    }
}

/// A column: its title and how its cells are painted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub(crate) title: &'static str,
    pub(crate) paint: Paint,
}

impl Column {
    pub(crate) const fn plain(title: &'static str) -> Self {
        Self {
            title,
            paint: Paint::Plain,
        }
    }

    pub(crate) const fn status(title: &'static str) -> Self {
        Self {
            title,
            paint: Paint::Status,
        }
    }
}

/// `text` safe to show on a terminal as one field: every control character (escape
/// sequences, newlines, C1 codes) and every bidirectional override written as `\u{…}`.
/// Names, working directories and paths come from files anyone may have named; what
/// they hold must never steer the user's terminal or forge a line.
pub(crate) fn field(text: &str) -> Cow<'_, str> {
    escape(text, |c| c.is_control() || is_bidi_control(c))
}

/// `text` of this program's own (lines, tabs) with any other control character escaped
/// as [`field`] does, for a sink that prints whole texts.
pub(crate) fn lines(text: &str) -> Cow<'_, str> {
    escape(text, |c| {
        (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
    })
}

fn escape(text: &str, unsafe_char: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&unsafe_char) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().fold(String::new(), |mut out, c| {
        if unsafe_char(c) {
            let _ = write!(out, "{}", c.escape_unicode());
        } else {
            out.push(c);
        }
        out
    }))
}

/// The characters that reorder how text is displayed (embeddings, overrides, isolates).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Renders rows as aligned columns (the last column is not padded).
pub(crate) fn table(columns: &[Column], rows: &[Vec<String>], style: Style) -> String {
    let table = Table::measure(columns, rows, style);
    let mut out = table.header();
    for row in rows {
        out.push_str(&table.row(row));
    }
    out
}

/// Column widths, measured once from the titles and the rows at hand; rows rendered
/// later (a streamed table's) use the same widths, and a longer cell pushes only the
/// rest of its own line to the right.
#[derive(Debug)]
pub(crate) struct Table<'a> {
    columns: &'a [Column],
    widths: Vec<usize>,
    style: Style,
}

impl<'a> Table<'a> {
    pub(crate) fn measure(columns: &'a [Column], rows: &[Vec<String>], style: Style) -> Self {
        let mut widths: Vec<usize> = columns.iter().map(|c| c.title.chars().count()).collect();
        for row in rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(field(cell).chars().count());
            }
        }
        Self {
            columns,
            widths,
            style,
        }
    }

    /// The header line, in bold.
    pub(crate) fn header(&self) -> String {
        let titles: Vec<String> = self.columns.iter().map(|c| c.title.to_owned()).collect();
        self.line(&titles, |_, title| self.style.paint("1", title))
    }

    /// One row's line, each cell painted as its column says.
    pub(crate) fn row(&self, cells: &[String]) -> String {
        self.line(cells, |i, cell| {
            self.columns
                .get(i)
                .map_or(Paint::Plain, |c| c.paint)
                .cell(self.style, cell)
        })
    }

    fn line(&self, cells: &[String], painted: impl Fn(usize, &str) -> String) -> String {
        let mut out = String::new();
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            let cell = field(cell);
            let width = self.widths.get(i).copied().unwrap_or(0);
            let pad = if i == last {
                0
            } else {
                width.saturating_sub(cell.chars().count()) + 2
            };
            out.push_str(&painted(i, &cell));
            out.extend(std::iter::repeat_n(' ', pad));
        }
        while out.ends_with(' ') {
            out.pop();
        }
        out.push('\n');
        out
    }
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// `2026-12-02 03:41:07 CET`: `ms` since the epoch as a local date and time, in the
/// system's time zone; the raw number when it is out of range.
pub(crate) fn local_time(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map_or_else(
            || ms.to_string(),
            |at| {
                at.to_zoned_datetime(jiff::tz::TimeZone::system())
                    .strftime("%Y-%m-%d %H:%M:%S %Z")
                    .to_string()
            },
        )
}

/// `3m`, `45s`, `2h`, `5d`: how long ago `then_ms` was.
pub(crate) fn ago(now_ms: u64, then_ms: u64) -> String {
    let secs = now_ms.saturating_sub(then_ms) / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86_400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// The status column: `idle 3m`, `waiting (permission prompt) 10s`, `-`.
pub(crate) fn status_text(record: Option<&Record>, now_ms: u64) -> String {
    let Some(record) = record else {
        return "-".to_owned();
    };
    let word = record
        .status
        .as_ref()
        .map(|status| record.activity().map_or(status.as_str(), |a| a.as_str()));
    status_words(
        word,
        record.waiting_for.as_deref(),
        record.status_updated_at,
        now_ms,
    )
}

/// The status cell of a host's session, from its JSON (as `list --json` prints it).
pub(crate) fn status_of_json(session: &serde_json::Value, now_ms: u64) -> String {
    let text = |key: &str| session[key].as_str();
    let word = text("vendor_status").map(|vendor| text("status").unwrap_or(vendor));
    status_words(
        word,
        text("waiting_for"),
        session["status_updated_at_ms"].as_u64(),
        now_ms,
    )
}

/// The status cell from its facts, a record's or a host's JSON: `starting` before the
/// first status; what it waits for; for how long.
pub(crate) fn status_words(
    word: Option<&str>,
    waiting_for: Option<&str>,
    since: Option<u64>,
    now_ms: u64,
) -> String {
    let Some(word) = word else {
        return "starting".to_owned();
    };
    let mut text = word.to_owned();
    if let Some(waiting) = waiting_for.filter(|_| word == "waiting") {
        let _ = write!(text, " ({waiting})");
    }
    if let Some(since) = since {
        let _ = write!(text, " {}", ago(now_ms, since));
    }
    text
}

/// One session in full, field by field, as `show` and `top`'s details print it: the
/// fields it has, in a fixed order.
pub(crate) fn session_fields(
    session: &Entry,
    transcript: Option<&Summary>,
    now: u64,
) -> Vec<(&'static str, String)> {
    let record = session.record.as_ref();
    let text = |value: Option<&str>| value.map(str::to_owned);
    let ms =
        |value: Option<u64>| value.map(|at| format!("{} ({} ago)", local_time(at), ago(now, at)));
    let list = |items: Vec<String>| (!items.is_empty()).then(|| items.join(", "));
    let addressable = match &session.addressability {
        claude_peer_resolve::Addressability::Addressable(_) => "yes".to_owned(),
        claude_peer_resolve::Addressability::NotAddressable(why) => format!("no: {why}"),
    };
    let fields: Vec<(&str, Option<String>)> = vec![
        ("name", text(record.and_then(|r| r.name.as_deref()))),
        (
            "name source",
            text(
                record
                    .and_then(|r| r.name_source.as_ref())
                    .map(claude_peer_registry::NameSource::as_str),
            ),
        ),
        (
            "former names",
            list(
                record
                    .and_then(|r| r.former_names.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|f| f.name)
                    .collect(),
            ),
        ),
        ("session id", text(record.map(|r| r.session_id.as_str()))),
        ("status", Some(status_text(record, now))),
        (
            "liveness",
            Some(session.verdict.liveness.as_str().to_owned()),
        ),
        ("reason", session.verdict.reason.clone()),
        ("addressable", Some(addressable)),
        ("pid", session.pid.map(|p| p.to_string())),
        ("cwd", text(record.and_then(|r| r.cwd.as_deref()))),
        ("tmux", text(record.and_then(|r| r.tmux.as_deref()))),
        (
            "socket",
            text(record.and_then(|r| r.messaging_socket_path.as_deref())),
        ),
        (
            "kind",
            text(
                record
                    .and_then(|r| r.kind.as_ref())
                    .map(claude_peer_registry::Kind::as_str),
            ),
        ),
        (
            "entrypoint",
            text(record.and_then(|r| r.entrypoint.as_deref())),
        ),
        ("version", text(record.and_then(|r| r.version.as_deref()))),
        (
            "peer features",
            list(
                record
                    .and_then(|r| r.peer_features.clone())
                    .unwrap_or_default(),
            ),
        ),
        ("started", ms(record.and_then(|r| r.started_at))),
        ("updated", ms(record.and_then(|r| r.updated_at))),
        ("file", Some(session.file.display().to_string())),
        (
            "transcript",
            transcript.map(|t| t.path.display().to_string()),
        ),
        (
            "last prompt",
            transcript.and_then(|t| t.last_prompt.clone()),
        ),
        (
            "last activity",
            ms(transcript.and_then(|t| t.last_activity_ms)),
        ),
    ];
    fields
        .into_iter()
        .filter_map(|(field, value)| Some((field, value?)))
        .collect()
}
