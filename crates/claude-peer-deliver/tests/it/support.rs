//! A temporary Claude home with live sessions, settings and relay scripts.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use claude_peer_deliver::{CommandRelay, Courier, Error};
use claude_peer_registry::ClaudeHome;
use serde_json::{Value, json};

/// A `sleep 600` child standing in for a Claude Code process; killed and reaped when
/// dropped, pass or fail.
pub(crate) struct Sleeper(Option<Child>);

impl Sleeper {
    fn spawn() -> Self {
        Self(Some(
            Command::new("sleep")
                .arg("600")
                .spawn()
                .expect("spawn sleep"),
        ))
    }

    fn pid(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }

    /// Kills and reaps it now: its pid answers ESRCH afterwards.
    fn end(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        self.end();
    }
}

/// Field 22 of `/proc/<pid>/stat`, counted after the last `)`: the record's `procStart`.
pub(crate) fn start_token(pid: u32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &text[text.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().to_owned()
}

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

/// A temporary directory holding a Claude home (`<dir>/.claude`), the sessions' cwds and
/// sockets, relay scripts and their outputs. Managed settings are read at
/// `<dir>/managed-settings.json`, which does not exist unless a test writes it.
pub(crate) struct World {
    // Dropped in this order: the processes end before their directory goes.
    sleepers: Vec<Sleeper>,
    sockets: Vec<UnixListener>,
    pub(crate) home: ClaudeHome,
    dir: tempfile::TempDir,
}

impl World {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = ClaudeHome::new(dir.path().join(".claude"));
        fs::create_dir_all(home.sessions_dir()).unwrap();
        fs::set_permissions(home.sessions_dir(), fs::Permissions::from_mode(0o700)).unwrap();
        Self {
            sleepers: Vec::new(),
            sockets: Vec::new(),
            home,
            dir,
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
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
        fs::write(self.home.user_settings(), body.to_string()).unwrap();
    }

    /// A live child process registered as session `id` named `name`, with its true start
    /// token, its own cwd and a real listening socket.
    pub(crate) fn session(&mut self, id: &str, name: &str) -> Live {
        let sleeper = Sleeper::spawn();
        let pid = sleeper.pid();
        self.sleepers.push(sleeper);
        let cwd = self.path(&format!("project-{pid}"));
        fs::create_dir_all(&cwd).unwrap();
        let socket = self.path(&format!("{pid}.sock"));
        self.sockets.push(UnixListener::bind(&socket).unwrap());
        let record = json!({
            "pid": pid,
            "sessionId": id,
            "cwd": cwd.to_str().unwrap(),
            "startedAt": 1_764_460_800_000_u64,
            "procStart": start_token(pid),
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
        let file = self.home.sessions_dir().join(format!("{}.json", live.pid));
        fs::write(file, live.record.to_string()).unwrap();
    }

    /// Kills and reaps the process of `live`; its record stays behind, as after a crash.
    pub(crate) fn kill(&mut self, live: &Live) {
        for sleeper in &mut self.sleepers {
            if sleeper.pid() == live.pid {
                sleeper.end();
            }
        }
    }

    /// An executable `#!/bin/sh` script named `name` in the temporary directory.
    pub(crate) fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
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

    /// Sends `hello` to `id` through a relay that leaves a marker if it starts: the refusal's
    /// wire name and message, once it is checked that the relay never started.
    pub(crate) fn refused(&self, id: &str) -> (&'static str, String) {
        let (relay, marker) = self.marker_relay();
        let err = self
            .courier()
            .deliver(&self.home, id, "hello", &relay)
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
