//! `resolve`: whether a session id, or the name of one live session, names one live,
//! addressable session now.

use crate::error::{Exit, Failure};
use crate::json::SessionJson;
use crate::ops::{Context, sessions};
use crate::output::Output;
use crate::table::field;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session id, or the name of exactly one live session
    #[arg(value_name = "SESSION_ID|NAME")]
    target: String,
}

pub(crate) fn exec(ctx: &Context, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let session = out.warned(sessions::resolve(ctx, &args.target))?;
    if out.is_json() {
        out.json(&SessionJson::addressable(&session))?;
    } else {
        out.text(&format!(
            "{} is live and addressable: pid {}, name {}, socket {}.\n",
            field(&args.target),
            session.pid,
            field(session.record.name.as_deref().unwrap_or("(none)")),
            field(&session.socket.to_string_lossy()),
        ))?;
    }
    Ok(Exit::Success)
}
