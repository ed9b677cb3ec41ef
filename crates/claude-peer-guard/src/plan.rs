//! The plan files of one tool call, all named after its `tool_use_id` in the plans
//! directory: the plan (`<id>.json`), written by the sender before it asks for the call
//! and read by the `pre-tool-use` hook in another process at the moment of the call; the
//! hook's marker of the call made (`<id>.used`), its note of a blocked canary
//! (`<id>.blocked`) and of a refusal (`<id>.refusal.json`).

use std::fs::{self, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use claude_peer_deliver::{Recipient, Refusal, RefusalKind};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The largest plan read back: a message, JSON-escaped, and its target.
const MAX_PLAN_BYTES: u64 = crate::protocol::MAX_ESCAPED_MESSAGE_BYTES as u64;

/// The one tool call a sender may make: whom it must still reach, and what it carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// The session, as the gate confirmed it; the hook confirms it again by the same rule.
    pub target: Recipient,
    /// What the call carries.
    pub call: Call,
}

/// What a planned `SendMessage` carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    /// A message with exactly this text.
    Message(String),
    /// No message: a subscription to the target's next idle moment.
    IdleSubscription,
    /// The call made before every send to prove the guard runs: the hook must block it
    /// and note that it did. Addressed where no socket can be, so that even made
    /// unguarded it reaches no one.
    Canary,
}

/// Where a canary is addressed: a path under `/dev/null`, which no socket can have.
const CANARY_ADDRESS: &str = "/dev/null/claude-peers-guard-check";

/// Why a hook could not read a plan.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("cannot read the plan `{}`: {source}", path.display())]
    Unreadable { path: PathBuf, source: io::Error },
    #[error("the plan `{}` is invalid: {source}", path.display())]
    Invalid {
        path: PathBuf,
        source: serde_json::Error,
    },
}

impl Plan {
    /// The address `SendMessage` is given: the target's socket path.
    pub(crate) fn to(&self) -> String {
        self.target.socket.to_string_lossy().into_owned()
    }

    /// The `SendMessage` input this plan allows: what the scripted model calls with.
    #[must_use]
    pub fn input(&self) -> Value {
        match &self.call {
            Call::Message(text) => json!({"to": self.to(), "message": text}),
            Call::IdleSubscription => {
                json!({"to": self.to(), "message": "", "notify_when_idle": true})
            }
            Call::Canary => json!({"to": CANARY_ADDRESS, "message": "claude-peers guard check"}),
        }
    }

    /// Writes the plan of the call `tool_use_id` into the directory `plans`, where the
    /// hook looks for it (created, never followed through a link).
    pub fn write(&self, plans: &Path, tool_use_id: &str) -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(plan_path(plans, tool_use_id))?;
        file.write_all(&serde_json::to_vec(self).map_err(io::Error::other)?)
    }

    /// Reads the plan of the call `tool_use_id` from the directory `plans`.
    pub(crate) fn read(plans: &Path, tool_use_id: &str) -> Result<Self, PlanError> {
        let path = plan_path(plans, tool_use_id);
        let mut bytes = Vec::new();
        if let Err(source) =
            fs::File::open(&path).and_then(|file| file.take(MAX_PLAN_BYTES).read_to_end(&mut bytes))
        {
            return Err(PlanError::Unreadable { path, source });
        }
        serde_json::from_slice(&bytes).map_err(|source| PlanError::Invalid { path, source })
    }
}

/// Where the plan of the call `tool_use_id` is.
fn plan_path(plans: &Path, tool_use_id: &str) -> PathBuf {
    plans.join(format!("{tool_use_id}.json"))
}

/// Where the hook marks the planned call `tool_use_id` made (created once: a second
/// identical call is blocked).
pub(crate) fn used_path(plans: &Path, tool_use_id: &str) -> PathBuf {
    plans.join(format!("{tool_use_id}.used"))
}

/// Where the hook notes that it blocked the canary `tool_use_id`: beside its plan.
fn canary_path(plans: &Path, tool_use_id: &str) -> PathBuf {
    plans.join(format!("{tool_use_id}.blocked"))
}

/// Notes that the hook blocked the canary `tool_use_id` (created once, never followed).
pub(crate) fn note_canary(plans: &Path, tool_use_id: &str) -> io::Result<()> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(canary_path(plans, tool_use_id))
        .map(drop)
}

/// Whether the hook blocked the canary `tool_use_id` and noted it: the proof that the
/// guard runs. The scripted model makes no planned call of a job without it, and the
/// relay reports its absence.
#[must_use]
pub fn canary_blocked(plans: &Path, tool_use_id: &str) -> bool {
    fs::symlink_metadata(canary_path(plans, tool_use_id)).is_ok_and(|meta| meta.is_file())
}

/// Where the hook notes why it blocked the planned call `tool_use_id`: beside its plan.
fn refusal_path(plans: &Path, tool_use_id: &str) -> PathBuf {
    plans.join(format!("{tool_use_id}.refusal.json"))
}

/// Notes the hook's `refusal` of the planned call `tool_use_id`, for the relay to report.
pub(crate) fn note_refusal(
    plans: &Path,
    tool_use_id: &str,
    refusal: &claude_peer_resolve::Refusal,
) {
    let noted = json!({"refusal": refusal.kind.as_str(), "message": refusal.message});
    let _ = fs::write(refusal_path(plans, tool_use_id), noted.to_string());
}

/// Reads a refusal the hook noted for the planned call `tool_use_id`, if it noted one.
#[must_use]
pub fn read_refusal(plans: &Path, tool_use_id: &str) -> Option<Refusal> {
    let value: Value =
        serde_json::from_slice(&fs::read(refusal_path(plans, tool_use_id)).ok()?).ok()?;
    let name = value.get("refusal")?.as_str()?;
    let kind = RefusalKind::from_name(name).unwrap_or(RefusalKind::DeliveryFailed);
    let message = value.get("message")?.as_str()?.to_owned();
    Some(Refusal {
        kind,
        message,
        standing: false,
        uncertain: false,
    })
}
