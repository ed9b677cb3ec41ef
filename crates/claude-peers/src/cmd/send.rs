//! `send`: one message to one live session, through Claude Code's own `SendMessage`
//! or the user's relay program.

use claude_peer_deliver::{Delivered, Inbound, Outcome};

use crate::cli::SendArgs;
use crate::error::{Exit, Failure};
use crate::json::DeliveredJson;
use crate::ops::Context;
use crate::ops::send::{self, Relayed};
use crate::output::Output;

pub(crate) fn run(ctx: Context, args: SendArgs, out: &Output) -> Result<Exit, Failure> {
    let ctx = ctx.with_managed_settings(args.managed_settings);
    let relay = Relayed::program_or(args.relay, args.timeout, || {
        send::claude(args.claude, args.from, args.timeout)
    })?;
    let message = match args.message {
        Some(message) => message,
        None => send::message_from_stdin()?,
    };
    let delivered = send::send(&ctx, &args.session_id, &message, &relay)?;
    if out.json {
        out.json(&DeliveredJson::new(&delivered, relay.via()))?;
    } else {
        out.text(&sentence(&delivered))?;
    }
    Ok(Exit::Success)
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
