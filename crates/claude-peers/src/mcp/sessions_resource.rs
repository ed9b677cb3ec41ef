//! `claude-peers://sessions`: the live list as `list --json` prints it, and a
//! `notifications/resources/updated` to a subscribed client whenever it changes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{Discovery, Scope};
use rmcp::model::{
    ReadResourceResult, Resource, ResourceContents, ResourceUpdatedNotificationParam,
};
use rmcp::{ErrorData, Peer, RoleServer};

use crate::commands::scan;
use crate::output::Failure;
use crate::view::SessionJson;
use crate::watch::POLL_EVERY;

/// The resource's one URI.
pub(crate) const URI: &str = "claude-peers://sessions";

/// The resource and its subscription.
#[derive(Debug, Clone)]
pub(crate) struct SessionsResource {
    home: ClaudeHome,
    subscribed: Arc<AtomicBool>,
    watching: Arc<AtomicBool>,
}

impl SessionsResource {
    pub(crate) fn new(home: ClaudeHome) -> Self {
        Self {
            home,
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
        let list = live_list_off_loop(self.home.clone()).await?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(list, URI).with_mime_type("application/json"),
        ]))
    }

    /// Starts watching (once per server) from the list as it is now.
    pub(crate) async fn subscribe(&self, peer: Peer<RoleServer>) -> Result<(), ErrorData> {
        self.subscribed.store(true, Ordering::Release);
        if !self.watching.swap(true, Ordering::AcqRel) {
            let first = live_list_off_loop(self.home.clone()).await;
            let first = first.inspect_err(|_| self.watching.store(false, Ordering::Release))?;
            tokio::spawn(notify_changes(
                self.home.clone(),
                first,
                Arc::clone(&self.subscribed),
                peer,
            ));
        }
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

/// Tells `peer` whenever the live list differs from the last one seen, while it is
/// subscribed; ends when the client has gone.
async fn notify_changes(
    home: ClaudeHome,
    mut last: String,
    subscribed: Arc<AtomicBool>,
    peer: Peer<RoleServer>,
) {
    loop {
        tokio::time::sleep(POLL_EVERY).await;
        // An unreadable registry now is no change to report; the next scan tries again.
        let Ok(now) = live_list_off_loop(home.clone()).await else {
            continue;
        };
        if now == last {
            continue;
        }
        last = now;
        if subscribed.load(Ordering::Acquire)
            && peer
                .notify_resource_updated(ResourceUpdatedNotificationParam::new(URI))
                .await
                .is_err()
        {
            return;
        }
    }
}

async fn live_list_off_loop(home: ClaudeHome) -> Result<String, ErrorData> {
    tokio::task::spawn_blocking(move || live_list(&home))
        .await
        .map_err(|err| ErrorData::internal_error(err.to_string(), None))?
        .map_err(|failure| ErrorData::internal_error(failure.json(), None))
}

/// The change source: a fresh scan of the live sessions, as `list --json` prints them.
fn live_list(home: &ClaudeHome) -> Result<String, Failure> {
    let scan = scan(&Discovery::os(), home, Scope::Live, &super::diagnostics())?;
    let sessions: Vec<SessionJson<'_>> = scan.sessions.iter().map(SessionJson::new).collect();
    serde_json::to_string(&sessions).map_err(|err| Failure::error("internal", err.to_string()))
}
