//! `log`: every message sent through the post office, newest first, with its timeline.
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use claude_peer_post::protocol::Request;

use crate::args::{ClaudeArg, Span, since};
use crate::cmd::outbox::{Printer, Timeline};
use crate::error::{Exit, Failure};
use crate::ops::post::{self, Start};
use crate::ops::{self, Context};
use crate::output::Output;
use crate::table::now_ms;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only messages to this session id, name or directory
    #[arg(long, value_name = "TARGET")]
    to: Option<String>,
    /// Only messages posted within this long: 90s, 10m, 2h, 3d
    #[arg(long, value_name = "DURATION", value_parser = since)]
    since: Option<Span>,
    /// Only messages in this state (waiting, sending, delivered, refused, expired,
    /// cancelled, unknown)
    #[arg(long, value_name = "STATE")]
    state: Option<String>,
    /// At most this many
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    #[command(flatten)]
    claude: ClaudeArg,
}

pub(crate) fn exec(ctx: &Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let start = Start {
        claude: args.claude.path,
    };
    let mut client = post::connect(ctx, Some(&start))?;
    let since_ms = args.since.map(|span| {
        let back = u64::try_from(span.0.as_millis()).unwrap_or(u64::MAX);
        now_ms().saturating_sub(back)
    });
    let request = Request::Log {
        to: args.to,
        state: args.state,
        since_ms,
        limit: args.limit,
    };
    let mut printer = Printer::new(out, Timeline::Shown);
    client
        .request(&request, |record| printer.print(&record))
        .map_err(ops::Error::from)?;
    printer.end()?;
    Ok(Exit::Success)
}
