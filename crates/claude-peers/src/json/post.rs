//! What `send --queue` prints. The message record itself (`outbox`, `log`, the post
//! office's protocol) is `claude_peer_post::protocol::Record`, printed as it is.

use claude_peer_post::protocol::Record;
use serde::Serialize;

use crate::error::Failure;

/// One queued message: `{"queued":true,"id","state","reason","expires_at_ms"}`.
#[derive(Debug, Serialize)]
pub(crate) struct QueuedJson<'a> {
    queued: bool,
    id: &'a str,
    state: &'a str,
    reason: Option<&'a str>,
    expires_at_ms: u64,
}

impl<'a> QueuedJson<'a> {
    pub(crate) fn new(record: &'a Record) -> Self {
        Self {
            queued: true,
            id: &record.id,
            state: &record.state,
            reason: record.reason.as_deref(),
            expires_at_ms: record.expires_at_ms,
        }
    }
}

/// Several targets queued: each answered with its target, then the counts.
#[derive(Debug, Serialize)]
pub(crate) struct QueuedResultsJson<'a> {
    results: Vec<QueuedResultJson<'a>>,
    queued: usize,
    failed: usize,
}

#[derive(Debug, Serialize)]
#[serde(untagged)]
enum QueuedResultJson<'a> {
    Queued {
        target: &'a str,
        #[serde(flatten)]
        queued: QueuedJson<'a>,
    },
    Failed {
        target: &'a str,
        error: &'a str,
        message: &'a str,
    },
}

impl<'a> QueuedResultsJson<'a> {
    pub(crate) fn new(results: &'a [(String, Result<Record, Failure>)]) -> Self {
        let results: Vec<QueuedResultJson<'a>> = results
            .iter()
            .map(|(target, result)| match result {
                Ok(record) => QueuedResultJson::Queued {
                    target,
                    queued: QueuedJson::new(record),
                },
                Err(failure) => QueuedResultJson::Failed {
                    target,
                    error: failure.name,
                    message: &failure.message,
                },
            })
            .collect();
        let failed = results
            .iter()
            .filter(|r| matches!(r, QueuedResultJson::Failed { .. }))
            .count();
        Self {
            queued: results.len() - failed,
            failed,
            results,
        }
    }
}
