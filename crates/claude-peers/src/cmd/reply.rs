//! `reply`: an answer to a message that came in, to the session it came from, linked to
//! it (`in_reply_to`).
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use crate::args::{ManagedSettingsArg, SenderArgs, TimeoutArg};
use crate::cmd::send;
use crate::error::{Exit, Failure};
use crate::ops::Context;
use crate::ops::history;
use crate::output::Output;

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
    let to = history::reply_to(&ctx, &args.id)?;
    let send = send::Args::reply(
        to.target,
        args.message,
        args.sender,
        args.timeout,
        args.managed_settings,
        to.queue,
        to.answers,
    );
    send::exec(ctx, send, out)
}
