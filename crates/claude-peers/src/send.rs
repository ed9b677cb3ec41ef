//! `send`: one message to one live session, through the user's relay program.

use std::ffi::OsString;
use std::io::{self, Read};
use std::path::PathBuf;
use std::time::Duration;

use claude_peer_registry::ClaudeHome;
use claude_peer_relay::{CommandRelay, Courier, Delivered, MAX_MESSAGE_BYTES};
use serde::Serialize;

use crate::commands::Fail;
use crate::output::{Exit, Failure, Output};
use crate::view::SessionJson;

#[derive(Debug, Serialize)]
struct DeliveredJson<'a> {
    delivered: bool,
    session: SessionJson<'a>,
    inbound: &'static str,
}

pub(crate) fn run(
    home: &ClaudeHome,
    session_id: &str,
    message: Option<String>,
    timeout: Duration,
    managed_settings: PathBuf,
    relay: Vec<OsString>,
    out: &Output,
) -> Result<Exit, Fail> {
    let message = match message {
        Some(message) => message,
        None => read_stdin()?,
    };
    let mut relay = relay.into_iter();
    let program = relay
        .next()
        .ok_or_else(|| Failure::error("no_relay", "no relay program given after `--`"))?;
    let relay = CommandRelay::new(program).args(relay).timeout(timeout);
    let delivered = Courier::os()
        .with_managed_settings(managed_settings)
        .deliver(home, session_id, &message, &relay)?;
    if out.json {
        out.json(&DeliveredJson {
            delivered: true,
            session: SessionJson::new(&delivered.session),
            inbound: delivered.inbound.as_str(),
        })?;
    } else {
        out.text(&sentence(&delivered))?;
    }
    Ok(Exit::Success)
}

fn sentence(delivered: &Delivered) -> String {
    let record = delivered.session.record.as_ref();
    let name = record
        .and_then(claude_peer_registry::Record::display_name)
        .unwrap_or("the session");
    let pid = delivered
        .session
        .pid
        .map_or(0, claude_peer_registry::Pid::get);
    let how = match delivered.inbound {
        claude_peer_relay::Inbound::Automatic => "it accepts messages automatically",
        claude_peer_relay::Inbound::MayHold => "it may hold the message until its user approves it",
    };
    let detail = delivered
        .detail
        .as_deref()
        .map_or_else(String::new, |d| format!(" Relay: {d}."));
    format!("Delivered to {name} (pid {pid}); {how}.{detail}\n")
}

/// The message from stdin: at most one byte past the limit is read, and it must be UTF-8.
fn read_stdin() -> Result<String, Failure> {
    let mut bytes = Vec::new();
    io::stdin()
        .take(MAX_MESSAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| {
            Failure::error(
                "stdin_unreadable",
                format!("cannot read the message from stdin: {err}"),
            )
        })?;
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(Failure::error(
            "message_too_large",
            format!(
                "the message on stdin is above the limit of {MAX_MESSAGE_BYTES} bytes (64 KiB); nothing was relayed"
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        Failure::error(
            "message_not_utf8",
            "the message on stdin is not UTF-8; nothing was relayed",
        )
    })
}
