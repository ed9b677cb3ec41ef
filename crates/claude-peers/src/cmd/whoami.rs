//! `whoami`: the live session this command runs under, through its parent processes.

use crate::error::{Exit, Failure};
use crate::json::{SessionJson, WhoamiJson};
use crate::ops::{Context, sessions, whoami};
use crate::output::Output;
use crate::table::field;

pub(crate) fn run(ctx: &Context, out: &Output) -> Result<Exit, Failure> {
    out.warn_all(&sessions::registry_warnings(ctx));
    let session = whoami::whoami(ctx, std::process::id())?;
    if out.is_json() {
        out.json(&WhoamiJson {
            session: SessionJson::live(&session),
        })?;
    } else {
        let record = &session.record;
        out.text(&format!(
            "This runs under the live session {} ({}): pid {}, cwd {}.\n",
            field(record.display_name().unwrap_or("(no name)")),
            field(&record.session_id),
            session.pid,
            field(record.cwd.as_deref().unwrap_or("(unknown)")),
        ))?;
    }
    Ok(Exit::Success)
}
