//! The built-in relay: a headless Claude Code that sends with its own `SendMessage`,
//! its model replaced by this project's scripted endpoint.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs::{self, DirBuilder};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::{Pid as RawPid, Signal, kill_process_group};
use serde_json::{Value, json};

use crate::endpoint::{Endpoint, Reply};
use crate::hook::{self, Plan};
use crate::stream::{Line, Outcome};
use crate::{Confirmation, Relay, RelayFailure, Target};

/// How long after the tool result a receiver's hold or refuse notice is waited for: 2 s.
/// Claude Code sends it 0.3–0.6 s after the message arrives; a sender that exits sooner
/// would report a held message as accepted.
pub const DEFAULT_RECEIPT_WINDOW: Duration = Duration::from_secs(2);
/// The sender's default name, shown to the receiver: `claude-peers`.
pub const DEFAULT_SENDER_NAME: &str = "claude-peers";
/// The longest stdout line of the sender that is parsed: 8 MiB (a 64 KiB message appears
/// several times, escaped, in one line).
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// How long a sender whose stdin closed may take to exit cleanly before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);
/// The tool-use id of the scripted call.
const TOOL_USE_ID: &str = "toolu_claude_peers_send";

/// A relay that sends through Claude Code's own `SendMessage`.
///
/// It runs the user's `claude` headless (`-p`, stream-json in and out) in a private
/// Claude home of this project, its model a scripted endpoint on 127.0.0.1 that answers
/// "call `SendMessage` with exactly this" (no language model, no API key, no request
/// leaves the machine). Two hooks guard it: the one planned call is allowed only while
/// the target still runs the same session, and inbound items never reach the model.
/// After the tool result, it stays through the receipt window: a hold or refusal notice
/// comes back from the receiver, no notice means accepted.
#[derive(Debug, Clone)]
pub struct ClaudeRelay {
    claude: PathBuf,
    hook: Vec<OsString>,
    from: String,
    home: Option<PathBuf>,
    timeout: Duration,
    receipt_window: Duration,
}

impl ClaudeRelay {
    /// A relay running the Claude Code at `claude`, with hooks run as the program and
    /// arguments in `hook` followed by the hook's own arguments (for example
    /// `["/usr/local/bin/claude-peers", "hook"]`; see [`crate::hook::run`]).
    pub fn new(claude: impl Into<PathBuf>, hook: Vec<OsString>) -> Self {
        Self {
            claude: claude.into(),
            hook,
            from: DEFAULT_SENDER_NAME.to_owned(),
            home: None,
            timeout: crate::DEFAULT_TIMEOUT,
            receipt_window: DEFAULT_RECEIPT_WINDOW,
        }
    }

    /// The sender's name, which the receiver sees (`Message from @<name>`).
    #[must_use]
    pub fn from(mut self, name: impl Into<String>) -> Self {
        self.from = name.into();
        self
    }

    /// The sender's private Claude home [default: [`default_sender_home`]].
    #[must_use]
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.home = Some(dir.into());
        self
    }

    /// Kills the sender when the send is not settled `timeout` after it started.
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a notice from the receiver is waited for after the tool result.
    #[must_use]
    pub const fn receipt_window(mut self, window: Duration) -> Self {
        self.receipt_window = window;
        self
    }

    fn settings(&self, plan: &Path) -> String {
        let command = |mode: &[&OsStr]| {
            let words: Vec<String> = self
                .hook
                .iter()
                .map(OsString::as_os_str)
                .chain(mode.iter().copied())
                .map(|word| shell_quote(&word.to_string_lossy()))
                .collect();
            json!([{"matcher": "*", "hooks": [{"type": "command", "command": words.join(" ")}]}])
        };
        json!({
            "hooks": {
                "PreToolUse": command(&[OsStr::new("pre-tool-use"), plan.as_os_str()]),
                "UserPromptSubmit": command(&[OsStr::new("user-prompt-submit")]),
            }
        })
        .to_string()
    }

    fn spawn(
        &self,
        home: &Path,
        run_dir: &Path,
        endpoint: &Endpoint,
        secret: &str,
        plan: &Path,
    ) -> io::Result<Child> {
        let mut command = Command::new(&self.claude);
        command
            .args([
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
            ])
            .args(["--verbose", "--no-session-persistence", "--max-turns", "4"])
            .arg("--settings")
            .arg(self.settings(plan))
            .current_dir(run_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        for (key, _) in std::env::vars_os() {
            if redirects_or_identifies(&key.to_string_lossy()) {
                command.env_remove(key);
            }
        }
        command
            .env("CLAUDE_CONFIG_DIR", home)
            .env("ANTHROPIC_BASE_URL", endpoint.base_url())
            .env("ANTHROPIC_API_KEY", secret)
            .env("CLAUDE_CODE_SESSION_NAME", &self.from)
            .env("ENABLE_TOOL_SEARCH", "false")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("NO_PROXY", "127.0.0.1");
        command.spawn()
    }
}

