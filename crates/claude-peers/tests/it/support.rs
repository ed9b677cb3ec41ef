//! Running the binary in a temporary home, the records its tests write there, and
//! redacting what differs between runs.

use std::fs;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{SystemTime, UNIX_EPOCH};

use claude_peer_testkit::fixtures::REAL_RECORDS;
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, proc_start};

pub(crate) fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// What the command's tests do with a temporary home: write records shaped as the
/// listing shows them, copy real ones, run the built binary in it and redact its output.
pub(crate) trait CommandHome {
    /// Writes a record for the live `child` with its true start token; `addressable`
    /// gives it a listening socket.
    fn live_record(
        &mut self,
        child: &Sleeper,
        session: &str,
        name: &str,
        status: &str,
        addressable: bool,
    );
    /// Copies a real record from the fixtures (its pid is dead here).
    fn copy_fixture(&self, folder: &str, file: &str);
    /// Runs the binary with `--home` this home.
    fn run(&self, args: &[&str]) -> Output;
    /// Runs with `--json` and parses stdout, checking it holds exactly one JSON value.
    fn json(&self, args: &[&str]) -> (i32, serde_json::Value, String);
    /// Human output with the home path, pids and clock-dependent bits replaced. Column
    /// padding depends on pid widths, so runs of spaces become two (alignment is checked
    /// on its own by [`assert_aligned`]).
    fn redact(&self, text: &str, pids: &[u32]) -> String;
}

impl CommandHome for TempHome {
    fn live_record(
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
            "procStart": proc_start(pid).unwrap(),
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
            record["messagingSocketPath"] = self.socket(pid).unwrap().to_str().unwrap().into();
        }
        self.write_record(pid, record.to_string()).unwrap();
    }

    fn copy_fixture(&self, folder: &str, file: &str) {
        fs::copy(
            Path::new(REAL_RECORDS)
                .join(folder)
                .join("sessions")
                .join(file),
            self.sessions().join(file),
        )
        .unwrap();
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(self.root())
            .args(args)
            .env_remove("CLAUDE_CONFIG_DIR")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> (i32, serde_json::Value, String) {
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

    fn redact(&self, text: &str, pids: &[u32]) -> String {
        let mut text = redact_local_times(&text.replace(self.root().to_str().unwrap(), "[HOME]"));
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
/// `2026-12-02 03:41:07 CET` (a date, a time and a zone word) becomes `[local time]`.
fn redact_local_times(text: &str) -> String {
    let shape = |s: &[u8]| {
        s.len() >= 19
            && s[..19]
                .iter()
                .zip(b"dddd-dd-dd dd:dd:dd")
                .all(|(&c, &want)| {
                    if want == b'd' {
                        c.is_ascii_digit()
                    } else {
                        c == want
                    }
                })
    };
    let bytes = text.as_bytes();
    let mut out = String::new();
    let mut i = 0;
    while i < bytes.len() {
        if shape(&bytes[i..]) && bytes.get(i + 19) == Some(&b' ') {
            let zone = bytes[i + 20..]
                .iter()
                .take_while(|c| !c.is_ascii_whitespace())
                .count();
            out.push_str("[local time]");
            i += 20 + zone;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

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
