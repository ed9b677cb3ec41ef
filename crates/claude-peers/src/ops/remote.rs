//! Other machines: the hosts of `--host` and `--hosts`, each asked in parallel by running
//! `claude-peers` there (`claude-peer-remote`); `local` is this machine, asked the same
//! way, by this very program in a child process, so every host answers in one shape.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use claude_peer_remote::{Answer, Host, Ssh};
use serde_json::Value;

use crate::config;
use crate::ops::Context;

/// The hosts a command asks, and how to reach them.
#[derive(Debug, Clone)]
pub(crate) struct Hosts {
    pub(crate) list: Vec<Host>,
    ssh: Ssh,
    /// This machine's Claude home, for `local`.
    home: PathBuf,
}

/// What one host answered: `claude-peers --json`'s value and exit code, or why it could
/// not be asked.
pub(crate) type Asked = Result<Reply, claude_peer_remote::Error>;

/// A host's `claude-peers --json` answer.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) exit: i32,
    pub(crate) value: Value,
}

/// The hosts file: `claude-peers/hosts` beside `config.toml`.
pub(crate) fn hosts_file() -> Option<PathBuf> {
    config::config_dir().map(|dir| dir.join("hosts"))
}

impl Hosts {
    /// `--host` and `--hosts` as given: `None` when neither was (this machine only, as
    /// always).
    pub(crate) fn from_flags(
        ctx: &Context,
        hosts: &[String],
        every_host: bool,
        remote_bin: Option<OsString>,
    ) -> Result<Option<Self>, claude_peer_remote::Error> {
        let mut list = Vec::new();
        if every_host {
            let path = hosts_file().ok_or_else(|| claude_peer_remote::Error::HostsFile {
                path: PathBuf::from("$XDG_CONFIG_HOME/claude-peers/hosts"),
                why: "has no place: set XDG_CONFIG_HOME or HOME".to_owned(),
            })?;
            list = Host::read_file(&path)?;
        }
        for text in hosts {
            let host = Host::parse(text)?;
            if !list.contains(&host) {
                list.push(host);
            }
        }
        if list.is_empty() && !every_host {
            return Ok(None);
        }
        let control = claude_peer_sender::default_runtime_dir()
            .and_then(|dir| claude_peer_sender::private_dir(&dir.join("ssh")).ok());
        let mut ssh = Ssh::new(control);
        if let Some(bin) = remote_bin {
            ssh = ssh.remote_bin(bin);
        }
        Ok(Some(Self {
            list,
            ssh,
            home: ctx.home.root().to_owned(),
        }))
    }

