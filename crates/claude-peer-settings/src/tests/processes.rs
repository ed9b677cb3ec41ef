//! Real processes: writers killed with SIGKILL mid-update, and concurrent writers.
//!
//! The children are this test binary run again with `CHILD_MODE` set, selecting
//! [`child_writer_runs_only_when_spawned_by_a_process_test`]; run normally, that test does nothing.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use super::{set_key, temps_in};
use crate::{InboundPolicy, SettingsStore};

const CHILD_TEST: &str = "tests::processes::child_writer_runs_only_when_spawned_by_a_process_test";

fn spawn_child(mode: &str, path: &Path, writer: usize) -> (Child, BufReader<ChildStdout>) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            CHILD_TEST,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--quiet",
        ])
        .env("CHILD_MODE", mode)
        .env("CHILD_PATH", path)
        .env("CHILD_WRITER", writer.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    (child, stdout)
}

/// The next line the child printed with `prefix`, skipping the test harness's own lines.
fn next_report(out: &mut BufReader<ChildStdout>, prefix: &str) -> Option<String> {
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).unwrap() == 0 {
            return None;
        }
        if let Some(rest) = line.trim_end().strip_prefix(prefix) {
            return Some(rest.to_owned());
        }
    }
}

fn policy_for(counter: u64) -> InboundPolicy {
    [
        InboundPolicy::Accept,
        InboundPolicy::Hold,
        InboundPolicy::Refuse,
    ][(counter % 3) as usize]
}

#[test]
fn child_writer_runs_only_when_spawned_by_a_process_test() {
    let Ok(mode) = std::env::var("CHILD_MODE") else {
        return;
    };
    let path = std::env::var("CHILD_PATH").unwrap();
    let writer: usize = std::env::var("CHILD_WRITER").unwrap().parse().unwrap();
    let store = SettingsStore::new(&path);
    let mut stdout = std::io::stdout().lock();
    match mode.as_str() {
        "crash-loop" => {
            // Continues the counter found in the file: each round first sets the policy
            // belonging to the next counter value, then the counter itself.
            let now: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            let mut counter = now["counter"].as_u64().unwrap();
            writeln!(stdout, "ready").unwrap();
            stdout.flush().unwrap();
            loop {
                counter += 1;
                store.set_inbound(policy_for(counter), None).unwrap();
                set_key(path.as_ref(), "counter", &json!(counter)).unwrap();
                writeln!(stdout, "done {counter}").unwrap();
                stdout.flush().unwrap();
            }
        }
        "distinct-keys" => {
            for update in 0..50 {
                let key = format!("writer{writer}-update{update}");
                match set_key(path.as_ref(), &key, &json!(update)) {
                    Ok(_) => writeln!(stdout, "ok {key}").unwrap(),
                    Err(e) => writeln!(stdout, "failed {key}: {e}").unwrap(),
                }
            }
            stdout.flush().unwrap();
        }
        other => panic!("unknown CHILD_MODE {other}"),
    }
}

const CRASH_BASE: &str = "{\n  \"theme\": \"dark\",\n  \"crossSessionInbound\": \"accept\",\n  \"counter\": 0,\n  \"big\": 123456789012345678901,\n  \"spelled\": 1e3\n}\n";

fn crash_doc(base: &str, policy: InboundPolicy, counter: u64) -> String {
    base.replace("\"accept\"", &format!("\"{policy}\""))
        .replace("\"counter\": 0", &format!("\"counter\": {counter}"))
}

/// A first member of over 64 KiB: a document many times the size of Claude Code's own settings.
fn big_member() -> String {
    let mut member = String::from("  \"permissions\": {\n    \"allow\": [\n");
    for i in 0..3_000 {
        writeln!(member, "      \"Bash(tool-{i:06} --flag:*)\",").unwrap();
    }
    member.push_str("      \"Read(//work/**)\"\n    ]\n  },\n");
    assert!(member.len() > 64 * 1024);
    member
}

#[test]
fn a_writer_killed_at_random_moments_200_times_always_leaves_one_of_the_values_written() {
    killed_writers_leave_one_of_the_values_written(CRASH_BASE);
}

#[test]
fn a_writer_of_a_big_document_killed_200_times_always_leaves_one_of_the_values_written() {
    killed_writers_leave_one_of_the_values_written(&CRASH_BASE.replacen(
        "{\n",
        &format!("{{\n{}", big_member()),
        1,
    ));
}

