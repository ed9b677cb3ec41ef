//! `send --queue`: a message handed to the post office, which keeps it until its
//! receiver can take it.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use claude_peer_post::protocol::{Record, Request};

use crate::error::{Exit, Failure};
use crate::json::{QueuedJson, QueuedResultsJson};
use crate::ops::post::{self, Start};
use crate::ops::{self, Context, absolute};
use crate::output::Output;
use crate::table::field;

/// What to queue, and for whom.
#[derive(Debug)]
pub(crate) struct Order {
    pub(crate) targets: Vec<String>,
    pub(crate) cwd: Option<PathBuf>,
    pub(crate) from: String,
    pub(crate) text: String,
    pub(crate) expire: Duration,
    pub(crate) key: Option<String>,
    /// The message it answers, by post id.
    pub(crate) in_reply_to: Option<String>,
}

/// Each address of an order, and its record or why it was not queued.
pub(crate) type Queued = Vec<(String, Result<Record, Failure>)>;

/// Hands `order` to this user's post office (started, with `claude` as its sender's
/// Claude Code, when none runs): one message for each address, in order.
pub(crate) fn post_all(
    ctx: &Context,
    order: &Order,
    claude: Option<PathBuf>,
) -> Result<Queued, Failure> {
    claude_peer_sender::check_sender_name(&order.from).map_err(ops::Error::from)?;
    let mut addresses: Vec<(String, &str, String)> = order
        .targets
        .iter()
        .map(|target| (target.clone(), kind_of(target), target.clone()))
        .collect();
    if let Some(dir) = &order.cwd {
        // As the sessions report theirs: links resolved, where the directory exists.
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| absolute(dir.clone()));
        let dir = dir.to_string_lossy().into_owned();
        addresses.push((dir.clone(), "cwd", dir));
    }
    if addresses.is_empty() {
        return Err(ops::Error::NoTarget.into());
    }
    let mut client = post::connect(ctx, Some(&Start { claude }))?;
    let expire_ms = u64::try_from(order.expire.as_millis()).unwrap_or(u64::MAX);
    let mut results = Vec::new();
    for (target, to_kind, to) in addresses {
        let request = Request::Post {
            from: order.from.clone(),
            key: order.key.clone(),
            to_kind: to_kind.to_owned(),
            to,
            text: order.text.clone(),
            expire_ms,
            in_reply_to: order.in_reply_to.clone(),
        };
        let answer = client
            .request(&request, |_| {})
            .map_err(ops::Error::from)
            .and_then(|done| done.record.ok_or(ops::Error::NoRecord));
        results.push((target, answer.map_err(Failure::from)));
    }
    Ok(results)
}

pub(crate) fn exec(
    ctx: &Context,
    order: &Order,
    claude: Option<PathBuf>,
    out: &Output,
) -> Result<Exit, Failure> {
    let results = post_all(ctx, order, claude)?;
    let failed = results.iter().filter(|(_, r)| r.is_err()).count();
    if let [(_, only)] = results.as_slice() {
        let record = only.as_ref().map_err(Clone::clone)?;
        if out.is_json() {
            out.json(&QueuedJson::new(record))?;
        } else {
            out.text(&sentence(record))?;
        }
        return Ok(Exit::Success);
    }
    if out.is_json() {
        out.json(&QueuedResultsJson::new(&results))?;
    } else {
        let mut text = String::new();
        for (target, result) in &results {
            match result {
                Ok(record) => {
                    let _ = write!(text, "{}: {}", field(target), sentence(record));
                }
                Err(failure) => {
                    let _ = writeln!(
                        text,
                        "{}: {}: {}",
                        field(target),
                        failure.name,
                        field(&failure.message)
                    );
                }
            }
        }
        out.text(&text)?;
    }
    Ok(if failed == 0 {
        Exit::Success
    } else {
        Exit::Error
    })
}

/// A target's kind of address, as the record shows it and `log --to` finds it: a session
/// id when it is UUID-shaped, else a name. Each attempt resolves either by the one target
/// rule (an id, or else the name of one live session), so the shape decides no delivery.
fn kind_of(target: &str) -> &'static str {
    if claude_peer_registry::is_uuid(target) {
        "session_id"
    } else {
        "name"
    }
}

fn sentence(record: &Record) -> String {
    let reason = record
        .reason
        .as_deref()
        .map(|r| format!(" ({})", field(r)))
        .unwrap_or_default();
    format!(
        "Queued as {} for {} {}: {}{reason}.\n",
        record.id,
        record.to_kind,
        field(&record.to),
        record.state
    )
}

#[cfg(test)]
mod tests {
    use super::kind_of;

    #[test]
    fn a_uuid_is_a_session_id_and_anything_else_a_name() {
        assert_eq!(
            kind_of("8668bde0-50ff-4b1e-a7dc-8a4dcbefad57"),
            "session_id"
        );
        assert_eq!(
            kind_of("8668BDE0-50FF-4B1E-A7DC-8A4DCBEFAD57"),
            "session_id"
        );
        for name in [
            "reviewer",
            "8668bde0-50ff-4b1e-a7dc",
            "8668bde0-50ff-4b1e-a7dc-8a4dcbefad5z",
            "",
        ] {
            assert_eq!(kind_of(name), "name", "{name}");
        }
    }
}