    /// The host a target such as `dev1:reviewer` names, and the target there: only one
    /// of these hosts counts, so a name holding `:` stays a name.
    pub(crate) fn split<'t>(&self, target: &'t str) -> Option<(&Host, &'t str)> {
        self.list.iter().find_map(|host| {
            target
                .strip_prefix(host.as_str())
                .and_then(|rest| rest.strip_prefix(':'))
                .map(|rest| (host, rest))
        })
    }

    /// Asks every host `claude-peers --json ARGS` at once (one thread each), `stdin` as
    /// each one's input; the answers in the hosts' order.
    pub(crate) fn ask_all(&self, args: &[OsString], stdin: &[u8]) -> Vec<(Host, Asked)> {
        self.ask_each(&self.list, |_| (args.to_vec(), stdin.to_vec()))
    }

    /// Asks each of `hosts`, in parallel, what `request` makes of it: its arguments and
    /// input.
    pub(crate) fn ask_each(
        &self,
        hosts: &[Host],
        request: impl Fn(&Host) -> (Vec<OsString>, Vec<u8>) + Sync,
    ) -> Vec<(Host, Asked)> {
        each(hosts, |host| {
            let (args, stdin) = request(host);
            self.ask(host, &args, &stdin)
        })
    }

    /// Asks every host `claude-peers ARGS` at once, for their words as they are.
    pub(crate) fn ask_all_text(
        &self,
        args: &[OsString],
    ) -> Vec<(Host, Result<Answer, claude_peer_remote::Error>)> {
        each(&self.list, |host| self.ask_text(host, args, b""))
    }

    /// Every host's JSON array answer to `args` (`list`, `log`, `outbox`), each item
    /// marked with its host, in the hosts' order; and the hosts that failed.
    pub(crate) fn arrays(&self, args: &[OsString]) -> (Vec<Value>, Vec<HostError>) {
        let (mut items, mut failed) = (Vec::new(), Vec::new());
        for (host, asked) in self.ask_all(args, b"") {
            match array(&host, asked) {
                Ok(found) => items.extend(found),
                Err(err) => failed.push(err),
            }
        }
        (items, failed)
    }

    /// Asks `host` `claude-peers --json ARGS`.
    pub(crate) fn ask(&self, host: &Host, args: &[OsString], stdin: &[u8]) -> Asked {
        let mut words = vec![OsString::from("--json")];
        words.extend_from_slice(args);
        reply(host, &self.ask_text(host, &words, stdin)?)
    }

    /// Asks `host` `claude-peers ARGS`, for its words as they are.
    pub(crate) fn ask_text(
        &self,
        host: &Host,
        args: &[OsString],
        stdin: &[u8],
    ) -> Result<Answer, claude_peer_remote::Error> {
        match host {
            Host::Local => self.local(args, stdin),
            Host::Ssh(destination) => self.ssh.run(destination, args, stdin),
        }
    }

    /// `targets` by the host each is on ([`Hosts::target`]), in the order the hosts first
    /// come, each host's as named there; the first target that names no host, if any.
    pub(crate) fn group<'t>(
        &self,
        targets: &'t [String],
    ) -> Result<Vec<(Host, Vec<&'t str>)>, &'t str> {
        let mut per_host: Vec<(Host, Vec<&'t str>)> = Vec::new();
        for target in targets {
            let (host, there) = self.target(target).ok_or(target.as_str())?;
            match per_host.iter_mut().find(|(h, _)| h == host) {
                Some((_, named)) => named.push(there),
                None => per_host.push((host.clone(), vec![there])),
            }
        }
        Ok(per_host)
    }

    /// The one host a target is on: the one its `HOST:` names, or the only host asked.
    pub(crate) fn target<'t>(&self, target: &'t str) -> Option<(&Host, &'t str)> {
        self.split(target).or(match self.list.as_slice() {
            [only] => Some((only, target)),
            _ => None,
        })
    }

    /// The command that runs `ARGS` on `host` and streams its output (`watch`).
    pub(crate) fn command(&self, host: &Host, args: &[OsString]) -> Command {
        match host {
            Host::Local => self.local_command(args),
            Host::Ssh(destination) => self.ssh.command(destination, args),
        }
    }

    /// What an ended stream's exit code and stderr say about the way to `host`.
    pub(crate) fn check(
        &self,
        host: &Host,
        exit: i32,
        stderr: &str,
    ) -> Result<(), claude_peer_remote::Error> {
        match host {
            Host::Local => Ok(()),
            Host::Ssh(destination) => self.ssh.check(destination, exit, stderr),
        }
    }

    /// This program for this machine's home, as a remote one runs.
    fn local_command(&self, args: &[OsString]) -> Command {
        let program = std::env::current_exe().unwrap_or_else(|_| "claude-peers".into());
        let mut command = Command::new(program);
        command.arg("--home").arg(&self.home).args(args);
        command
    }

    fn local(&self, args: &[OsString], stdin: &[u8]) -> Result<Answer, claude_peer_remote::Error> {
        use std::io::Write;
        let failed = |err: std::io::Error| claude_peer_remote::Error::NoSsh {
            host: claude_peer_remote::LOCAL.to_owned(),
            program: "claude-peers".to_owned(),
            source: err,
        };
        let mut child = self
            .local_command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(failed)?;
        if let Some(mut input) = child.stdin.take() {
            let _ = input.write_all(stdin);
        }
        let out = child.wait_with_output().map_err(failed)?;
        Ok(Answer {
            exit: out.status.code().unwrap_or(1),
            stdout: out.stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// `ask(host)` for each of `hosts`, one thread each; the answers in the hosts' order.
fn each<T: Send>(
    hosts: &[Host],
    ask: impl Fn(&Host) -> Result<T, claude_peer_remote::Error> + Sync,
) -> Vec<(Host, Result<T, claude_peer_remote::Error>)> {
    std::thread::scope(|scope| {
        let asking: Vec<_> = hosts
            .iter()
            .map(|host| {
                let ask = &ask;
                scope.spawn(move || ask(host))
            })
            .collect();
        asking
            .into_iter()
            .zip(hosts)
            .map(|(asked, host)| {
                let answer = asked.join().unwrap_or_else(|_| {
                    Err(claude_peer_remote::Error::BadAnswer {
                        host: host.to_string(),
                        exit: 255,
                        message: "asking it failed".to_owned(),
                    })
                });
                (host.clone(), answer)
            })
            .collect()
    })
}

/// The answer as JSON, or why it is none.
fn reply(host: &Host, answer: &Answer) -> Asked {
    serde_json::from_slice(&answer.stdout)
        .map(|value| Reply {
            exit: answer.exit,
            value,
        })
        .map_err(|_| claude_peer_remote::Error::BadAnswer {
            host: host.to_string(),
            exit: answer.exit,
            message: claude_peer_remote::last_words(&answer.stderr)
                .unwrap_or_else(|| "no output".to_owned()),
        })
}

/// `value` (a session, or any object of a host's answer) marked with its host, in the
/// place its `host` key already holds, and so is the session it holds (a send's).
pub(crate) fn mark(value: &mut Value, host: &Host) {
    if let Some(object) = value.as_object_mut() {
        object.insert("host".to_owned(), Value::from(host.as_str()));
        if let Some(session) = object.get_mut("session").and_then(Value::as_object_mut) {
            session.insert("host".to_owned(), Value::from(host.as_str()));
        }
    }
}

/// A host that did not answer as asked: the way there failed, or its `claude-peers`
/// said no.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HostError {
    #[error(transparent)]
    Way(#[from] claude_peer_remote::Error),
    /// The remote's own failure (`{"error"|"refusal": name, "message"}`, marked with its
    /// host) and exit code.
    #[error("{host}: {}: {}", said_name(.value), .value["message"].as_str().unwrap_or_default())]
    Said {
        host: String,
        exit: i32,
        value: Value,
    },
}

/// A remote failure's stable name.
pub(crate) fn said_name(value: &Value) -> &str {
    ["error", "refusal"]
        .into_iter()
        .find_map(|key| value[key].as_str())
        .unwrap_or("failed")
}

impl HostError {
    /// `{"host", "error", "message"}`, for a `hosts` list of failures.
    pub(crate) fn json(&self, host: &Host) -> Value {
        let (name, message) = match self {
            Self::Way(err) => (err.as_str().to_owned(), err.to_string()),
            Self::Said { value, .. } => (
                said_name(value).to_owned(),
                value["message"].as_str().unwrap_or_default().to_owned(),
            ),
        };
        serde_json::json!({"host": host.as_str(), "error": name, "message": message})
    }
}

/// A host's answer that must have succeeded: its value, or the failure it holds.
pub(crate) fn succeeded(host: &Host, asked: Asked) -> Result<Value, HostError> {
    let mut reply = asked?;
    if reply.exit == 0 {
        return Ok(reply.value);
    }
    mark(&mut reply.value, host);
    Err(HostError::Said {
        host: host.to_string(),
        exit: reply.exit,
        value: reply.value,
    })
}

/// A host's answer that must be an array of objects (`list`): each marked with its
/// host.
pub(crate) fn array(host: &Host, asked: Asked) -> Result<Vec<Value>, HostError> {
    let value = succeeded(host, asked)?;
    let Value::Array(mut items) = value else {
        return Err(HostError::Way(claude_peer_remote::Error::BadAnswer {
            host: host.to_string(),
            exit: 0,
            message: "an answer that is not an array".to_owned(),
        }));
    };
    for item in &mut items {
        mark(item, host);
    }
    Ok(items)
}

/// The answers of several hosts' `send`s as one broadcast: every result with its host and
/// its target as given here (`HOST:TARGET`), the counts summed, and each host that could
/// not be asked in `hosts`.
#[derive(Debug, Default)]
pub(crate) struct Merged {
    pub(crate) results: Vec<Value>,
    pub(crate) hosts: Vec<Value>,
    pub(crate) delivered: u64,
    pub(crate) failed: u64,
}

impl Merged {
    /// `host`'s answer to a send to `targets` (none for `--all-live` or `--cwd`).
    pub(crate) fn add(&mut self, host: &Host, targets: &[&str], asked: Asked) {
        let reply = match asked {
            Ok(reply) => reply,
            Err(err) => return self.host_failed(host, targets, &HostError::Way(err)),
        };
        let value = reply.value;
        if let Some(results) = value["results"].as_array() {
            for result in results {
                let target = result["target"].as_str().unwrap_or_default().to_owned();
                self.results.push(Self::result(host, &target, result));
            }
            self.delivered += value["delivered"].as_u64().unwrap_or_default();
            self.failed += value["failed"].as_u64().unwrap_or_default();
        } else if let [target] = targets
            && (value["delivered"] == true || value.get("message").is_some())
        {
            if value["delivered"] == true {
                self.delivered += 1;
            } else {
                self.failed += 1;
            }
            self.results.push(Self::result(host, target, &value));
        } else {
            let err = HostError::Said {
                host: host.to_string(),
                exit: reply.exit,
                value,
            };
            self.host_failed(host, targets, &err);
        }
    }

    /// `result` (a single send's answer) as a result of the merged broadcast.
    fn result(host: &Host, target: &str, result: &Value) -> Value {
        let mut merged = serde_json::Map::new();
        merged.insert("target".to_owned(), Value::from(format!("{host}:{target}")));
        if let Some(object) = result.as_object() {
            for (key, value) in object.iter().filter(|(key, _)| *key != "target") {
                merged.insert(key.clone(), value.clone());
            }
        }
        let mut merged = Value::Object(merged);
        mark(&mut merged, host);
        merged
    }

    fn host_failed(&mut self, host: &Host, targets: &[&str], err: &HostError) {
        let failure = err.json(host);
        for target in targets {
            let mut result = failure.clone();
            if let Some(object) = result.as_object_mut() {
                object.shift_remove("host");
            }
            self.results.push(Self::result(host, target, &result));
            self.failed += 1;
        }
        self.hosts.push(failure);
    }

    /// `{"results", "delivered", "failed", "hosts"}`.
    pub(crate) fn json(&self) -> Value {
        serde_json::json!({
            "results": self.results,
            "delivered": self.delivered,
            "failed": self.failed,
            "hosts": self.hosts,
        })
    }
}

/// A host's session (its JSON, as `watch --json` prints it) as a live session here, for
/// a view that shows it beside this machine's (`top`): its record's fields under the
/// names Claude Code gives them, and whether the host can message it. `None` for what
/// is no live session.
pub(crate) fn live_session(session: &Value) -> Option<claude_peer_resolve::LiveSession> {
    use claude_peer_resolve::{Addressability, Unaddressable};
    let field = |ours: &str| session.get(ours).cloned().unwrap_or(Value::Null);
    let mut record = serde_json::Map::new();
    for (theirs, ours) in [
        ("pid", "pid"),
        ("sessionId", "session_id"),
        ("name", "name"),
        ("nameSource", "name_source"),
        ("cwd", "cwd"),
        ("kind", "kind"),
        ("entrypoint", "entrypoint"),
        ("version", "version"),
        ("status", "vendor_status"),
        ("waitingFor", "waiting_for"),
        ("startedAt", "started_at_ms"),
        ("updatedAt", "updated_at_ms"),
        ("statusUpdatedAt", "status_updated_at_ms"),
        ("tmux", "tmux"),
        ("messagingSocketPath", "socket_path"),
    ] {
        let value = field(ours);
        if !value.is_null() {
            record.insert(theirs.to_owned(), value);
        }
    }
    let record: claude_peer_registry::Record =
        serde_json::from_value(Value::Object(record)).ok()?;
    let socket = record.messaging_socket_path.clone();
    let addressability = match (session["addressable"] == true, socket) {
        (true, Some(socket)) => Addressability::Addressable(PathBuf::from(socket)),
        (_, Some(socket)) => {
            Addressability::NotAddressable(Unaddressable::SocketMissing { socket })
        }
        (_, None) => Addressability::NotAddressable(Unaddressable::NoSocket),
    };
    Some(claude_peer_resolve::LiveSession {
        file: PathBuf::from(session["file"].as_str().unwrap_or_default()),
        pid: record.pid,
        record,
        addressability,
    })
}
