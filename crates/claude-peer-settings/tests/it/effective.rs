//! The effective policy across managed, user and project settings.

use claude_peer_settings::{EffectiveValue, Layer, LayerState, effective_policy};

/// What every report says files cannot show.
const SETTINGS_FLAG_NOTE: &str = "a --settings flag on the running Claude Code process sets this too, ranking below managed settings and above user settings, and cannot be seen from files";

struct Layers {
    dir: tempfile::TempDir,
}

impl Layers {
    fn new() -> Layers {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::create_dir_all(dir.path().join("cwd/.claude")).unwrap();
        Layers { dir }
    }

    fn path(&self, layer: Layer) -> std::path::PathBuf {
        let d = self.dir.path();
        match layer {
            Layer::Managed => d.join("etc/managed-settings.json"),
            Layer::User => d.join("home/settings.json"),
            Layer::Project => d.join("cwd/.claude/settings.json"),
            Layer::ProjectLocal => d.join("cwd/.claude/settings.local.json"),
        }
    }

    fn write(&self, layer: Layer, text: &str) -> &Layers {
        std::fs::write(self.path(layer), text).unwrap();
        self
    }

    fn set(&self, layer: Layer, value: &str) -> &Layers {
        self.write(layer, &format!("{{\"crossSessionInbound\": {value}}}"))
    }

    fn effective(&self) -> (EffectiveValue, Option<Layer>) {
        let report = self.report();
        (report.value, report.decided_by)
    }

    fn report(&self) -> claude_peer_settings::EffectivePolicy {
        effective_policy(
            &self.path(Layer::User),
            &self.path(Layer::Managed),
            &self.dir.path().join("cwd"),
        )
    }
}

#[test]
fn unset_everywhere_is_claudes_default_not_accept() {
    let l = Layers::new();
    l.write(Layer::User, "{\"theme\": \"dark\"}");
    let report = l.report();
    assert_eq!(report.value, EffectiveValue::Default);
    assert_eq!(report.decided_by, None);
    assert!(report.complete);
    assert_eq!(report.note, SETTINGS_FLAG_NOTE);
    let states: Vec<_> = report
        .layers
        .iter()
        .map(|r| (r.layer, r.state.clone()))
        .collect();
    assert_eq!(
        states,
        [
            (Layer::Managed, LayerState::Missing),
            (Layer::User, LayerState::Unset),
            (Layer::Project, LayerState::Missing),
            (Layer::ProjectLocal, LayerState::Missing),
        ]
    );
}

#[test]
fn managed_settings_win_over_user_settings() {
    let l = Layers::new();
    l.set(Layer::Managed, "\"accept\"")
        .set(Layer::User, "\"refuse\"");
    assert_eq!(
        l.effective(),
        (EffectiveValue::Accept, Some(Layer::Managed))
    );
}

#[test]
fn an_invalid_value_counts_as_refuse_in_managed_settings_and_hold_elsewhere() {
    let l = Layers::new();
    l.set(Layer::Managed, "\"allow\"")
        .set(Layer::User, "\"accept\"");
    assert_eq!(
        l.effective(),
        (EffectiveValue::Refuse, Some(Layer::Managed))
    );

    let l = Layers::new();
    l.set(Layer::User, "42");
    assert_eq!(l.effective(), (EffectiveValue::Hold, Some(Layer::User)));
    assert_eq!(
        l.report().layers[1].state,
        LayerState::Invalid {
            raw: "42".into(),
            counts_as: claude_peer_settings::InboundPolicy::Hold
        }
    );

    let l = Layers::new();
    l.set(Layer::User, "\"accept\"")
        .set(Layer::ProjectLocal, "\"ACCEPT\"");
    assert_eq!(
        l.effective(),
        (EffectiveValue::Hold, Some(Layer::ProjectLocal))
    );
}

#[test]
fn project_layers_can_only_make_it_stricter() {
    let l = Layers::new();
    l.set(Layer::User, "\"accept\"")
        .set(Layer::Project, "\"hold\"");
    assert_eq!(l.effective(), (EffectiveValue::Hold, Some(Layer::Project)));

    let l = Layers::new();
    l.set(Layer::User, "\"refuse\"")
        .set(Layer::Project, "\"accept\"")
        .set(Layer::ProjectLocal, "\"hold\"");
    assert_eq!(l.effective(), (EffectiveValue::Refuse, Some(Layer::User)));

    let l = Layers::new();
    l.set(Layer::Project, "\"accept\"");
    assert_eq!(
        l.effective(),
        (EffectiveValue::Default, None),
        "accept cannot loosen the default"
    );

    let l = Layers::new();
    l.set(Layer::Project, "\"hold\"")
        .set(Layer::ProjectLocal, "\"refuse\"");
    assert_eq!(
        l.effective(),
        (EffectiveValue::Refuse, Some(Layer::ProjectLocal))
    );
}

#[test]
fn a_project_layer_over_the_size_limit_is_an_error_not_read() {
    let l = Layers::new();
    l.set(Layer::User, "\"accept\"");
    let file = std::fs::File::create(l.path(Layer::Project)).unwrap();
    file.set_len(1 << 30).unwrap();
    let report = l.report();
    assert!(!report.complete);
    let project = report
        .layers
        .iter()
        .find(|r| r.layer == Layer::Project)
        .unwrap();
    let LayerState::Error { kind, .. } = &project.state else {
        panic!("{project:?}");
    };
    assert_eq!(*kind, "too_large");
}

#[test]
fn an_unreadable_layer_is_reported_and_makes_the_report_incomplete() {
    let l = Layers::new();
    l.write(Layer::Managed, "{not json")
        .set(Layer::User, "\"accept\"");
    let report = l.report();
    assert_eq!(
        (report.value, report.decided_by),
        (EffectiveValue::Accept, Some(Layer::User))
    );
    assert!(!report.complete);
    let LayerState::Error { kind, message } = &report.layers[0].state else {
        panic!("{:?}", report.layers[0]);
    };
    assert_eq!(*kind, "invalid_json");
    assert!(
        message.contains(&l.path(Layer::Managed).display().to_string()),
        "{message}"
    );
}
