//! `reply`: an answer to a message that came in, to the session it came from, linked to
//! it (`in_reply_to`).
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use claude_peer_post::{Direction, Store, default_store_path};
use claude_peer_resolve::Scope;

use crate::args::{ManagedSettingsArg, SenderArgs, TimeoutArg};
use crate::cmd::send;
use crate::error::{Exit, Failure};
use crate::ops::{self, Context};
use crate::output::Output;
use crate::table::field;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The post id of the message to answer (one that came in, as log lists it)
    #[arg(value_name = "ID")]
    id: String,
    /// The reply [default: read from stdin]
    #[arg(long, value_name = "TEXT")]
    message: Option<String>,
    #[command(flatten)]
    sender: SenderArgs,
    #[command(flatten)]
    timeout: TimeoutArg,
    #[command(flatten)]
    managed_settings: ManagedSettingsArg,
}

pub(crate) fn exec(ctx: Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let ctx = ctx.with_managed_settings(args.managed_settings.path.clone());
    let store = Store::open(&default_store_path().map_err(ops::Error::from)?)
        .map_err(ops::Error::from)?;
    let message = store
        .get(&args.id)
        .map_err(ops::Error::from)?
        .ok_or_else(|| ops::Error::from(claude_peer_post::Error::NoSuchMessage(args.id.clone())))?;
    if message.direction != Direction::In {
        return Err(Failure::error(
            "not_a_message_in",
            format!(
                "message {} was sent from here (to {}): reply answers a message that came in",
                message.id,
                field(message.to.value())
            ),
        ));
    }
    // Its session while it lives (sent now, its receipt reported); else whichever session
    // holds its name, through the post office when one does.
    let live = message.session_id.as_ref().filter(|id| {
        ctx.courier()
            .discovery()
            .roster(&ctx.home, Scope::Live)
            .is_ok_and(|roster| roster.resolve(id).is_ok())
    });
    let (target, queue) = match (live, &message.session_name) {
        (Some(id), _) => (id.clone(), false),
        (None, Some(name)) => (name.clone(), true),
        (None, None) => {
            return Err(Failure::error(
                "no_reply_address",
                format!(
                    "message {} came from session {}, which is not live and gave no name: nothing can reach it",
                    message.id,
                    field(message.session_id.as_deref().unwrap_or(&message.from))
                ),
            ));
        }
    };
    let send = send::Args::reply(
        target,
        args.message,
        args.sender,
        args.timeout,
        args.managed_settings,
        queue,
        message.id,
    );
    send::exec(ctx, send, out)
}
