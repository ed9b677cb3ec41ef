//! `resolve`: whether a session id, or the name of one live session, names one live,
//! addressable session now.

use crate::error::{Exit, Failure};
use crate::json::SessionJson;
use crate::ops::{Context, sessions};
use crate::output::Output;
use crate::table::field;

pub(crate) fn run(ctx: &Context, session_id: &str, out: &Output) -> Result<Exit, Failure> {
    let session = sessions::resolve(ctx, session_id, out)?;
    if out.json {
        out.json(&SessionJson::addressable(&session))?;
    } else {
        out.text(&format!(
            "{} is live and addressable: pid {}, name {}, socket {}.\n",
            field(session_id),
            session.pid,
            field(session.record.name.as_deref().unwrap_or("(none)")),
            field(&session.socket.to_string_lossy()),
        ))?;
    }
    Ok(Exit::Success)
}
