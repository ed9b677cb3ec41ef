//! `show`: one session in full, by session id or by the name of one live session.

use claude_peer_resolve::Entry;
use claude_peer_transcript::Summary;

use crate::error::{Exit, Failure};
use crate::json::SessionDetailJson;
use crate::ops::{Context, sessions};
use crate::output::Output;
use crate::table::{Column, Style, now_ms, session_fields, table};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session id, or the name of exactly one live session
    #[arg(value_name = "SESSION_ID|NAME")]
    target: String,
}

pub(crate) fn exec(ctx: &Context, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let session = out.warned(sessions::find(ctx, &args.target))?;
    let transcript = out.warned(sessions::transcript(ctx, &session));
    if out.is_json() {
        out.json(&SessionDetailJson::new(&session, transcript.as_ref()))?;
    } else {
        out.text(&human_show(&session, transcript.as_ref()))?;
    }
    Ok(Exit::Success)
}

fn human_show(session: &Entry, transcript: Option<&Summary>) -> String {
    let rows: Vec<Vec<String>> = session_fields(session, transcript, now_ms())
        .into_iter()
        .map(|(field, value)| vec![field.to_owned(), value])
        .collect();
    table(
        &[Column::plain("FIELD"), Column::plain("VALUE")],
        &rows,
        Style::PLAIN,
    )
}
