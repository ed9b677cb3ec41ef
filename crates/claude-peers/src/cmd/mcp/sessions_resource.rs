//! `claude-peers://sessions`: the live list as `list --json` prints it, and a
//! `notifications/resources/updated` to a subscribed client whenever it changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use claude_peer_probe::{OsNotifier, OsProcessTable, OsRegistryFs};
use claude_peer_resolve::Scope;
use claude_peer_watch::Watcher;
use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::{ErrorData, Peer, RoleServer};
use tokio::sync::mpsc;

use crate::error::Failure;
use crate::json::SessionJson;
use crate::ops::{Context, sessions};

/// The resource's one URI.
pub(crate) const URI: &str = "claude-peers://sessions";

/// How often the watch thread looks whether the server still listens.
const LISTENER_CHECK: Duration = Duration::from_secs(1);

/// The resource and its subscription.
#[derive(Debug, Clone)]
pub(crate) struct SessionsResource {
    ctx: Context,
    subscribed: Arc<AtomicBool>,
    watching: Arc<AtomicBool>,
}

impl SessionsResource {
    pub(crate) fn new(ctx: Context) -> Self {
        Self {
            ctx,
            subscribed: Arc::new(AtomicBool::new(false)),
            watching: Arc::new(AtomicBool::new(false)),
        }
    }

    /// How `resources/list` shows it.
    pub(crate) fn describe() -> Resource {
        Resource::new(URI, "sessions")
            .with_title("Live Claude Code sessions")
            .with_description(
                "The live Claude Code sessions on this machine, as `claude-peers list --json` prints them; subscribe to hear when the set or a session changes.",
            )
            .with_mime_type("application/json")
    }

    pub(crate) async fn read(&self) -> Result<ReadResourceResult, ErrorData> {
        let list = live_list_off_loop(self.ctx.clone()).await?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(list, URI).with_mime_type("application/json"),
        ]))
    }

    /// Starts watching (once per server, again after a watch ended) from the sessions
    /// live now.
    pub(crate) async fn subscribe(&self, peer: Peer<RoleServer>) -> Result<(), ErrorData> {
        self.subscribed.store(true, Ordering::Release);
        if self.watching.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let home = self.ctx.home.clone();
        let started = tokio::task::spawn_blocking(move || start_watch(home))
            .await
            .map_err(|err| ErrorData::internal_error(err.to_string(), None))
            .and_then(|watch| {
                watch.map_err(|failure| ErrorData::internal_error(failure.json(), None))
            });
        let watcher = started.inspect_err(|_| self.watching.store(false, Ordering::Release))?;
        let (news, mut heard) = mpsc::unbounded_channel();
        thread::Builder::new()
            .name("mcp-sessions-watch".to_owned())
            .spawn(move || announce_changes(watcher, &news))
            .map_err(|err| {
                self.watching.store(false, Ordering::Release);
                ErrorData::internal_error(format!("cannot start the sessions watch: {err}"), None)
            })?;
        let (subscribed, watching) = (Arc::clone(&self.subscribed), Arc::clone(&self.watching));
        tokio::spawn(async move {
            while heard.recv().await.is_some() {
                if subscribed.load(Ordering::Acquire)
                    && peer
                        .notify_resource_updated(ResourceUpdatedNotificationParam::new(URI))
                        .await
                        .is_err()
                {
                    break; // The client has gone.
                }
            }
            watching.store(false, Ordering::Release);
        });
        Ok(())
    }

    pub(crate) fn unsubscribe(&self) {
        self.subscribed.store(false, Ordering::Release);
    }
}

/// A request for another resource is the client's mistake: a JSON-RPC error naming it.
pub(crate) fn check_uri(uri: &str) -> Result<(), ErrorData> {
    if uri == URI {
        Ok(())
    } else {
        Err(ErrorData::resource_not_found(
            format!("no resource `{uri}`: this server has only `{URI}`"),
            None,
        ))
    }
}

type OsWatcher = Watcher<OsProcessTable, OsRegistryFs, OsNotifier>;

/// A watch of `home` with the sessions live now taken: only what changes from here on
/// is announced.
fn start_watch(home: claude_peer_registry::ClaudeHome) -> Result<OsWatcher, Failure> {
    let mut watcher = Watcher::os(home)?;
    let diagnostics = super::diagnostics();
    for warning in watcher.warnings() {
        diagnostics.warn(&warning.to_string());
    }
    while watcher.next_event(Duration::ZERO)?.is_some() {}
    Ok(watcher)
}

/// The change source: the watch engine's events (a session appeared, changed or
/// vanished), one announcement per batch. Ends when the server stops listening, or,
/// said on stderr, when the watch cannot go on.
fn announce_changes(mut watcher: OsWatcher, news: &mpsc::UnboundedSender<()>) {
    loop {
        match watcher.next_event(LISTENER_CHECK) {
            Ok(Some(_)) => {
                while let Ok(Some(_)) = watcher.next_event(Duration::ZERO) {}
                if news.send(()).is_err() {
                    return;
                }
            }
            Ok(None) if news.is_closed() => return,
            Ok(None) => {}
            Err(err) => {
                super::diagnostics().warn(&format!("the sessions watch stopped: {err}"));
                return;
            }
        }
    }
}

async fn live_list_off_loop(ctx: Context) -> Result<String, ErrorData> {
    tokio::task::spawn_blocking(move || live_list(&ctx))
        .await
        .map_err(|err| ErrorData::internal_error(err.to_string(), None))?
        .map_err(|failure| ErrorData::internal_error(failure.json(), None))
}

/// The change source: a fresh scan of the live sessions, as `list --json` prints them.
fn live_list(ctx: &Context) -> Result<String, Failure> {
    let found = super::diagnostics().warned(sessions::scan(ctx, Scope::Live))?;
    let sessions: Vec<SessionJson<'_>> = found.iter().map(SessionJson::new).collect();
    serde_json::to_string(&sessions).map_err(|err| Failure::error("internal", err.to_string()))
}
