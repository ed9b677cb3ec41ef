//! A temporary Claude home with live children, written the way Claude Code writes.

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use claude_peer_probe::{OsNotifier, OsProcessTable, OsRegistryFs};
use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::Discovery;
use claude_peer_testkit::registry::proc_start;
use claude_peer_watch::{Event, Watcher};

/// A bound on waiting for an event, so a broken watch fails instead of hanging.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

pub(crate) type OsWatcher = Watcher<OsProcessTable, OsRegistryFs, OsNotifier>;

/// A `sleep` child killed and reaped when dropped.
#[derive(Debug)]
pub(crate) struct Sleeper(Child);

impl Sleeper {
    pub(crate) fn spawn() -> Self {
        Self(
            Command::new("sleep")
                .arg("600")
                .stdin(Stdio::null())
                .spawn()
                .unwrap(),
        )
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Kills and reaps the child, leaving its record behind as a crash would.
    pub(crate) fn crash(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.crash();
    }
}

/// A Claude home in a temporary directory, with a 0700 registry and sockets that
/// make its sessions addressable.
#[derive(Debug)]
pub(crate) struct Home {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) claude: ClaudeHome,
    listeners: Vec<UnixListener>,
}

impl Home {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = ClaudeHome::new(dir.path().join("claude"));
        fs::create_dir_all(home.sessions_dir()).unwrap();
        fs::set_permissions(home.sessions_dir(), fs::Permissions::from_mode(0o700)).unwrap();
        fs::create_dir(dir.path().join("socks")).unwrap();
        Self {
            dir,
            claude: home,
            listeners: Vec::new(),
        }
    }

    pub(crate) fn sessions(&self) -> PathBuf {
        self.claude.sessions_dir()
    }

    pub(crate) fn file(&self, pid: u32) -> PathBuf {
        self.sessions().join(format!("{pid}.json"))
    }

    /// A messaging socket for `pid`, listening until the home is dropped.
    pub(crate) fn listen(&mut self, pid: u32) -> PathBuf {
        let path = self.dir.path().join("socks").join(format!("{pid}.sock"));
        if !path.exists() {
            self.listeners.push(UnixListener::bind(&path).unwrap());
        }
        path
    }

    /// The record Claude Code would write for `pid`, with its true start token.
    pub(crate) fn body(&mut self, pid: u32, session_id: &str, status: &str) -> String {
        let socket = self.listen(pid);
        serde_json::json!({
            "pid": pid, "sessionId": session_id, "cwd": "/tmp/proj", "procStart": proc_start(pid).unwrap(),
            "name": format!("name-{session_id}"), "nameSource": "user", "status": status,
            "messagingSocketPath": socket, "updatedAt": 1,
        })
        .to_string()
    }

    /// Writes `pid`'s record in place: truncate, write, close.
    pub(crate) fn write(&mut self, pid: u32, session_id: &str, status: &str) {
        let body = self.body(pid, session_id, status);
        fs::write(self.file(pid), body).unwrap();
    }

    /// Writes `pid`'s record to a temporary file and renames it over the record.
    pub(crate) fn replace(&mut self, pid: u32, session_id: &str, status: &str) {
        let body = self.body(pid, session_id, status);
        let tmp = self.sessions().join(format!("{pid}.json.tmp"));
        fs::File::create(&tmp)
            .unwrap()
            .write_all(body.as_bytes())
            .unwrap();
        fs::rename(&tmp, self.file(pid)).unwrap();
    }

    pub(crate) fn watch(&self) -> OsWatcher {
        Watcher::os(self.claude.clone()).unwrap()
    }

    /// The live set a fresh scan sees: pid and session id.
    pub(crate) fn fresh(&self) -> Vec<(u32, String)> {
        live_set(Discovery::os().live(&self.claude).unwrap().sessions.iter())
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
