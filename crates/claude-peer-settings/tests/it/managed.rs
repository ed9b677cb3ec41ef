//! Managed settings: the file and its `managed-settings.d` drop-ins, on real files, as the
//! effective policy and the hook switches read them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use claude_peer_settings::{
    EffectivePolicy, EffectiveValue, Error, HooksOff, InboundPolicy, Layer, LayerState,
    MAX_DROP_INS, ManagedInbound, ManagedSettings, effective_policy, managed_mcp,
};

/// A managed settings file in a temporary `etc`, its drop-in folder beside it, and a user
/// home and project with no settings.
struct Managed {
    dir: tempfile::TempDir,
}

impl Managed {
    fn new() -> Managed {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("etc/managed-settings.d")).unwrap();
        Managed { dir }
    }

    fn file(&self) -> PathBuf {
        self.dir.path().join("etc/managed-settings.json")
    }

    fn drop_in(&self, name: &str) -> PathBuf {
        self.dir.path().join("etc/managed-settings.d").join(name)
    }

    fn write(&self, path: &Path, text: &str) -> &Managed {
        fs::write(path, text).unwrap();
        self
    }

    fn policy(&self) -> EffectivePolicy {
        effective_policy(
            &self.dir.path().join("home/settings.json"),
            &self.file(),
            &self.dir.path().join("cwd"),
        )
    }

    fn read(&self) -> ManagedSettings {
        ManagedSettings::read(&self.file())
    }
}

fn managed_layer(policy: &EffectivePolicy) -> &claude_peer_settings::LayerReport {
    policy
        .layers
        .iter()
        .find(|l| l.layer == Layer::Managed)
        .unwrap()
}

