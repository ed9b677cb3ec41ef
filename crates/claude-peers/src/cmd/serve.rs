//! `serve`: the post office in the foreground, until a stop signal or its idle exit.
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use std::path::PathBuf;
use std::sync::Arc;

use claude_peer_post::{
    DEFAULT_IDLE_EXIT, PostOffice, Server, Store, WarmSenders, default_store_path,
};
use claude_peer_sender::Mailbox;

use crate::args::{ManagedSettingsArg, SenderArgs, Span, TimeoutArg, since, span};
use crate::config::Config;
use crate::error::{Exit, Failure};
use crate::ops::{self, Context, send};
use crate::output::Output;
use crate::signals;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    sender: SenderArgs,
    #[command(flatten)]
    timeout: TimeoutArg,
    #[command(flatten)]
    managed_settings: ManagedSettingsArg,
    /// How long to stay with nothing waiting and no client; 0 stays until stopped
    #[arg(long, value_name = "DURATION", default_value_t = Span(DEFAULT_IDLE_EXIT), value_parser = span)]
    idle_exit: Span,
    /// The store [default: $XDG_STATE_HOME/claude-peers/post.db, else
    /// ~/.local/state/claude-peers/post.db]
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    /// How many messages the history keeps: the oldest final ones beyond it are pruned
    /// [default: history.keep in config.toml, else 1000000]
    #[arg(long, value_name = "N")]
    keep: Option<u64>,
    /// How long the history keeps a final message: 90d, 12h [default: history.keep_for in
    /// config.toml, else 90d]
    #[arg(long, value_name = "DURATION", value_parser = since)]
    keep_for: Option<Span>,
    /// The directory of its lock and socket [default: claude-peers under
    /// $XDG_RUNTIME_DIR, else $XDG_CACHE_HOME, else ~/.cache]
    #[arg(long, value_name = "DIR")]
    runtime_dir: Option<PathBuf>,
}

pub(crate) fn exec(ctx: Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let ctx = ctx.with_managed_settings(args.managed_settings.path);
    let retention = Config::load()?.retention(args.keep, args.keep_for.map(|span| span.0));
    let relay = send::guarded(
        &ctx,
        &send::claude(
            args.sender.claude.path,
            args.sender.from,
            args.timeout.span.0,
        )?,
    )?;
    // One warm sender for each sender name, through the same gate as `send`.
    let senders = {
        let ctx = ctx.clone();
        WarmSenders::new(Arc::new(move |from: &str| {
            let relay = relay.clone().from(from);
            Mailbox::with_courier(ctx.courier(), ctx.home.clone(), &relay)
        }))
    };
    let store = match args.store {
        Some(path) => ops::absolute(path),
        None => default_store_path().map_err(ops::Error::from)?,
    };
    let runtime = args
        .runtime_dir
        .map(ops::absolute)
        .or_else(claude_peer_sender::default_runtime_dir)
        .ok_or(ops::Error::NoHome)?;
    let store = Store::open(&store).map_err(ops::Error::from)?;
    let server = Server::bind(&runtime).map_err(ops::Error::from)?;
    let stopper = server.stopper();
    signals::watch(move |_| stopper.stop(), || {})?;
    out.warn(&format!(
        "post office: pid {}, socket {}, store {}",
        std::process::id(),
        server.socket().display(),
        store.path().display()
    ));
    let idle_exit = Some(args.idle_exit.0).filter(|idle| !idle.is_zero());
    let office =
        PostOffice::new(store, ctx.courier(), ctx.home.clone(), senders).with_retention(retention);
    server
        .run(office, &ctx.home, idle_exit)
        .map_err(ops::Error::from)?;
    Ok(Exit::Success)
}