/// An inherited variable that could point the sender at another model or account, name
/// another session as its parent, or route its requests elsewhere.
fn redirects_or_identifies(key: &str) -> bool {
    key.starts_with("ANTHROPIC_")
        || key.starts_with("CLAUDE_CODE_")
        || key == "CLAUDECODE"
        || key == "CLAUDE_CONFIG_DIR"
        || key.to_ascii_lowercase().ends_with("_proxy")
}

/// `'…'`, with `'` written as `'\''`: one word for the shell Claude Code runs hooks in.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The private Claude home senders run in: `claude-peers/sender-home` under
/// `$XDG_RUNTIME_DIR`, else `$XDG_CACHE_HOME`, else `~/.cache`. Never the user's own
/// home: a sender there would appear in the user's registry and run the user's hooks.
#[must_use]
pub fn default_sender_home() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = var("XDG_RUNTIME_DIR")
        .filter(|dir| dir.is_dir())
        .or_else(|| var("XDG_CACHE_HOME"))
        .or_else(|| var("HOME").map(|home| home.join(".cache")))?;
    Some(base.join("claude-peers").join("sender-home"))
}

/// Creates the private home (0700, ours, not a link) with a `.claude.json` that lets a
/// headless Claude Code start without onboarding.
fn prepare_home(home: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(home)?;
    let meta = fs::symlink_metadata(home)?;
    if !meta.is_dir() || meta.uid() != rustix::process::getuid().as_raw() {
        return Err(io::Error::other(format!(
            "the sender home `{}` is not a directory of this user",
            home.display()
        )));
    }
    if meta.mode() & 0o777 != 0o700 {
        fs::set_permissions(home, fs::Permissions::from_mode(0o700))?;
    }
    let config = home.join(".claude.json");
    if !config.exists() {
        fs::write(config, br#"{"hasCompletedOnboarding":true}"#)?;
    }
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(home.join("runs"))
}

/// A per-run secret: 16 bytes of the kernel's randomness, in hex.
fn secret() -> io::Result<String> {
    let mut bytes = [0_u8; 16];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    }))
}

/// The scripted model of a one-shot send: the prompt carrying `token` gets the planned
/// `SendMessage`; the tool's result, and anything else, gets a final text.
fn script(token: String, input: Value) -> impl Fn(&Value) -> Reply + Send + Sync {
    move |request| {
        let last_user = request
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|messages| {
                messages
                    .iter()
                    .rev()
                    .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            });
        let blocks = last_user.and_then(|m| m.get("content"));
        let texts: Vec<&str> = match blocks {
            Some(Value::String(text)) => vec![text.as_str()],
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        };
        let has_result = matches!(blocks, Some(Value::Array(blocks)) if blocks.iter().any(|b| b.get("type").and_then(Value::as_str) == Some("tool_result")));
        if !has_result && texts.iter().any(|text| text.trim() == token) {
            Reply::ToolUse {
                id: TOOL_USE_ID.to_owned(),
                name: "SendMessage".to_owned(),
                input: input.clone(),
            }
        } else {
            Reply::Text("Done.".to_owned())
        }
    }
}

