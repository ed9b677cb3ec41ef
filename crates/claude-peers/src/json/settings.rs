//! The settings shapes: the user's `crossSessionInbound` as `settings` reads and writes
//! it, and the effective policy with every layer read.

use std::path::Path;

use claude_peer_settings::{EffectivePolicy, Layer, LayerState};
use serde::Serialize;

/// `settings`, `settings set` and `settings reset`.
#[derive(Debug, Serialize)]
pub(crate) struct SettingsJson<'a> {
    pub(crate) path: &'a Path,
    pub(crate) revision: &'a str,
    pub(crate) cross_session_inbound: Option<&'static str>,
}

/// `settings effective` and the MCP `inbound_policy`: the effective value, the layer
/// that decided it, and every layer read.
#[derive(Debug, Serialize)]
pub(crate) struct EffectivePolicyJson<'a> {
    value: &'static str,
    decided_by: Option<&'static str>,
    layers: Vec<LayerJson<'a>>,
    complete: bool,
    note: &'static str,
}

/// One layer; only the managed layer has `documents` (the file, then its drop-ins).
#[derive(Debug, Serialize)]
struct LayerJson<'a> {
    layer: &'static str,
    path: &'a Path,
    #[serde(flatten)]
    state: LayerStateJson<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    documents: Vec<DocumentJson<'a>>,
}

#[derive(Debug, Serialize)]
struct DocumentJson<'a> {
    path: &'a Path,
    #[serde(flatten)]
    state: LayerStateJson<'a>,
}

/// What a layer or document held, under `state`.
#[derive(Debug, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum LayerStateJson<'a> {
    Missing,
    Unset,
    Set {
        value: &'static str,
    },
    Invalid {
        raw: &'a str,
        counts_as: &'static str,
    },
    Error {
        kind: &'static str,
        message: &'a str,
    },
}

impl<'a> EffectivePolicyJson<'a> {
    pub(crate) fn new(policy: &'a EffectivePolicy) -> Self {
        Self {
            value: policy.value.as_str(),
            decided_by: policy.decided_by.map(Layer::as_str),
            layers: policy
                .layers
                .iter()
                .map(|layer| LayerJson {
                    layer: layer.layer.as_str(),
                    path: &layer.path,
                    state: LayerStateJson::new(&layer.state),
                    documents: layer
                        .documents
                        .iter()
                        .map(|document| DocumentJson {
                            path: &document.path,
                            state: LayerStateJson::new(&document.state),
                        })
                        .collect(),
                })
                .collect(),
            complete: policy.complete,
            note: policy.note,
        }
    }
}

impl<'a> LayerStateJson<'a> {
    fn new(state: &'a LayerState) -> Self {
        match state {
            LayerState::Missing => Self::Missing,
            LayerState::Unset => Self::Unset,
            LayerState::Set { value } => Self::Set {
                value: value.as_str(),
            },
            LayerState::Invalid { raw, counts_as } => Self::Invalid {
                raw,
                counts_as: counts_as.as_str(),
            },
            LayerState::Error { kind, message } => Self::Error { kind, message },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EffectivePolicyJson;

    /// Every state a layer or managed document can hold, in the documented key order:
    /// the layer, its path, `state` and its fields; `documents` only for the managed one.
    #[test]
    fn the_effective_policy_is_its_documented_json_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let write = |path: &str, text: &str| {
            let path = d.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write("etc/managed-settings.json", "{}");
        write(
            "etc/managed-settings.d/10.json",
            r#"{"crossSessionInbound":"no"}"#,
        );
        write("etc/managed-settings.d/20.json", "[]");
        write("home/settings.json", r#"{"crossSessionInbound":"hold"}"#);
        write("cwd/.claude/settings.local.json", "{}");
        let policy = claude_peer_settings::effective_policy(
            &d.join("home/settings.json"),
            &d.join("etc/managed-settings.json"),
            &d.join("cwd"),
        );
        let json = serde_json::to_string(&EffectivePolicyJson::new(&policy)).unwrap();
        let d = d.display();
        let expected = format!(
            concat!(
                r#"{{"value":"refuse","decided_by":"managed","layers":["#,
                r#"{{"layer":"managed","path":"{d}/etc/managed-settings.d/10.json","state":"invalid","raw":"\"no\"","counts_as":"refuse","documents":["#,
                r#"{{"path":"{d}/etc/managed-settings.json","state":"unset"}},"#,
                r#"{{"path":"{d}/etc/managed-settings.d/10.json","state":"invalid","raw":"\"no\"","counts_as":"refuse"}},"#,
                r#"{{"path":"{d}/etc/managed-settings.d/20.json","state":"error","kind":"not_an_object","message":"`{d}/etc/managed-settings.d/20.json` holds an array at the top level, not an object"}}]}},"#,
                r#"{{"layer":"user","path":"{d}/home/settings.json","state":"set","value":"hold"}},"#,
                r#"{{"layer":"project","path":"{d}/cwd/.claude/settings.json","state":"missing"}},"#,
                r#"{{"layer":"project_local","path":"{d}/cwd/.claude/settings.local.json","state":"unset"}}],"#,
                r#""complete":false,"note":"{note}"}}"#
            ),
            d = d,
            note = policy.note
        );
        assert_eq!(json, expected);

        let nowhere = claude_peer_settings::effective_policy(
            std::path::Path::new("/nonexistent/settings.json"),
            std::path::Path::new("/nonexistent/managed-settings.json"),
            std::path::Path::new("/nonexistent"),
        );
        let json = serde_json::to_value(EffectivePolicyJson::new(&nowhere)).unwrap();
        assert_eq!(
            (
                &json["value"],
                &json["decided_by"],
                &json["layers"][0]["state"]
            ),
            (
                &"default".into(),
                &serde_json::Value::Null,
                &"missing".into()
            )
        );
    }
}
