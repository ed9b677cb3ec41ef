//! What the command prints: the JSON contract and the human tables.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use claude_peer_deliver::{Delivered, Outcome};
use claude_peer_registry::{Pid, Record, Verdict};
use claude_peer_resolve::{AddressableSession, LiveSession, Session};
use serde::Serialize;
use serde_json::Value;

/// One session as `list`, `resolve` and `watch` print it. Every key is always present;
/// absent facts are `null`.
#[derive(Debug, Serialize)]
pub(crate) struct SessionJson<'a> {
    file: String,
    pid: Option<u32>,
    session_id: Option<&'a str>,
    name: Option<&'a str>,
    name_source: Option<&'a str>,
    cwd: Option<&'a str>,
    kind: Option<&'a str>,
    entrypoint: Option<&'a str>,
    version: Option<&'a str>,
    status: Option<&'static str>,
    vendor_status: Option<&'a str>,
    waiting_for: Option<&'a str>,
    started_at_ms: Option<u64>,
    updated_at_ms: Option<u64>,
    status_updated_at_ms: Option<u64>,
    tmux: Option<&'a str>,
    socket_path: Option<&'a str>,
    addressable: bool,
    liveness: &'static str,
    reason: Option<&'a str>,
}

impl<'a> SessionJson<'a> {
    pub(crate) fn new(session: &'a Session) -> Self {
        Self::of(
            &session.file,
            session.pid,
            session.record.as_ref(),
            &session.verdict,
            session.addressability.is_addressable(),
        )
    }

    /// A live session: as [`SessionJson::new`] shows it once it is a [`Session`].
    pub(crate) fn live(session: &'a LiveSession) -> Self {
        Self::of(
            &session.file,
            Some(session.pid),
            Some(&session.record),
            &LiveSession::VERDICT,
            session.addressability.is_addressable(),
        )
    }

    /// A resolved session: as [`SessionJson::new`] shows it once it is a [`Session`].
    pub(crate) fn addressable(session: &'a AddressableSession) -> Self {
        Self::of(
            &session.file,
            Some(session.pid),
            Some(&session.record),
            &LiveSession::VERDICT,
            true,
        )
    }

    fn of(
        file: &Path,
        pid: Option<Pid>,
        record: Option<&'a Record>,
        verdict: &'a Verdict,
        addressable: bool,
    ) -> Self {
        let text = |f: fn(&'a Record) -> Option<&'a str>| record.and_then(f);
        Self {
            file: file.display().to_string(),
            pid: pid.map(Pid::get),
            session_id: record.map(|r| r.session_id.as_str()),
            name: text(|r| r.name.as_deref()),
            name_source: record
                .and_then(|r| r.name_source.as_ref())
                .map(claude_peer_registry::NameSource::as_str),
            cwd: text(|r| r.cwd.as_deref()),
            kind: record
                .and_then(|r| r.kind.as_ref())
                .map(claude_peer_registry::Kind::as_str),
            entrypoint: text(|r| r.entrypoint.as_deref()),
            version: text(|r| r.version.as_deref()),
            status: record
                .and_then(Record::activity)
                .map(claude_peer_registry::Activity::as_str),
            vendor_status: record
                .and_then(|r| r.status.as_ref())
                .map(claude_peer_registry::VendorStatus::as_str),
            waiting_for: text(|r| r.waiting_for.as_deref()),
            started_at_ms: record.and_then(|r| r.started_at),
            updated_at_ms: record.and_then(|r| r.updated_at),
            status_updated_at_ms: record.and_then(|r| r.status_updated_at),
            tmux: text(|r| r.tmux.as_deref()),
            socket_path: text(|r| r.messaging_socket_path.as_deref()),
            addressable,
            liveness: verdict.liveness.as_str(),
            reason: verdict.reason.as_deref(),
        }
    }
}

/// `show`: the session object plus everything else the record holds.
#[derive(Debug, Serialize)]
pub(crate) struct SessionDetailJson<'a> {
    #[serde(flatten)]
    session: SessionJson<'a>,
    not_addressable_reason: Option<&'a str>,
    name_since_ms: Option<u64>,
    former_names: Vec<FormerNameJson<'a>>,
    peer_protocol: Option<u64>,
    peer_features: Vec<&'a str>,
    pid_domain: Option<&'a str>,
    proc_start: Option<&'a str>,
    spare: bool,
    parked_job_id: Option<&'a Value>,
}

#[derive(Debug, Serialize)]
struct FormerNameJson<'a> {
    name: &'a str,
    until_ms: Option<u64>,
    session_id: Option<&'a str>,
}

impl<'a> SessionDetailJson<'a> {
    pub(crate) fn new(session: &'a Session) -> Self {
        let record = session.record.as_ref();
        Self {
            session: SessionJson::new(session),
            not_addressable_reason: match &session.addressability {
                claude_peer_resolve::Addressability::Addressable(_) => None,
                claude_peer_resolve::Addressability::NotAddressable(why) => Some(why),
            },
            name_since_ms: record.and_then(|r| r.name_since),
            former_names: record
                .and_then(|r| r.former_names.as_ref())
                .into_iter()
                .flatten()
                .map(|f| FormerNameJson {
                    name: &f.name,
                    until_ms: f.until,
                    session_id: f.session_id.as_deref(),
                })
                .collect(),
            peer_protocol: record.and_then(|r| r.peer_protocol),
            peer_features: record
                .and_then(|r| r.peer_features.as_ref())
                .into_iter()
                .flatten()
                .map(String::as_str)
                .collect(),
            pid_domain: record.and_then(|r| r.pid_domain.as_deref()),
            proc_start: record.and_then(|r| r.proc_start.as_deref()),
            spare: record.is_some_and(|r| r.spare),
            parked_job_id: record.and_then(|r| r.parked_job_id.as_ref()),
        }
    }
}

