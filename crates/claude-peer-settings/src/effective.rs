//! The effective `crossSessionInbound` of a session, as far as files show.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::Error;
use crate::policy::InboundPolicy;
use crate::store::{inbound_of, read_bytes};

/// Where Claude Code reads managed settings on Linux.
pub const MANAGED_SETTINGS_PATH: &str = "/etc/claude-code/managed-settings.json";

/// What a reader of files cannot know, said in every report.
pub(crate) const SETTINGS_FLAG_NOTE: &str = "a --settings flag on the running Claude Code process sets this too, ranking below managed settings and above user settings, and cannot be seen from files";

/// A settings layer, in Claude Code's order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// `/etc/claude-code/managed-settings.json`.
    Managed,
    /// `<claude home>/settings.json`.
    User,
    /// `<cwd>/.claude/settings.json`.
    Project,
    /// `<cwd>/.claude/settings.local.json`.
    ProjectLocal,
}

impl Layer {
    /// The layer's stable name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Layer::Managed => "managed",
            Layer::User => "user",
            Layer::Project => "project",
            Layer::ProjectLocal => "project_local",
        }
    }
}

/// The wire name is [`Layer::as_str`]: one spelling list.
impl Serialize for Layer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// The effective value. `Default` is Claude Code's own choice from the permission modes of
/// sender and receiver (accept or hold), never plain `accept`. Ordered by strictness (for the
/// rule that project layers can only make it stricter): the default ranks above accept and
/// below hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EffectiveValue {
    /// Delivered automatically.
    Accept,
    /// Left to Claude Code's default.
    Default,
    /// Held for approval.
    Hold,
    /// Dropped.
    Refuse,
}

impl EffectiveValue {
    /// `accept`, `default`, `hold` or `refuse`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            EffectiveValue::Accept => "accept",
            EffectiveValue::Default => "default",
            EffectiveValue::Hold => "hold",
            EffectiveValue::Refuse => "refuse",
        }
    }
}

/// The wire name is [`EffectiveValue::as_str`]: one spelling list.
impl Serialize for EffectiveValue {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl From<InboundPolicy> for EffectiveValue {
    fn from(p: InboundPolicy) -> Self {
        match p {
            InboundPolicy::Accept => EffectiveValue::Accept,
            InboundPolicy::Hold => EffectiveValue::Hold,
            InboundPolicy::Refuse => EffectiveValue::Refuse,
        }
    }
}

/// What one layer held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum LayerState {
    /// The file does not exist.
    Missing,
    /// The file exists and does not set the key.
    Unset,
    /// The file sets a valid value.
    Set {
        /// The value.
        value: InboundPolicy,
    },
    /// The file sets an invalid value, which Claude Code counts as `counts_as`.
    Invalid {
        /// The value's JSON text.
        raw: String,
        /// `refuse` in managed settings, `hold` elsewhere.
        counts_as: InboundPolicy,
    },
    /// The file could not be read or parsed; it is left out of the decision.
    Error {
        /// The error's stable name ([`Error::as_str`]).
        kind: &'static str,
        /// The error's message.
        message: String,
    },
}

/// One layer that was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LayerReport {
    /// Which layer.
    pub layer: Layer,
    /// Its file.
    pub path: PathBuf,
    /// What it held.
    #[serde(flatten)]
    pub state: LayerState,
}

/// The effective policy of a session, as far as files show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EffectivePolicy {
    /// The value.
    pub value: EffectiveValue,
    /// The layer that decided it; `None` when unset everywhere (`default`).
    pub decided_by: Option<Layer>,
    /// Every layer read, in precedence order.
    pub layers: Vec<LayerReport>,
    /// False when a layer could not be read or parsed, so the value may be wrong.
    pub complete: bool,
    /// What files cannot show: that a `--settings` flag on the process may set it too.
    pub note: &'static str,
}

fn read_layer(layer: Layer, path: &Path) -> LayerReport {
    let state = match read_bytes(path) {
        Ok(None) => LayerState::Missing,
        Ok(Some(bytes)) => match inbound_of(path, &bytes) {
            Ok(None) => LayerState::Unset,
            Ok(Some(value)) => LayerState::Set { value },
            Err(Error::InvalidValue { value, .. }) => LayerState::Invalid {
                raw: value,
                counts_as: if layer == Layer::Managed {
                    InboundPolicy::Refuse
                } else {
                    InboundPolicy::Hold
                },
            },
            Err(e) => LayerState::Error {
                kind: e.as_str(),
                message: e.to_string(),
            },
        },
        Err(e) => LayerState::Error {
            kind: e.as_str(),
            message: e.to_string(),
        },
    };
    LayerReport {
        layer,
        path: path.to_owned(),
        state,
    }
}

/// The effective `crossSessionInbound` for a session whose cwd is `cwd`;
/// `managed_settings` is normally [`MANAGED_SETTINGS_PATH`].
///
/// The first of managed and user settings that sets the key decides; the project's
/// `.claude/settings.json` and `.claude/settings.local.json` can then only make it stricter.
/// An invalid value counts as `refuse` in managed settings and `hold` elsewhere. A layer that
/// cannot be read or parsed is reported and left out (`complete` is then false).
#[must_use]
pub fn effective_policy(
    user_settings: &Path,
    managed_settings: &Path,
    cwd: &Path,
) -> EffectivePolicy {
    let claude = cwd.join(".claude");
    let layers = vec![
        read_layer(Layer::Managed, managed_settings),
        read_layer(Layer::User, user_settings),
        read_layer(Layer::Project, &claude.join("settings.json")),
        read_layer(Layer::ProjectLocal, &claude.join("settings.local.json")),
    ];
    let mut value = EffectiveValue::Default;
    let mut decided_by = None;
    for report in &layers {
        let held = match &report.state {
            LayerState::Set { value } => EffectiveValue::from(*value),
            LayerState::Invalid { counts_as, .. } => EffectiveValue::from(*counts_as),
            _ => continue,
        };
        let base_layer = matches!(report.layer, Layer::Managed | Layer::User);
        let takes_over = if base_layer {
            decided_by.is_none()
        } else {
            held > value
        };
        if takes_over {
            value = held;
            decided_by = Some(report.layer);
        }
    }
    EffectivePolicy {
        value,
        decided_by,
        complete: !layers
            .iter()
            .any(|l| matches!(l.state, LayerState::Error { .. })),
        layers,
        note: SETTINGS_FLAG_NOTE,
    }
}