impl Relay for ClaudeRelay {
    fn send(&self, target: &Target, message: &str) -> Result<Confirmation, RelayFailure> {
        let fail = |what: String| RelayFailure::new(what);
        let home = self
            .home
            .clone()
            .or_else(default_sender_home)
            .ok_or_else(|| {
                fail("no sender home: set XDG_RUNTIME_DIR, XDG_CACHE_HOME or HOME".to_owned())
            })?;
        prepare_home(&home).map_err(|err| {
            fail(format!(
                "cannot prepare the sender home `{}`: {err}",
                home.display()
            ))
        })?;
        let run_dir = tempfile::Builder::new()
            .prefix("send-")
            .tempdir_in(home.join("runs"))
            .map_err(|err| {
                fail(format!(
                    "cannot create a run directory in `{}`: {err}",
                    home.display()
                ))
            })?;
        let to = target.socket.to_string_lossy().into_owned();
        let plan = Plan {
            home: target.home.clone(),
            session_id: target.session_id.clone(),
            pid: target.pid.get(),
            proc_start: target.proc_start.clone(),
            to: to.clone(),
            message: message.to_owned(),
        };
        let plan_path = run_dir.path().join("plan.json");
        plan.write(&plan_path)
            .map_err(|err| fail(format!("cannot write the plan: {err}")))?;
        let secret = secret().map_err(|err| fail(format!("cannot read /dev/urandom: {err}")))?;
        let token = format!("claude-peers send {}", &secret[..8]);
        let input = json!({"to": to, "message": message});
        let endpoint = Endpoint::start(&secret, Arc::new(script(token.clone(), input)))
            .map_err(|err| fail(format!("cannot start the scripted model endpoint: {err}")))?;
        let child = self
            .spawn(&home, run_dir.path(), &endpoint, &secret, &plan_path)
            .map_err(|err| {
                fail(format!(
                    "cannot start Claude Code `{}`: {err}",
                    self.claude.display()
                ))
            })?;
        let deadline = Instant::now() + self.timeout;
        let mut sender = Sender::new(child);
        let outcome = sender.send(&token, &plan_path, &to, deadline, self.receipt_window);
        sender.close(deadline);
        outcome.map_err(|failure| match failure {
            Failure::Refused(refusal) => RelayFailure::refused(refusal.kind, refusal.message),
            Failure::Failed(what) => fail(format!("{what}{}", sender.stderr_note())),
        })
    }
}

enum Failure {
    Refused(claude_peer_resolve::Refusal),
    Failed(String),
}

/// A running sender: its stdin, its parsed stdout, the end of its stderr; killed with
/// its process group and reaped if dropped before it exited.
struct Sender {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    stderr: Arc<std::sync::Mutex<Vec<u8>>>,
    /// Says when stderr reached its end, so a failure quotes all of it.
    stderr_done: Receiver<()>,
    reaped: bool,
}

