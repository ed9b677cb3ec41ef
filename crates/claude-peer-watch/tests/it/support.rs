//! Records written the way Claude Code writes them into a temporary home, and watches
//! and scans of it.

use std::fs;
use std::io::Write as _;
use std::time::Duration;

use claude_peer_probe::{OsNotifier, OsProcessTable, OsRegistryFs};
use claude_peer_resolve::Discovery;
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::proc_start;
use claude_peer_watch::{Event, Watcher};

/// A bound on waiting for an event, so a broken watch fails instead of hanging.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

pub(crate) type OsWatcher = Watcher<OsProcessTable, OsRegistryFs, OsNotifier>;

/// What the watch's tests do with a temporary home: write its sessions' records (each
/// made addressable by a listening socket) and watch or scan it.
pub(crate) trait WatchedHome {
    /// The record Claude Code would write for `pid`, with its true start token.
    fn body(&mut self, pid: u32, session_id: &str, status: &str) -> String;
    /// Writes `pid`'s record in place: truncate, write, close.
    fn write(&mut self, pid: u32, session_id: &str, status: &str);
    /// Writes `pid`'s record to a temporary file and renames it over the record.
    fn replace(&mut self, pid: u32, session_id: &str, status: &str);
    /// A watch of the home.
    fn watch(&self) -> OsWatcher;
    /// The live set a fresh scan sees: pid and session id.
    fn fresh(&self) -> Vec<(u32, String)>;
}

impl WatchedHome for TempHome {
    fn body(&mut self, pid: u32, session_id: &str, status: &str) -> String {
        let socket = self.socket(pid).unwrap();
        serde_json::json!({
            "pid": pid, "sessionId": session_id, "cwd": "/tmp/proj", "procStart": proc_start(pid).unwrap(),
            "name": format!("name-{session_id}"), "nameSource": "user", "status": status,
            "messagingSocketPath": socket, "updatedAt": 1,
        })
        .to_string()
    }

    fn write(&mut self, pid: u32, session_id: &str, status: &str) {
        let body = self.body(pid, session_id, status);
        self.write_record(pid, body).unwrap();
    }

    fn replace(&mut self, pid: u32, session_id: &str, status: &str) {
        let body = self.body(pid, session_id, status);
        let tmp = self.sessions().join(format!("{pid}.json.tmp"));
        fs::File::create(&tmp)
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        fs::rename(&tmp, self.record_path(pid)).unwrap();
    }

    fn watch(&self) -> OsWatcher {
        Watcher::os(self.claude().clone()).unwrap()
    }

    fn fresh(&self) -> Vec<(u32, String)> {
        live_set(Discovery::os().live(self.claude()).unwrap().entries.iter())
    }
}

/// Pids and session ids of sessions.
pub(crate) fn live_set<'a>(
    sessions: impl Iterator<Item = &'a claude_peer_resolve::LiveSession>,
) -> Vec<(u32, String)> {
    sessions
        .map(|s| (s.pid.get(), s.record.session_id.clone()))
        .collect()
}

/// The next event, which must come.
pub(crate) fn next(watcher: &mut OsWatcher) -> Event {
    watcher
        .next_event(PATIENCE)
        .unwrap()
        .expect("an event within the patience")
}

/// The kind, pid and session id of an event.
pub(crate) fn describe(event: &Event) -> (&'static str, u32, String) {
    let session = event.session();
    (
        event.as_str(),
        session.pid.get(),
        session.record.session_id.clone(),
    )
}