#[test]
fn a_drop_in_that_refuses_decides_and_is_named() {
    let m = Managed::new();
    let drop_in = m.drop_in("50-policy.json");
    m.write(&m.file(), "{}")
        .write(&drop_in, r#"{"crossSessionInbound":"refuse"}"#);

    let policy = m.policy();

    assert_eq!(
        (policy.value, policy.decided_by, policy.complete),
        (EffectiveValue::Refuse, Some(Layer::Managed), true)
    );
    assert_eq!(policy.deciding_layer().unwrap().path, drop_in);
    assert_eq!(
        policy.decider(),
        format!("its managed settings `{}`", drop_in.display())
    );
    let documents: Vec<(&Path, &LayerState)> = managed_layer(&policy)
        .documents
        .iter()
        .map(|d| (d.path.as_path(), &d.state))
        .collect();
    assert_eq!(
        documents,
        [
            (m.file().as_path(), &LayerState::Unset),
            (
                drop_in.as_path(),
                &LayerState::Set {
                    value: InboundPolicy::Refuse
                }
            ),
        ]
    );

    // Without the file, the drop-in alone decides just the same.
    fs::remove_file(m.file()).unwrap();
    let alone = m.policy();
    assert_eq!(
        (alone.value, alone.deciding_layer().unwrap().path.clone()),
        (EffectiveValue::Refuse, drop_in)
    );
}

#[test]
fn the_last_document_that_sets_the_key_wins_in_name_order() {
    let m = Managed::new();
    m.write(&m.file(), r#"{"crossSessionInbound":"refuse"}"#)
        .write(
            &m.drop_in("90-late.json"),
            r#"{"crossSessionInbound":"accept"}"#,
        )
        .write(
            &m.drop_in("10-early.json"),
            r#"{"crossSessionInbound":"hold"}"#,
        )
        // A later document that does not set the key leaves it as it was.
        .write(&m.drop_in("99-theme.json"), r#"{"theme":"dark"}"#)
        // Only `*.json` is a drop-in.
        .write(
            &m.drop_in("zz-notes.txt"),
            r#"{"crossSessionInbound":"refuse"}"#,
        );

    let read = m.read();
    assert_eq!(
        read.inbound(),
        Some((
            m.drop_in("90-late.json").as_path(),
            &ManagedInbound::Valid(InboundPolicy::Accept)
        ))
    );
    let order: Vec<&Path> = read.read_documents().collect();
    assert_eq!(
        order,
        [
            m.file(),
            m.drop_in("10-early.json"),
            m.drop_in("90-late.json"),
            m.drop_in("99-theme.json")
        ]
    );

    let policy = m.policy();
    assert_eq!(
        (policy.value, policy.deciding_layer().unwrap().path.clone()),
        (EffectiveValue::Accept, m.drop_in("90-late.json"))
    );
}

#[test]
fn an_invalid_value_in_a_drop_in_counts_as_refuse() {
    let m = Managed::new();
    m.write(&m.file(), r#"{"crossSessionInbound":"accept"}"#)
        .write(
            &m.drop_in("50-typo.json"),
            r#"{"crossSessionInbound":"refused"}"#,
        );

    let policy = m.policy();

    assert_eq!(policy.value, EffectiveValue::Refuse);
    assert_eq!(
        managed_layer(&policy).state,
        LayerState::Invalid {
            raw: "\"refused\"".to_owned(),
            counts_as: InboundPolicy::Refuse
        }
    );
    assert_eq!(managed_layer(&policy).path, m.drop_in("50-typo.json"));
}

#[test]
fn a_drop_in_that_is_not_json_makes_the_answer_incomplete_and_is_named() {
    let m = Managed::new();
    let broken = m.drop_in("20-broken.json");
    m.write(&m.file(), r#"{"crossSessionInbound":"accept"}"#)
        .write(&broken, "{not json");

    let read = m.read();
    let unreadable: Vec<&Error> = read.unreadable().collect();
    assert!(
        matches!(unreadable[..], [Error::InvalidJson { path, .. }] if *path == broken),
        "{unreadable:?}"
    );

    let policy = m.policy();
    assert!(!policy.complete);
    assert_eq!(
        (policy.value, policy.deciding_layer().unwrap().path.clone()),
        (EffectiveValue::Accept, m.file()),
        "the documents read still answer"
    );
    let messages = policy.unreadable();
    assert!(
        messages.len() == 1 && messages[0].contains(&broken.display().to_string()),
        "{messages:?}"
    );
}

#[test]
fn a_fifo_drop_in_or_a_link_to_one_is_refused_unopened() {
    let m = Managed::new();
    let fifo = m.dir.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    std::os::unix::fs::symlink(&fifo, m.drop_in("20-link.json")).unwrap();
    let status = Command::new("mkfifo")
        .arg(m.drop_in("10-fifo.json"))
        .status()
        .unwrap();
    assert!(status.success());

    // A stat shows what each is before anything is opened (opening a FIFO wakes a
    // writer waiting for a reader); the read returns at once.
    let read = m.read();

    let refused: Vec<(&'static str, String)> = read
        .unreadable()
        .map(|e| (e.as_str(), e.to_string()))
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    for ((kind, message), name) in refused.iter().zip(["10-fifo.json", "20-link.json"]) {
        assert_eq!(*kind, "not_a_regular_file");
        assert!(
            message.contains(name) && message.contains("fifo"),
            "{message}"
        );
    }
    assert!(!m.policy().complete);
}

#[test]
fn more_drop_ins_than_are_read_make_the_folder_unreadable() {
    let m = Managed::new();
    m.write(&m.file(), r#"{"crossSessionInbound":"hold"}"#);
    for n in 0..MAX_DROP_INS {
        m.write(&m.drop_in(&format!("{n:03}.json")), "{}");
    }
    let last = m.drop_in(&format!("{:03}.json", MAX_DROP_INS - 1));
    m.write(&last, r#"{"crossSessionInbound":"refuse"}"#);
    let at_the_cap = m.read();
    assert_eq!(at_the_cap.unreadable().count(), 0);
    assert_eq!(at_the_cap.read_documents().count(), MAX_DROP_INS + 1);
    assert_eq!(at_the_cap.inbound().unwrap().0, last);

    m.write(&m.drop_in("999.json"), "{}");
    let over = m.read();
    let dir = m.dir.path().join("etc/managed-settings.d");
    let unreadable: Vec<&Error> = over.unreadable().collect();
    assert!(
        matches!(unreadable[..], [Error::TooManyDropIns { dir: d, limit }] if *d == dir && *limit == MAX_DROP_INS),
        "{unreadable:?}"
    );
    assert_eq!(
        over.read_documents().collect::<Vec<_>>(),
        [m.file()],
        "no drop-in is read"
    );
    let policy = m.policy();
    assert_eq!(
        (policy.value, policy.complete),
        (EffectiveValue::Hold, false)
    );
    assert!(policy.unreadable()[0].contains("managed-settings.d"));
}

#[test]
fn either_hook_switch_in_the_file_or_a_drop_in_is_found_and_named() {
    let m = Managed::new();
    let nothing = m.read();
    assert_eq!(
        (nothing.documents.len(), nothing.hooks_off()),
        (0, Vec::new())
    );

    m.write(
        &m.file(),
        r#"{"disableAllHooks":false,"crossSessionInbound":"hold"}"#,
    );
    let on = m.read();
    assert_eq!(
        (on.read_documents().count(), on.hooks_off()),
        (1, Vec::new())
    );

    m.write(
        &m.drop_in("10-hooks.json"),
        r#"{"allowManagedHooksOnly":true}"#,
    )
    .write(&m.drop_in("20-broken.json"), "{")
    .write(&m.drop_in("notes.txt"), r#"{"disableAllHooks":true}"#);
    let off = m.read();
    assert_eq!(
        off.hooks_off(),
        [HooksOff {
            path: m.drop_in("10-hooks.json"),
            setting: "allowManagedHooksOnly"
        }]
    );
    let unreadable: Vec<String> = off.unreadable().map(ToString::to_string).collect();
    assert!(
        unreadable.len() == 1 && unreadable[0].contains("20-broken.json"),
        "{unreadable:?}"
    );

    m.write(&m.file(), r#"{"disableAllHooks":true}"#);
    let both: Vec<&str> = m.read().hooks_off().iter().map(|o| o.setting).collect();
    assert_eq!(both, ["disableAllHooks", "allowManagedHooksOnly"]);
}

#[test]
fn an_enterprise_mcp_configuration_is_found_beside_the_file() {
    let m = Managed::new();
    assert_eq!(managed_mcp(&m.file()), None);
    let config = m.dir.path().join("etc/managed-mcp.json");
    m.write(&config, "{}");
    assert_eq!(managed_mcp(&m.file()), Some(config));
}