/// 200 writers, each updating a file that starts as `base` in a loop, killed at random moments.
fn killed_writers_leave_one_of_the_values_written(base: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, base).unwrap();
    let mut rng = Rng::from_entropy();
    let mut last_counter = 0;
    for kill in 0..200 {
        let (mut child, mut out) = spawn_child("crash-loop", &path, 0);
        assert_eq!(next_report(&mut out, "ready").as_deref(), Some(""));
        let mut reported = last_counter;
        for _ in 0..rng.below(3) {
            reported = next_report(&mut out, "done ").unwrap().parse().unwrap();
        }
        // The kill lands anywhere in the update that follows: this pause picks the moment,
        // it does not wait for anything.
        std::thread::sleep(std::time::Duration::from_micros(rng.below(3000)));
        rustix::process::kill_process(
            rustix::process::Pid::from_child(&child),
            rustix::process::Signal::KILL,
        )
        .unwrap();
        child.wait().unwrap();
        // Everything the child printed before it died: its last completed round.
        while let Some(done) = next_report(&mut out, "done ") {
            reported = done.parse().unwrap();
        }

        let bytes = String::from_utf8(std::fs::read(&path).unwrap()).unwrap();
        let parsed: Value = serde_json::from_str(&bytes)
            .unwrap_or_else(|e| panic!("kill {kill}: the file parses ({e}): {bytes:?}"));
        let counter = parsed["counter"].as_u64().unwrap();
        assert!(
            (reported..=reported + 1).contains(&counter) && counter >= last_counter,
            "kill {kill}: counter {counter} after {reported} reported and {last_counter} before"
        );
        let written = [policy_for(counter), policy_for(counter + 1)]
            .into_iter()
            .any(|p| bytes == crash_doc(base, p, counter));
        assert!(
            written,
            "kill {kill}: the file is one of the documents written: {bytes:?}"
        );
        assert_eq!(
            SettingsStore::new(&path).read().unwrap().inbound,
            serde_json::from_value(parsed["crossSessionInbound"].clone()).unwrap(),
            "kill {kill}: a left-over temporary file is never read as the settings"
        );
        last_counter = counter;
    }
    println!(
        "{last_counter} rounds, {} temporary files left by kills mid-update",
        temps_in(dir.path()).len()
    );
    assert!(last_counter > 0, "the children made progress");
    assert!(
        temps_in(dir.path()).len() <= 1,
        "a left-over temporary file is replaced by the next writer, never added to"
    );
}

#[test]
fn eight_concurrent_writers_of_fifty_updates_each_lose_none() {
    writers_lose_none("{\n  \"theme\": \"dark\",\n  \"crossSessionInbound\": \"hold\"\n}\n");
}

#[test]
fn eight_concurrent_writers_of_a_big_document_lose_none() {
    writers_lose_none(&format!(
        "{{\n{}  \"theme\": \"dark\",\n  \"crossSessionInbound\": \"hold\"\n}}\n",
        big_member()
    ));
}

/// 8 processes × 50 updates, each setting a distinct key, on a file that starts as `base`
/// (ending with `"crossSessionInbound": "hold"`).
fn writers_lose_none(base: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("settings.json");
    std::fs::write(&path, base).unwrap();
    let children: Vec<_> = (0..8)
        .map(|writer| spawn_child("distinct-keys", &path, writer))
        .collect();
    let mut succeeded = Vec::new();
    for (mut child, mut out) in children {
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 {
            if let Some(key) = line.trim_end().strip_prefix("ok ") {
                succeeded.push(key.to_owned());
            }
            assert!(!line.starts_with("failed"), "{line}");
            line.clear();
        }
        assert!(child.wait().unwrap().success());
    }
    assert_eq!(
        succeeded.len(),
        400,
        "our own writers never conflict: they share a lock"
    );
    let start: Value = serde_json::from_str(base).unwrap();
    let end: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    for key in &succeeded {
        assert!(
            end.get(key).is_some(),
            "{key} reported success and is present"
        );
    }
    for (key, value) in start.as_object().unwrap() {
        assert_eq!(&end[key], value, "{key} is unchanged");
    }
    assert_eq!(
        end.as_object().unwrap().len(),
        start.as_object().unwrap().len() + 400
    );
    let kept = base.strip_suffix("\n}\n").unwrap();
    assert!(
        std::fs::read_to_string(&path)
            .unwrap()
            .starts_with(&format!("{kept},\n  \"writer")),
        "the original members keep their place and layout"
    );
    assert!(temps_in(dir.path()).is_empty());
}

/// A small deterministic pseudo-random generator (xorshift64*), seeded per test run.
struct Rng(u64);

impl Rng {
    fn from_entropy() -> Rng {
        use std::hash::{BuildHasher as _, Hasher as _};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(std::process::id());
        let seed = h.finish() | 1;
        println!("rng seed {seed:#x}");
        Rng(seed)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}
