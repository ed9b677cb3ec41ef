//! `show`: one session in full, by session id or by the name of one live session.

use claude_peer_resolve::Session;
use claude_peer_transcript::Summary;

use crate::error::{Exit, Failure};
use crate::json::SessionDetailJson;
use crate::ops::{Context, sessions};
use crate::output::Output;
use crate::table::{Column, Style, ago, local_time, now_ms, status_text, table};

pub(crate) fn run(ctx: &Context, target: &str, out: &Output) -> Result<Exit, Failure> {
    let session = sessions::find(ctx, target, out)?;
    let transcript = sessions::transcript(ctx, &session, out);
    if out.json {
        out.json(&SessionDetailJson::new(&session, transcript.as_ref()))?;
    } else {
        out.text(&human_show(&session, transcript.as_ref()))?;
    }
    Ok(Exit::Success)
}

fn human_show(session: &Session, transcript: Option<&Summary>) -> String {
    let now = now_ms();
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
    let rows: Vec<Vec<String>> = fields
        .into_iter()
        .filter_map(|(field, value)| Some(vec![field.to_owned(), value?]))
        .collect();
    table(
        &[Column::plain("FIELD"), Column::plain("VALUE")],
        &rows,
        Style::PLAIN,
    )
}