impl Sender {
    fn new(mut child: Child) -> Self {
        let (tx, lines) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            let _ = thread::Builder::new()
                .name("sender-stdout".to_owned())
                .spawn(move || {
                    let mut reader = BufReader::new(stdout);
                    let mut line = Vec::new();
                    loop {
                        line.clear();
                        match reader
                            .by_ref()
                            .take(MAX_LINE_BYTES as u64)
                            .read_until(b'\n', &mut line)
                        {
                            Ok(0) | Err(_) => return,
                            Ok(_) if line.ends_with(b"\n") => {
                                if tx.send(Line::parse(&line)).is_err() {
                                    return;
                                }
                            }
                            // An overlong line: skip the rest of it.
                            Ok(_) => {
                                if reader.skip_until(b'\n').is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
        }
        let stderr = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stderr_tx, stderr_done) = mpsc::channel();
        if let Some(mut pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            let _ = thread::Builder::new()
                .name("sender-stderr".to_owned())
                .spawn(move || {
                    let mut buf = [0_u8; 4096];
                    while let Ok(n @ 1..) = pipe.read(&mut buf) {
                        let mut tail = tail
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        tail.extend_from_slice(&buf[..n]);
                        let over = tail.len().saturating_sub(crate::STDERR_TAIL_BYTES);
                        tail.drain(..over);
                    }
                    let _ = stderr_tx.send(());
                });
        }
        let stdin = child.stdin.take();
        Self {
            child,
            stdin,
            lines,
            stderr,
            stderr_done,
            reaped: false,
        }
    }

    /// Feeds the prompt, follows the stream to the tool result, then waits out the
    /// receipt window for a notice from `to`.
    fn send(
        &mut self,
        token: &str,
        plan: &Path,
        to: &str,
        deadline: Instant,
        window: Duration,
    ) -> Result<Confirmation, Failure> {
        let prompt = json!({"type": "user", "message": {"role": "user", "content": token}, "parent_tool_use_id": null, "session_id": ""});
        if let Some(stdin) = self.stdin.as_mut() {
            writeln!(stdin, "{prompt}")
                .and_then(|()| stdin.flush())
                .map_err(|err| {
                    Failure::Failed(format!(
                        "Claude Code did not take the send request on its stdin: {err}"
                    ))
                })?;
        }
        let recipient = format!("uds:{to}");
        let mut sent: Option<(Option<String>, Instant)> = None;
        loop {
            let until = match &sent {
                Some((_, at)) => (*at + window).min(deadline),
                None => deadline,
            };
            let line = match self
                .lines
                .recv_timeout(until.saturating_duration_since(Instant::now()))
            {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    if let Some((msg_id, _)) = sent.take() {
                        return Ok(confirmation(Outcome::Accepted, msg_id));
                    }
                    return Err(Failure::Failed(
                        "Claude Code did not settle the send within the timeout; it was killed"
                            .to_owned(),
                    ));
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.wait_exit(EXIT_GRACE);
                    return Err(Failure::Failed(format!(
                        "Claude Code ended before the send was settled ({status})"
                    )));
                }
            };
            match line {
                Line::Init {
                    version,
                    send_message,
                    messaging_socket,
                } if !send_message || messaging_socket.is_none() => {
                    let version = version.unwrap_or_else(|| "of unknown version".to_owned());
                    let lacks = if send_message {
                        "no messaging socket"
                    } else {
                        "no SendMessage tool"
                    };
                    return Err(Failure::Failed(format!(
                        "this Claude Code ({version}) cannot send cross-session messages: it reports {lacks}"
                    )));
                }
                Line::ToolResult {
                    tool_use_id,
                    success,
                    msg_id,
                    text,
                } if tool_use_id == TOOL_USE_ID => {
                    if !success {
                        if let Some(refusal) = hook::read_refusal(plan) {
                            return Err(Failure::Refused(refusal));
                        }
                        return Err(Failure::Failed(format!(
                            "Claude Code's SendMessage failed: {text}"
                        )));
                    }
                    sent = Some((msg_id, Instant::now()));
                }
                Line::Receipt(receipt) if receipt.recipient == recipient => {
                    return settle(receipt.outcome, sent.and_then(|(id, _)| id));
                }
                Line::Result if sent.is_none() => {
                    return Err(Failure::Failed(
                        "Claude Code ended its turn without making the planned SendMessage"
                            .to_owned(),
                    ));
                }
                _ => {}
            }
        }
    }

    /// Closes stdin (a clean exit removes the sender's record, key and socket), waits a
    /// little but never past `deadline`, and kills what is left.
    fn close(&mut self, deadline: Instant) {
        self.stdin.take();
        let grace = deadline
            .saturating_duration_since(Instant::now())
            .min(EXIT_GRACE);
        self.wait_exit(grace);
    }

    /// Waits up to `grace` for the exit, then kills the process group and reaps.
    fn wait_exit(&mut self, grace: Duration) -> String {
        let deadline = Instant::now() + grace;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.reaped = true;
                    return status.to_string();
                }
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(5)),
                _ => {
                    self.kill();
                    return "killed".to_owned();
                }
            }
        }
    }

    /// Kills the whole process group, then reaps the sender; only while it is unreaped,
    /// so the group id cannot have been reused.
    fn kill(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(pgid) = RawPid::from_raw(self.child.id().cast_signed()) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
        let _ = self.child.kill();
        if self.child.wait().is_ok() {
            self.reaped = true;
        }
    }

    fn stderr_note(&self) -> String {
        // Something the sender left running may hold the pipe: wait only briefly.
        let _ = self.stderr_done.recv_timeout(Duration::from_millis(500));
        let tail = self
            .stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let text = String::from_utf8_lossy(&tail);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!("; its stderr: {text}")
        }
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What a receiver's notice about the one message sent means for the send.
fn settle(outcome: Outcome, msg_id: Option<String>) -> Result<Confirmation, Failure> {
    let id = msg_id.as_deref().unwrap_or("unknown");
    match outcome {
        Outcome::Refused | Outcome::Denied => Err(Failure::Refused(claude_peer_resolve::Refusal {
            kind: claude_peer_resolve::RefusalKind::InboundRefused,
            message: format!(
                "the receiving session {} the message (msg_id {id}); it was not delivered",
                outcome.as_str()
            ),
        })),
        Outcome::Expired => Err(Failure::Failed(format!(
            "the message (msg_id {id}) expired unapproved at the receiving session"
        ))),
        outcome => Ok(confirmation(outcome, msg_id)),
    }
}

fn confirmation(outcome: Outcome, msg_id: Option<String>) -> Confirmation {
    Confirmation {
        detail: None,
        receipt: Some(outcome),
        msg_id,
    }
}
