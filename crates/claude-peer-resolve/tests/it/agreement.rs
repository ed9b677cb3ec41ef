//! Agreement with Claude Code's own reader on the records real sessions wrote.

use std::fs;

use claude_peer_registry::{EntryName, Record, classify_entry_name};
use claude_peer_resolve::Discovery;
use claude_peer_testkit::fake::{self, FakeFile, FakeProcessTable, FakeRegistryFs, UID};
use claude_peer_testkit::fixtures::{REAL_PID_DOMAIN, REAL_RECORDS};
use serde_json::Value;

#[test]
fn the_live_set_equals_what_claude_agents_listed_for_every_real_fixture() {
    let mut checked = 0;
    for folder in fs::read_dir(REAL_RECORDS).unwrap() {
        let folder = folder.unwrap().path();
        let Ok(listed) = fs::read(folder.join("claude-agents.json")) else {
            continue;
        };
        let listed: Vec<Value> = serde_json::from_slice(&listed).unwrap();
        let mut registry = FakeRegistryFs::owned_by(UID);
        let mut processes = FakeProcessTable::new(UID, Some(REAL_PID_DOMAIN));
        for file in fs::read_dir(folder.join("sessions")).unwrap() {
            let file = file.unwrap();
            let name = file.file_name();
            let bytes = fs::read(file.path()).unwrap();
            registry = registry.with_file(
                name.to_str().unwrap(),
                FakeFile::regular(UID, bytes.clone()),
            );
            let EntryName::Record(pid) = classify_entry_name(&name) else {
                continue;
            };
            if listed.iter().any(|l| l["pid"] == pid.get()) {
                let record = Record::parse(pid, &bytes).unwrap();
                processes = processes.with_live(pid, record.proc_start.as_deref().unwrap());
            }
        }
        let scan = Discovery::new(processes, registry)
            .live(&fake::home())
            .unwrap();
        let ours: Vec<Value> = scan
            .entries
            .iter()
            .map(|s| {
                let r = &s.record;
                let mut v = serde_json::json!({
                    "pid": s.pid.get(),
                    "sessionId": r.session_id,
                    "name": r.name,
                });
                if let Some(status) = &r.status {
                    v["status"] = status.as_str().into();
                }
                v
            })
            .collect();
        let theirs: Vec<Value> = listed
            .iter()
            .map(|l| {
                let mut v = serde_json::json!({ "pid": l["pid"], "sessionId": l["sessionId"], "name": l["name"] });
                if let Some(status) = l.get("status") {
                    v["status"] = status.clone();
                }
                v
            })
            .collect();
        assert_eq!(ours, theirs, "live set of {}", folder.display());
        checked += 1;
    }
    assert_eq!(
        checked, 4,
        "every fixture folder with a claude-agents.json was compared"
    );
}
