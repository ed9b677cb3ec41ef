//! A temporary Claude home with live sessions, settings and relay scripts.

use std::fs;
use std::path::{Path, PathBuf};

use claude_peer_deliver::{CommandRelay, Courier, Error};
use claude_peer_registry::ClaudeHome;
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, proc_start, shell_script};
use serde_json::{Value, json};

/// A live session as its record describes it.
#[derive(Debug, Clone)]
pub(crate) struct Live {
    pub(crate) pid: u32,
    pub(crate) id: String,
    pub(crate) name: String,
    pub(crate) cwd: PathBuf,
    pub(crate) socket: PathBuf,
    pub(crate) record: Value,
}

/// A temporary Claude home holding the sessions' cwds and sockets, relay scripts and
/// their outputs. Managed settings are read at `<home>/managed-settings.json`, which
/// does not exist unless a test writes it.
pub(crate) struct World {
    // Dropped in this order: the processes end before their directory goes.
    sleepers: Vec<Sleeper>,
    temp: TempHome,
}

impl World {
    pub(crate) fn new() -> Self {
        Self {
            sleepers: Vec::new(),
            temp: TempHome::new().unwrap(),
        }
    }

    /// The home.
    pub(crate) fn home(&self) -> &ClaudeHome {
        self.temp.claude()
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.temp.root().join(name)
    }

    pub(crate) fn managed_settings(&self) -> PathBuf {
        self.path("managed-settings.json")
    }

    /// The courier under test: the real OS, managed settings in the temporary directory.
    pub(crate) fn courier(&self) -> Courier {
        Courier::os().with_managed_settings(self.managed_settings())
    }

    /// Writes the user's `settings.json`: `crossSessionInbound` set to `policy`, or a file
    /// that does not set it.
    pub(crate) fn user_policy(&self, policy: Option<&str>) {
        let body = match policy {
            Some(policy) => json!({ "theme": "dark", "crossSessionInbound": policy }),
            None => json!({ "theme": "dark" }),
        };
        fs::write(self.home().user_settings(), body.to_string()).unwrap();
    }

    /// A live child process registered as session `id` named `name`, with its true start
    /// token, its own cwd and a real listening socket.
    pub(crate) fn session(&mut self, id: &str, name: &str) -> Live {
        let sleeper = Sleeper::spawn().unwrap();
        let pid = sleeper.pid();
        self.sleepers.push(sleeper);
        let cwd = self.path(&format!("project-{pid}"));
        fs::create_dir_all(&cwd).unwrap();
        let socket = self.temp.socket(pid).unwrap();
        let record = json!({
            "pid": pid,
            "sessionId": id,
            "cwd": cwd.to_str().unwrap(),
            "startedAt": 1_764_460_800_000_u64,
            "procStart": proc_start(pid).unwrap(),
            "version": "2.1.332",
            "peerProtocol": 1,
            "kind": "interactive",
            "entrypoint": "cli",
            "messagingSocketPath": socket.to_str().unwrap(),
            "name": name,
            "nameSource": "derived",
            "status": "idle",
        });
        let live = Live {
            pid,
            id: id.to_owned(),
            name: name.to_owned(),
            cwd,
            socket,
            record,
        };
        self.write_record(&live);
        live
    }

    /// Writes `live.record` as `<home>/sessions/<pid>.json`, compact, as Claude Code does.
    pub(crate) fn write_record(&self, live: &Live) {
        self.temp
            .write_record(live.pid, live.record.to_string())
            .unwrap();
    }

    /// Kills and reaps the process of `live`; its record stays behind, as after a crash.
    pub(crate) fn kill(&mut self, live: &Live) {
        for sleeper in &mut self.sleepers {
            if sleeper.pid() == live.pid {
                sleeper.crash().unwrap();
            }
        }
    }

    /// An executable `#!/bin/sh` script named `name` in the temporary directory.
    pub(crate) fn script(&self, name: &str, body: &str) -> PathBuf {
        shell_script(self.path(name), body).unwrap()
    }

    /// A relay that only leaves a marker file and confirms: the marker shows it was started.
    pub(crate) fn marker_relay(&self) -> (CommandRelay, PathBuf) {
        let marker = self.path("relay-started");
        let script = self.script(
            "marker-relay",
            &format!(
                "touch {}\ncat > /dev/null\necho '{{\"sent\":true}}'",
                quoted(&marker)
            ),
        );
        (CommandRelay::new(script), marker)
    }

    /// Whether the refusal of a send to `id` stands until a person changes something.
    pub(crate) fn standing(&self, id: &str) -> bool {
        let (relay, _) = self.marker_relay();
        let err = self
            .courier()
            .deliver(self.home(), id, "hello", &relay)
            .unwrap_err();
        err.refusal().expect("a refusal").standing
    }

    /// Sends `hello` to `id` through a relay that leaves a marker if it starts: the refusal's
    /// wire name and message, once it is checked that the relay never started.
    pub(crate) fn refused(&self, id: &str) -> (&'static str, String) {
        let (relay, marker) = self.marker_relay();
        let err = self
            .courier()
            .deliver(self.home(), id, "hello", &relay)
            .unwrap_err();
        assert!(!marker.exists(), "the relay was never started");
        let (kind, message) = refusal(&err);
        (kind, message.to_owned())
    }
}

/// `path` single-quoted for a shell script (temporary paths hold no quotes).
pub(crate) fn quoted(path: &Path) -> String {
    let text = path.to_str().unwrap();
    assert!(!text.contains('\''), "temporary paths hold no quotes");
    format!("'{text}'")
}

/// The refusal's wire name and message; anything else fails the test.
pub(crate) fn refusal(err: &Error) -> (&'static str, &str) {
    let refusal = err
        .refusal()
        .unwrap_or_else(|| panic!("expected a refusal, got {err:?}"));
    (refusal.kind.as_str(), refusal.message.as_str())
}
