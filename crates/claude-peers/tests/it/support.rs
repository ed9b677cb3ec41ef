//! A temporary Claude home, live children, and running the binary.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

pub(crate) const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/claude-code-real"
);

/// A `sleep` child killed and reaped when dropped.
pub(crate) struct Sleeper(pub(crate) Child);

impl Sleeper {
    pub(crate) fn spawn() -> Self {
        Self(Command::new("sleep").arg("600").spawn().unwrap())
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Kills and reaps the child, leaving its record behind as a crash would.
    pub(crate) fn crash(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Field 22 of `/proc/<pid>/stat`.
pub(crate) fn start_token(pid: u32) -> String {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &text[text.rfind(')').unwrap() + 1..];
    after.split_whitespace().nth(19).unwrap().to_owned()
}

pub(crate) fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// A Claude home in a temporary directory, with a 0700 registry.
pub(crate) struct Home {
    pub(crate) dir: tempfile::TempDir,
    listeners: Vec<UnixListener>,
}

impl Home {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = Self {
            dir,
            listeners: Vec::new(),
        };
        fs::create_dir_all(home.sessions()).unwrap();
        fs::set_permissions(home.sessions(), fs::Permissions::from_mode(0o700)).unwrap();
        home
    }

    /// A home with no registry at all.
    pub(crate) fn empty() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            listeners: Vec::new(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn sessions(&self) -> PathBuf {
        self.root().join("sessions")
    }

    /// A listening socket in the home's `socks/` directory, kept open.
    pub(crate) fn socket(&mut self, pid: u32) -> PathBuf {
        let dir = self.root().join("socks");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{pid}.sock"));
        if !path.exists() {
            self.listeners.push(UnixListener::bind(&path).unwrap());
        }
        path
    }

    /// Writes a record for the live `child` with its true start token.
    pub(crate) fn live_record(
        &mut self,
        child: &Sleeper,
        session: &str,
        name: &str,
        status: &str,
        addressable: bool,
    ) {
        let pid = child.pid();
        let mut record = serde_json::json!({
            "pid": pid,
            "sessionId": session,
            // Inside the temporary home, so no real project settings can apply.
            "cwd": self.root().join("project").to_str().unwrap(),
            "startedAt": now_ms() - 3_600_000,
            "procStart": start_token(pid),
            "version": "2.1.332",
            "peerProtocol": 1,
            "peerFeatures": ["notify_idle"],
            "kind": "interactive",
            "entrypoint": "cli",
            "tmux": "cc:@1.%1",
            "name": name,
            "nameSource": "user",
            "status": status,
            "updatedAt": now_ms() - 200_000,
            "statusUpdatedAt": now_ms() - 200_000,
        });
        if addressable {
            record["messagingSocketPath"] = self.socket(pid).to_str().unwrap().into();
        }
        self.write(&format!("{pid}.json"), &record.to_string());
    }

    pub(crate) fn write(&self, name: &str, body: &str) {
        fs::write(self.sessions().join(name), body).unwrap();
    }

    /// Copies a real record from the fixtures (its pid is dead here).
    pub(crate) fn copy_fixture(&self, folder: &str, file: &str) {
        fs::copy(
            format!("{FIXTURES}/{folder}/sessions/{file}"),
            self.sessions().join(file),
        )
        .unwrap();
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(self.root())
            .args(args)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    /// Runs with `--json` and parses stdout, checking it holds exactly one JSON value.
    pub(crate) fn json(&self, args: &[&str]) -> (i32, serde_json::Value, String) {
        let mut all = vec!["--json"];
        all.extend(args);
        let out = self.run(&all);
        let stdout = String::from_utf8(out.stdout).unwrap();
        let value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("stdout is one JSON value ({e}): {stdout:?}"));
        (
            out.status.code().unwrap(),
            value,
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    /// Human output with the home path, pids and clock-dependent bits replaced. Column
    /// padding depends on pid widths, so runs of spaces become two (alignment is checked
    /// on its own by [`assert_aligned`]).
    pub(crate) fn redact(&self, text: &str, pids: &[u32]) -> String {
        let mut text = text.replace(self.root().to_str().unwrap(), "[HOME]");
        for (i, pid) in pids.iter().enumerate() {
            text = text.replace(&pid.to_string(), &format!("[PID{i}]"));
        }
        text.lines().map(redact_line).collect::<Vec<_>>().join("\n")
    }
}

/// Replaces values that differ between runs in a JSON value: live pids, times, the
/// home path, revisions and start tokens.
pub(crate) fn redact_json(value: &mut serde_json::Value, home: &Path, pids: &[u32]) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                let volatile = key.ends_with("_ms") || key == "proc_start" || key == "revision";
                let live_pid = key == "pid"
                    && v.as_u64()
                        .is_some_and(|p| pids.iter().any(|l| u64::from(*l) == p));
                if (volatile && !v.is_null()) || live_pid {
                    *v = format!("[{key}]").into();
                } else {
                    redact_json(v, home, pids);
                }
            }
        }
        serde_json::Value::Array(items) => {
            for v in items.iter_mut() {
                redact_json(v, home, pids);
            }
        }
        serde_json::Value::String(s) => {
            let mut text = s.replace(home.to_str().unwrap(), "[HOME]");
            for (i, pid) in pids.iter().enumerate() {
                text = text.replace(&pid.to_string(), &format!("[PID{i}]"));
            }
            *s = text;
        }
        _ => {}
    }
}

/// Durations (`3m`, `1h`) and epoch milliseconds in one line, and runs of spaces.
fn redact_line(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit()
            && !out
                .ends_with(|p: char| p.is_ascii_alphanumeric() || p == '%' || p == '@' || p == '.')
        {
            let mut digits = c.to_string();
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                digits.push(d);
            }
            let unit = chars.next_if(|u| "smhd".contains(*u));
            let ends = chars.peek().is_none_or(|n| !n.is_ascii_alphanumeric());
            match unit {
                Some(_) if ends => out.push_str("[ago]"),
                Some(u) => {
                    out.push_str(&digits);
                    out.push(u);
                }
                None if digits.len() == 13 => out.push_str("[ms]"),
                None => out.push_str(&digits),
            }
        } else if c == ' ' && chars.peek() == Some(&' ') {
            while chars.next_if_eq(&' ').is_some() {}
            out.push_str("  ");
        } else {
            out.push(c);
        }
    }
    out
}

/// Every row's cells start where the header's columns do.
pub(crate) fn assert_aligned(table: &str) {
    let mut lines = table.lines().filter(|l| !l.is_empty() && !l.ends_with('.'));
    let header = lines.next().unwrap();
    let starts: Vec<usize> = header
        .char_indices()
        .filter(|(i, c)| *c != ' ' && (*i == 0 || header.as_bytes()[i - 1] == b' '))
        .map(|(i, _)| i)
        .collect();
    for line in lines {
        let chars: Vec<char> = line.chars().collect();
        for &start in &starts[1..] {
            assert!(
                chars.get(start - 1) == Some(&' ') && chars.get(start).is_some_and(|c| *c != ' '),
                "column at {start} aligned in:\n{table}"
            );
        }
    }
}
