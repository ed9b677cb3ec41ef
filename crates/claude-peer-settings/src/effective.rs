//! The effective `crossSessionInbound` of a session, as far as files show.

use std::path::{Path, PathBuf};

use crate::Error;
use crate::managed::{ManagedInbound, ManagedSettings};
use crate::policy::InboundPolicy;
use crate::store::{inbound_of, read_bytes};

/// Where Claude Code reads managed settings on Linux.
pub const MANAGED_SETTINGS_PATH: &str = "/etc/claude-code/managed-settings.json";

/// What a reader of files cannot know, said in every report.
pub(crate) const SETTINGS_FLAG_NOTE: &str = "a --settings flag on the running Claude Code process sets this too, ranking below managed settings and above user settings, and cannot be seen from files";

/// A settings layer, in Claude Code's order of precedence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// `/etc/claude-code/managed-settings.json` and the drop-ins of
    /// `/etc/claude-code/managed-settings.d/`.
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerReport {
    /// Which layer.
    pub layer: Layer,
    /// Its file; for the managed layer, the document that decided what it holds (a
    /// drop-in when one did), else the managed settings file.
    pub path: PathBuf,
    /// What it held.
    pub state: LayerState,
    /// The managed layer's documents (the file, then its drop-ins), each with what it
    /// held; empty for the other layers, whose one document is `path`.
    pub documents: Vec<DocumentReport>,
}

/// One managed settings document that was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentReport {
    /// The document.
    pub path: PathBuf,
    /// What it held.
    pub state: LayerState,
}

/// The effective policy of a session, as far as files show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectivePolicy {
    /// The value.
    pub value: EffectiveValue,
    /// The layer that decided it; `None` when unset everywhere (`default`).
    pub decided_by: Option<Layer>,
    /// Every layer read, in precedence order.
    pub layers: Vec<LayerReport>,
    /// False when a layer (or a managed document) could not be read or parsed, so the
    /// value may be wrong.
    pub complete: bool,
    /// What files cannot show: that a `--settings` flag on the process may set it too.
    pub note: &'static str,
}

impl EffectivePolicy {
    /// The report of the layer that decided; its `path` is the document that did.
    #[must_use]
    pub fn deciding_layer(&self) -> Option<&LayerReport> {
        self.layers
            .iter()
            .find(|layer| Some(layer.layer) == self.decided_by)
    }

    /// What decided, in words every report uses: ``its managed settings `<document>` ``,
    /// or `no layer sets it (Claude Code's default)`.
    #[must_use]
    pub fn decider(&self) -> String {
        self.deciding_layer().map_or_else(
            || "no layer sets it (Claude Code's default)".to_owned(),
            |layer| {
                format!(
                    "its {} settings `{}`",
                    layer.layer.as_str(),
                    layer.path.display()
                )
            },
        )
    }

    /// The message of every layer or managed document that could not be read or parsed:
    /// why `complete` is false.
    #[must_use]
    pub fn unreadable(&self) -> Vec<&str> {
        states(&self.layers)
            .filter_map(|state| match state {
                LayerState::Error { message, .. } => Some(message.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Every state in `layers`: each layer's, and each managed document's.
fn states(layers: &[LayerReport]) -> impl Iterator<Item = &LayerState> {
    layers.iter().flat_map(|layer| {
        std::iter::once(&layer.state).chain(layer.documents.iter().map(|d| &d.state))
    })
}

fn error_state(e: &Error) -> LayerState {
    LayerState::Error {
        kind: e.as_str(),
        message: e.to_string(),
    }
}

fn read_layer(layer: Layer, path: &Path) -> LayerReport {
    let state = match read_bytes(path) {
        Ok(None) => LayerState::Missing,
        Ok(Some(bytes)) => match inbound_of(path, &bytes) {
            Ok(None) => LayerState::Unset,
            Ok(Some(value)) => LayerState::Set { value },
            Err(Error::InvalidValue { value, .. }) => LayerState::Invalid {
                raw: value,
                counts_as: InboundPolicy::Hold,
            },
            Err(e) => error_state(&e),
        },
        Err(e) => error_state(&e),
    };
    LayerReport {
        layer,
        path: path.to_owned(),
        state,
        documents: Vec::new(),
    }
}

fn inbound_state(inbound: Option<&ManagedInbound>) -> LayerState {
    match inbound {
        None => LayerState::Unset,
        Some(ManagedInbound::Valid(value)) => LayerState::Set { value: *value },
        Some(invalid @ ManagedInbound::Invalid(raw)) => LayerState::Invalid {
            raw: raw.clone(),
            counts_as: invalid.counts_as(),
        },
    }
}

/// The managed layer: what the last document that sets the key holds, at its path; else
/// the first error, else unset (or missing when there is no document at all).
fn managed_layer(managed: &ManagedSettings) -> LayerReport {
    let documents: Vec<DocumentReport> = managed
        .documents
        .iter()
        .map(|document| DocumentReport {
            path: document.path.clone(),
            state: match &document.read {
                Ok(held) => inbound_state(held.inbound.as_ref()),
                Err(e) => error_state(e),
            },
        })
        .collect();
    let (path, state) = if let Some((path, inbound)) = managed.inbound() {
        (path.to_owned(), inbound_state(Some(inbound)))
    } else if let Some(error) = documents
        .iter()
        .find(|d| matches!(d.state, LayerState::Error { .. }))
    {
        (error.path.clone(), error.state.clone())
    } else if documents.is_empty() {
        (managed.file.clone(), LayerState::Missing)
    } else {
        (managed.file.clone(), LayerState::Unset)
    };
    LayerReport {
        layer: Layer::Managed,
        path,
        state,
        documents,
    }
}

/// The effective `crossSessionInbound` for a session whose cwd is `cwd`;
/// `managed_settings` is normally [`MANAGED_SETTINGS_PATH`].
///
/// The first of managed and user settings that sets the key decides; the project's
/// `.claude/settings.json` and `.claude/settings.local.json` can then only make it stricter.
/// Managed settings are the file and its `managed-settings.d` drop-ins ([`ManagedSettings`]).
/// An invalid value counts as `refuse` in managed settings and `hold` elsewhere. A layer (or
/// managed document) that cannot be read or parsed is reported and left out (`complete` is
/// then false).
#[must_use]
pub fn effective_policy(
    user_settings: &Path,
    managed_settings: &Path,
    cwd: &Path,
) -> EffectivePolicy {
    let claude = cwd.join(".claude");
    let layers = vec![
        managed_layer(&ManagedSettings::read(managed_settings)),
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
    let complete = !states(&layers).any(|state| matches!(state, LayerState::Error { .. }));
    EffectivePolicy {
        value,
        decided_by,
        complete,
        layers,
        note: SETTINGS_FLAG_NOTE,
    }
}
