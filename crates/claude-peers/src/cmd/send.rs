//! `send`: one message to one live session, through Claude Code's own `SendMessage`
//! or the user's relay program.

use std::io::{self, Read};

use claude_peer_deliver::{CommandRelay, Courier, Delivered, Inbound, MAX_MESSAGE_BYTES, Outcome};
use claude_peer_registry::ClaudeHome;

use crate::cli::SendArgs;
use crate::context::claude_relay;
use crate::error::{Exit, Failure};
use crate::output::Output;
use crate::view::DeliveredJson;

pub(crate) fn run(home: &ClaudeHome, how: SendArgs, out: &Output) -> Result<Exit, Failure> {
    let session_id = how.session_id.as_str();
    let courier = Courier::os().with_managed_settings(&how.managed_settings);
    let mut relay = how.relay.into_iter();
    let (delivered, via) = if let Some(program) = relay.next() {
        let message = message(how.message)?;
        let relay = CommandRelay::new(program).args(relay).timeout(how.timeout);
        (
            courier.deliver(home, session_id, &message, &relay)?,
            "program",
        )
    } else {
        let relay = claude_relay(how.claude, how.from, how.timeout)?;
        let message = message(how.message)?;
        (
            courier.deliver(home, session_id, &message, &relay)?,
            "claude",
        )
    };
    if out.json {
        out.json(&DeliveredJson::new(&delivered, via))?;
    } else {
        out.text(&sentence(&delivered))?;
    }
    Ok(Exit::Success)
}

fn message(flag: Option<String>) -> Result<String, Failure> {
    flag.map_or_else(read_stdin, Ok)
}

fn sentence(delivered: &Delivered) -> String {
    let session = &delivered.session;
    let name = session.record.display_name().unwrap_or("the session");
    let pid = session.pid;
    let msg_id = delivered
        .msg_id
        .as_deref()
        .map_or_else(String::new, |id| format!(" (msg_id {id})"));
    match delivered.receipt {
        Some(Outcome::Held) => format!(
            "Sent to {name} (pid {pid}) and held: the receiving user must approve it{msg_id}.\n"
        ),
        Some(_) => {
            format!("Delivered to {name} (pid {pid}): it accepted the message{msg_id}.\n")
        }
        None => {
            let how = match delivered.inbound {
                Inbound::Automatic => "it accepts messages automatically",
                Inbound::MayHold => "it may hold the message until its user approves it",
            };
            let detail = delivered
                .detail
                .as_deref()
                .map_or_else(String::new, |d| format!(" Relay: {d}."));
            format!("Delivered to {name} (pid {pid}); {how}.{detail}\n")
        }
    }
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
