//! `watch --host`: one stream of every host's events. Each host's own `watch` runs over
//! ssh (this machine's as a child too); a link that drops is a `unreachable` event, and
//! the host is asked again with backoff. On each (re)connection its live sessions are
//! compared with what was known (`synced` marks the end of them), so what vanished or
//! changed meanwhile is told, and nothing already told is told twice.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use claude_peer_remote::Host;
use serde_json::{Value, json};

use super::{Args, stdout_closed_while_waiting};
use crate::error::{Exit, Failure};
use crate::ops::remote::{Hosts, mark};
use crate::output::Output;
use crate::table::{field, now_ms, status_of_json};

/// The longest wait before a host is asked again.
const MOST_BACKOFF: Duration = Duration::from_secs(30);

/// The streams' processes: the pids of the `ssh`s (or children) that run them, to stop
/// them at the end.
pub(crate) type Running = Arc<Mutex<Vec<u32>>>;

/// Where a followed host's events go: `false` once nobody listens.
pub(crate) type Tell<'a> = &'a dyn Fn(Value) -> bool;

pub(crate) fn exec_hosts(hosts: &Hosts, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let (events, heard) = mpsc::channel::<Value>();
    let running: Running = Arc::default();
    for host in hosts.list.clone() {
        let (hosts, events, running) = (hosts.clone(), events.clone(), Arc::clone(&running));
        let poll = args.poll;
        std::thread::spawn(move || {
            follow(
                &hosts,
                &host,
                poll,
                &|event| events.send(event).is_ok(),
                &running,
            );
        });
    }
    drop(events);
    let result = loop {
        match heard.recv_timeout(Duration::from_millis(500)) {
            Ok(event) => {
                if let Err(err) = print(out, &event) {
                    break Err(Failure::from(err));
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break Ok(Exit::Success),
        }
        match stdout_closed_while_waiting(None, Duration::ZERO) {
            Ok(true) => break Ok(Exit::Success),
            Ok(false) => {}
            Err(err) => break Err(Failure::from(err)),
        }
    };
    stop(&running);
    result
}

/// Stops the followers' processes still running (SIGTERM): the command is ending.
pub(crate) fn stop(running: &Running) {
    for pid in running.lock().map(|p| p.clone()).unwrap_or_default() {
        if let Some(pid) = rustix::process::Pid::from_raw(pid.cast_signed()) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}

/// Follows `host` for as long as `tell` listens: its `watch`, again after each drop; each
/// event marked with its host, `unreachable` and `reachable` as the link goes and comes.
pub(crate) fn follow(hosts: &Hosts, host: &Host, poll: bool, tell: Tell<'_>, running: &Running) {
    let mut known: BTreeMap<String, Value> = BTreeMap::new();
    let mut backoff = Duration::from_secs(1);
    let mut reachable = true;
    loop {
        let mut words = vec!["--json".into(), "watch".into(), "--synced".into()];
        if poll {
            words.push("--poll".into());
        }
        let child = hosts
            .command(host, &words)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn();
        let why = match child {
            Ok(mut child) => {
                if let Ok(mut pids) = running.lock() {
                    pids.push(child.id());
                }
                let stderr = child.stderr.take().map(|mut pipe| {
                    std::thread::spawn(move || {
                        let mut text = String::new();
                        let _ = (&mut pipe).take(64 * 1024).read_to_string(&mut text);
                        text
                    })
                });
                let Some(stdout) = child.stdout.take().map(BufReader::new) else {
                    return;
                };
                let mut told = Told {
                    host,
                    known: &mut known,
                    tell,
                    reachable: &mut reachable,
                    synced: false,
                };
                if !told.stream(stdout) {
                    return;
                }
                if told.synced {
                    backoff = Duration::from_secs(1);
                }
                let status = child.wait();
                if let Ok(mut pids) = running.lock() {
                    pids.retain(|&pid| pid != child.id());
                }
                let stderr = stderr.and_then(|t| t.join().ok()).unwrap_or_default();
                let code = status.ok().and_then(|s| s.code()).unwrap_or(255);
                match hosts.check(host, code, &stderr) {
                    Err(err) => (err.as_str(), err.to_string()),
                    Ok(()) => (
                        "watch_ended",
                        format!("{host}: its watch ended (exit {code}): {}", stderr.trim()),
                    ),
                }
            }
            Err(err) => (
                "ssh_not_found",
                format!("{host}: cannot start its watch: {err}"),
            ),
        };
        if reachable {
            reachable = false;
            let gone = json!({"event": "unreachable", "host": host.as_str(), "error": why.0, "message": why.1});
            if !tell(gone) {
                return;
            }
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(MOST_BACKOFF);
    }
}

/// One connection's events, told against what the host's earlier connections told.
struct Told<'a> {
    host: &'a Host,
    known: &'a mut BTreeMap<String, Value>,
    tell: Tell<'a>,
    reachable: &'a mut bool,
    /// Whether this connection got as far as its live sessions.
    synced: bool,
}

impl Told<'_> {
    /// Reads the stream to its end: `false` once nobody listens any more.
    fn stream(&mut self, stdout: impl BufRead) -> bool {
        let mut fresh: Option<BTreeMap<String, Value>> = Some(BTreeMap::new());
        for line in stdout.lines() {
            let Ok(line) = line else { break };
            let Ok(mut event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if event["event"] == "synced" {
                let Some(now) = fresh.take() else { continue };
                if !self.resync(now) {
                    return false;
                }
                continue;
            }
            mark(&mut event["session"], self.host);
            let Some(key) = event["session"]["file"].as_str().map(str::to_owned) else {
                continue;
            };
            if let Some(now) = &mut fresh {
                // Still the sessions live at the start: compared once they are all in.
                now.insert(key, event["session"].clone());
                continue;
            }
            if event["event"] == "vanished" {
                self.known.remove(&key);
            } else {
                self.known.insert(key, event["session"].clone());
            }
            if !(self.tell)(event) {
                return false;
            }
        }
        true
    }

    /// Tells what differs between what was known and the sessions live `now`.
    fn resync(&mut self, now: BTreeMap<String, Value>) -> bool {
        let mut told = Vec::new();
        if !*self.reachable {
            told.push(json!({"event": "reachable", "host": self.host.as_str()}));
        }
        *self.reachable = true;
        self.synced = true;
        for (key, session) in &*self.known {
            if !now.contains_key(key) {
                told.push(json!({"event": "vanished", "session": session}));
            }
        }
        for (key, session) in &now {
            match self.known.get(key) {
                None => told.push(json!({"event": "appeared", "session": session})),
                Some(before) if before != session => {
                    told.push(json!({"event": "changed", "session": session}));
                }
                Some(_) => {}
            }
        }
        *self.known = now;
        told.into_iter().all(|event| (self.tell)(event))
    }
}

/// One event, as JSON or as `watch` words with the host first.
fn print(out: &Output, event: &Value) -> std::io::Result<()> {
    if out.is_json() {
        return out.json(event);
    }
    let word = event["event"].as_str().unwrap_or_default();
    let session = &event["session"];
    let host = event["host"]
        .as_str()
        .or(session["host"].as_str())
        .unwrap_or("-");
    let line = match word {
        "unreachable" => format!(
            "{} {}: {}\n",
            field(host),
            out.style.paint("31", "unreachable"),
            field(event["message"].as_str().unwrap_or_default())
        ),
        "reachable" => format!("{} {}\n", field(host), out.style.paint("32", "reachable")),
        _ => {
            let painted = match word {
                "appeared" => out.style.paint("32", "appeared"),
                "vanished" => out.style.paint("31", "vanished"),
                _ => out.style.paint("33", "changed "),
            };
            let text = |key: &str| session[key].as_str();
            let status = status_of_json(session, now_ms());
            format!(
                "{} {painted} {} pid {} {} {}\n",
                field(host),
                field(text("name").unwrap_or("-")),
                session["pid"],
                field(&status),
                field(text("cwd").unwrap_or("-")),
            )
        }
    };
    out.styled(&line)
}