/// Terminal styling: only on a terminal, and never with `NO_COLOR`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Style {
    pub(crate) color: bool,
}

impl Style {
    pub(crate) fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn status(self, text: &str) -> String {
        let code = match text.split(' ').next() {
            Some("busy") => "33",
            Some("idle") => "32",
            Some("waiting") => "35",
            _ => "2",
        };
        self.paint(code, text)
    }
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
    let Some(status) = &record.status else {
        return "starting".to_owned();
    };
    let word = record.activity().map_or(status.as_str(), |a| a.as_str());
    let mut text = word.to_owned();
    if let Some(waiting) = record.waiting_for.as_deref().filter(|_| word == "waiting") {
        let _ = write!(text, " ({waiting})");
    }
    if let Some(since) = record.status_updated_at {
        let _ = write!(text, " {}", ago(now_ms, since));
    }
    text
}

/// Renders rows as aligned columns (the last column is not padded).
pub(crate) fn table(header: &[&str], rows: &[Vec<String>], style: Style) -> String {
    let columns = Columns::measure(header, rows, style);
    let mut out = columns.header(header);
    for row in rows {
        out.push_str(&columns.row(row));
    }
    out
}

/// Column widths, measured once from a header and the rows at hand; rows rendered
/// later (a streamed table's) use the same widths, and a longer cell pushes only the
/// rest of its own line to the right.
#[derive(Debug)]
pub(crate) struct Columns {
    widths: Vec<usize>,
    style: Style,
}

impl Columns {
    pub(crate) fn measure(header: &[&str], rows: &[Vec<String>], style: Style) -> Self {
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for row in rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        Self { widths, style }
    }

    /// The header line, in bold.
    pub(crate) fn header(&self, header: &[&str]) -> String {
        let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
        self.line(&header, |_, h| self.style.paint("1", h))
    }

    /// One row's line; its second column (the status) is coloured.
    pub(crate) fn row(&self, cells: &[String]) -> String {
        self.line(cells, |i, cell| {
            if i == 1 {
                self.style.status(cell)
            } else {
                cell.to_owned()
            }
        })
    }

    fn line(&self, cells: &[String], painted: impl Fn(usize, &str) -> String) -> String {
        let mut out = String::new();
        let last = cells.len().saturating_sub(1);
        for (i, cell) in cells.iter().enumerate() {
            let width = self.widths.get(i).copied().unwrap_or(0);
            let pad = if i == last {
                0
            } else {
                width.saturating_sub(cell.chars().count()) + 2
            };
            out.push_str(&painted(i, cell));
            out.extend(std::iter::repeat_n(' ', pad));
        }
        while out.ends_with(' ') {
            out.pop();
        }
        out.push('\n');
        out
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct DeliveredJson<'a> {
    delivered: bool,
    session: SessionJson<'a>,
    inbound: &'static str,
    via: &'static str,
    receipt: Option<&'static str>,
    msg_id: Option<&'a str>,
}

impl<'a> DeliveredJson<'a> {
    /// `via` is `claude` or `program`.
    pub(crate) fn new(delivered: &'a Delivered, via: &'static str) -> Self {
        Self {
            delivered: true,
            session: SessionJson::addressable(&delivered.session),
            inbound: delivered.inbound.as_str(),
            via,
            receipt: delivered.receipt.map(Outcome::as_str),
            msg_id: delivered.msg_id.as_deref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use claude_peer_registry::{Pid, Record};
    use claude_peer_resolve::{Addressability, AddressableSession, LiveSession, Session};

    use super::SessionJson;

    #[test]
    fn a_live_or_resolved_session_shows_as_the_session_it_converts_to() {
        let pid = Pid::new(4242).unwrap();
        let body =
            br#"{"sessionId":"s-1","name":"ada","cwd":"/w","messagingSocketPath":"/run/s.sock"}"#;
        let resolved = AddressableSession {
            file: "/h/sessions/4242.json".into(),
            pid,
            record: Record::parse(pid, body).unwrap(),
            socket: "/run/s.sock".into(),
        };
        let not_addressable = LiveSession {
            addressability: Addressability::NotAddressable("parked".into()),
            ..resolved.clone().into()
        };
        let json = |view: SessionJson<'_>| serde_json::to_value(view).unwrap();
        assert_eq!(
            json(SessionJson::addressable(&resolved)),
            json(SessionJson::new(&resolved.clone().into()))
        );
        for live in [resolved.clone().into(), not_addressable] {
            let shown = Session::from(live.clone());
            assert_eq!(
                json(SessionJson::live(&live)),
                json(SessionJson::new(&shown))
            );
        }
    }
}
