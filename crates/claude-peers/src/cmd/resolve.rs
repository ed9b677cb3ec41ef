//! `resolve`: whether a session id names one live, addressable session now.

use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::Discovery;

use crate::error::{Exit, Failure};
use crate::output::Output;
use crate::view::SessionJson;

pub(crate) fn run(home: &ClaudeHome, session_id: &str, out: &Output) -> Result<Exit, Failure> {
    let session = Discovery::os().resolve_live_session(home, session_id)?;
    if out.json {
        out.json(&SessionJson::addressable(&session))?;
    } else {
        out.text(&format!(
            "{} is live and addressable: pid {}, name {}, socket {}.\n",
            session_id,
            session.pid,
            session.record.name.as_deref().unwrap_or("(none)"),
            session.socket.display(),
        ))?;
    }
    Ok(Exit::Success)
}
