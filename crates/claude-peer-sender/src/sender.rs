//! A headless Claude Code that sends with its own `SendMessage`: its private home, its
//! scripted model, its hooks, its process, and the lines it prints.
//!
//! One [`Sender`] serves one send ([`crate::ClaudeRelay`]) or many
//! ([`crate::Mailbox`]). Each send is a *job*: a prompt carrying the job's token, the
//! planned tool calls the scripted model answers it with, and a plan per call that the
//! `pre-tool-use` hook checks at the moment of the call.

use std::ffi::{OsStr, OsString};
use std::fmt::Write as _;
use std::fs::{self, DirBuilder};
use std::io::{self, Read, Write};
use std::ops::ControlFlow;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender as Channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::endpoint::{Endpoint, Reply};
use crate::hook::Plan;
use crate::stream::Line;
use claude_peer_deliver::STDERR_TAIL_BYTES;
use claude_peer_deliver::bounded::{self, Tail};
use claude_peer_deliver::child::{ChildGroup, Ended};

/// The sender's default name, shown to the receiver: `claude-peers`.
pub const DEFAULT_SENDER_NAME: &str = "claude-peers";
/// The longest stdout line of the sender that is parsed: 8 MiB (a 64 KiB message appears
/// several times, escaped, in one line).
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// How long a sender whose stdin closed may take to exit cleanly before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Which Claude Code sends, as whom, with which hook program, from which home.
#[derive(Debug, Clone)]
pub(crate) struct SenderOptions {
    pub(crate) claude: PathBuf,
    pub(crate) hook: Vec<OsString>,
    pub(crate) from: String,
    pub(crate) home: Option<PathBuf>,
}

impl SenderOptions {
    pub(crate) fn new(claude: PathBuf, hook: Vec<OsString>) -> Self {
        Self {
            claude,
            hook,
            from: DEFAULT_SENDER_NAME.to_owned(),
            home: None,
        }
    }
}

/// One planned `SendMessage` call: its tool-use id and input.
#[derive(Debug, Clone)]
struct Call {
    id: String,
    input: Value,
}

/// A prompt's token and the calls that answer it, in order.
#[derive(Debug)]
struct Job {
    token: String,
    calls: Vec<Call>,
    issued: usize,
}

/// The scripted model of a sender: a prompt carrying a job's token gets the job's next
/// call, each result the next one, and then (or for anything else) a final text.
#[derive(Debug, Default)]
struct Jobs(Mutex<Vec<Job>>);

impl Jobs {
    fn reply(&self, request: &Value) -> Reply {
        let texts = user_texts(request);
        let mut jobs = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let next = jobs.iter_mut().find(|job| {
            job.issued < job.calls.len() && texts.iter().any(|t| t.contains(&job.token))
        });
        match next {
            Some(job) => {
                let call = job.calls[job.issued].clone();
                job.issued += 1;
                Reply::ToolUse {
                    id: call.id,
                    name: "SendMessage".to_owned(),
                    input: call.input,
                }
            }
            None => Reply::Text("Done.".to_owned()),
        }
    }
}

/// The text of every user message of a request (its prompts, not tool results).
fn user_texts(request: &Value) -> Vec<&str> {
    let messages = request.get("messages").and_then(Value::as_array);
    let users = messages
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"));
    users
        .flat_map(|m| match m.get("content") {
            Some(Value::String(text)) => vec![text.as_str()],
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// The tool-use ids of one job: its send, and its idle subscription when asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobIds {
    pub(crate) send: String,
    pub(crate) subscribe: Option<String>,
}

/// A running sender (its [`Group`] is killed and reaped if dropped before it exited);
/// its run directory (the plans) goes with it.
pub(crate) struct Sender {
    group: ChildGroup,
    stdin: Option<ChildStdin>,
    pub(crate) lines: Receiver<Line>,
    /// Lets others (a mailbox's callers) wake whoever waits on `lines`.
    pub(crate) wake: Channel<Line>,
    stderr: Arc<Mutex<Tail>>,
    stderr_done: Receiver<()>,
    jobs: Arc<Jobs>,
    next_job: u64,
    secret: String,
    run_dir: tempfile::TempDir,
    _endpoint: Endpoint,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("pid", &self.group.id())
            .finish_non_exhaustive()
    }
}

impl Sender {
    /// Prepares the private home, starts the scripted model and the sender.
    pub(crate) fn start(options: &SenderOptions) -> Result<Self, String> {
        let home = options
            .home
            .clone()
            .or_else(default_sender_home)
            .ok_or("no sender home: set XDG_RUNTIME_DIR, XDG_CACHE_HOME or HOME")?;
        prepare_home(&home)
            .map_err(|err| format!("cannot prepare the sender home `{}`: {err}", home.display()))?;
        let run_dir = tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(home.join("runs"))
            .map_err(|err| {
                format!(
                    "cannot create a run directory in `{}`: {err}",
                    home.display()
                )
            })?;
        let secret = secret().map_err(|err| format!("cannot read /dev/urandom: {err}"))?;
        let jobs = Arc::new(Jobs::default());
        let script = Arc::clone(&jobs);
        let endpoint = Endpoint::start(
            &secret,
            Arc::new(move |request: &Value| script.reply(request)),
        )
        .map_err(|err| format!("cannot start the scripted model endpoint: {err}"))?;
        let mut child =
            spawn(options, &home, run_dir.path(), &endpoint, &secret).map_err(|err| {
                format!(
                    "cannot start Claude Code `{}`: {err}",
                    options.claude.display()
                )
            })?;
        let (wake, lines) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            let tx = wake.clone();
            let _ = thread::Builder::new()
                .name("sender-stdout".to_owned())
                .spawn(move || read_lines(stdout, &tx));
        }
        let stderr = Arc::new(Mutex::new(Tail::new(STDERR_TAIL_BYTES)));
        let (stderr_tx, stderr_done) = mpsc::channel();
        if let Some(pipe) = child.stderr.take() {
            let tail = Arc::clone(&stderr);
            let _ = thread::Builder::new()
                .name("sender-stderr".to_owned())
                .spawn(move || {
                    keep_tail(pipe, &tail);
                    let _ = stderr_tx.send(());
                });
        }
        let stdin = child.stdin.take();
        Ok(Self {
            group: ChildGroup::new(child),
            stdin,
            lines,
            wake,
            stderr,
            stderr_done,
            jobs,
            next_job: 0,
            secret,
            run_dir,
            _endpoint: endpoint,
        })
    }

    /// The directory the plans are in; the `pre-tool-use` hook reads it.
    pub(crate) fn plans(&self) -> &Path {
        self.run_dir.path()
    }

    /// Plans one send (and an idle subscription to the same target when `subscribe`),
    /// writes the plans for the hook, and asks the sender with the job's prompt.
    pub(crate) fn request(&mut self, plan: &Plan, subscribe: bool) -> Result<JobIds, String> {
        let n = self.next_job;
        self.next_job += 1;
        let ids = JobIds {
            send: format!("toolu_claude_peers_{n}"),
            subscribe: subscribe.then(|| format!("toolu_claude_peers_{n}_idle")),
        };
        let mut calls = vec![(ids.send.clone(), plan.clone())];
        if let Some(id) = &ids.subscribe {
            let mut idle = plan.clone();
            idle.message = String::new();
            idle.notify_when_idle = true;
            calls.push((id.clone(), idle));
        }
        for (id, plan) in &calls {
            plan.write(&self.run_dir.path().join(format!("{id}.json")))
                .map_err(|err| format!("cannot write the plan of the send: {err}"))?;
        }
        let token = format!("claude-peers send {}-{n}", &self.secret[..8]);
        let calls = calls
            .into_iter()
            .map(|(id, plan)| Call {
                id,
                input: plan.input(),
            })
            .collect();
        self.jobs
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Job {
                token: token.clone(),
                calls,
                issued: 0,
            });
        let prompt = json!({"type": "user", "message": {"role": "user", "content": token}, "parent_tool_use_id": null, "session_id": ""});
        let stdin = self.stdin.as_mut().ok_or("the sender's stdin is closed")?;
        writeln!(stdin, "{prompt}")
            .and_then(|()| stdin.flush())
            .map_err(|err| {
                format!("Claude Code did not take the send request on its stdin: {err}")
            })?;
        Ok(ids)
    }

    /// Closes stdin (a clean exit removes the sender's record, key and socket), waits a
    /// little but never past `deadline`, and kills what is left.
    pub(crate) fn close(&mut self, deadline: Instant) {
        self.stdin.take();
        let grace = deadline
            .saturating_duration_since(Instant::now())
            .min(EXIT_GRACE);
        self.wait_exit(grace);
    }

    /// Waits up to `grace` for the exit, then kills the process group and reaps.
    pub(crate) fn wait_exit(&mut self, grace: Duration) -> Ended {
        self.group.wait_then_kill(grace)
    }

    /// Kills the whole process group, then reaps the sender.
    pub(crate) fn kill(&mut self) {
        self.group.kill_and_reap();
    }

    /// The sender's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.group.id()
    }

    /// `; its stderr: …` for a failure message, or nothing.
    pub(crate) fn stderr_note(&self) -> String {
        // Something the sender left running may hold the pipe: wait only briefly.
        let _ = self.stderr_done.recv_timeout(Duration::from_millis(500));
        self.stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stderr_note()
    }
}

/// Reads stdout lines, parsed; an overlong line is skipped. Ends with [`Line::Closed`].
fn read_lines(stdout: impl Read, tx: &Channel<Line>) {
    let _ = bounded::read_lines(stdout, MAX_LINE_BYTES, |line| match line {
        bounded::Line::Whole(line) => match tx.send(Line::parse(line)) {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        },
        bounded::Line::Overlong => ControlFlow::Continue(()),
    });
    let _ = tx.send(Line::Closed);
}

/// Keeps the end of the sender's stderr, to quote in a failure.
fn keep_tail(mut pipe: impl Read, tail: &Mutex<Tail>) {
    let mut buf = [0_u8; 4096];
    while let Ok(n @ 1..) = pipe.read(&mut buf) {
        tail.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(&buf[..n]);
    }
}

fn spawn(
    options: &SenderOptions,
    home: &Path,
    plans: &Path,
    endpoint: &Endpoint,
    secret: &str,
) -> io::Result<Child> {
    let mut command = Command::new(&options.claude);
    command
        .args([
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
        ])
        .args(["--verbose", "--no-session-persistence"])
        .arg("--settings")
        .arg(hooks(&options.hook, plans))
        .current_dir(plans)
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
        .env("CLAUDE_CODE_SESSION_NAME", &options.from)
        .env("ENABLE_TOOL_SEARCH", "false")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("NO_PROXY", "127.0.0.1");
    command.spawn()
}

/// The `--settings` layer that installs the hooks, run as `hook… pre-tool-use PLANS`
/// and `hook… user-prompt-submit`.
fn hooks(hook: &[OsString], plans: &Path) -> String {
    let command = |mode: &[&OsStr]| {
        let words: Vec<String> = hook
            .iter()
            .map(OsString::as_os_str)
            .chain(mode.iter().copied())
            .map(|word| shell_quote(&word.to_string_lossy()))
            .collect();
        json!([{"matcher": "*", "hooks": [{"type": "command", "command": words.join(" ")}]}])
    };
    json!({
        "hooks": {
            "PreToolUse": command(&[OsStr::new("pre-tool-use"), plans.as_os_str()]),
            "UserPromptSubmit": command(&[OsStr::new("user-prompt-submit")]),
        }
    })
    .to_string()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job(token: &str, ids: &[&str]) -> Job {
        Job {
            token: token.to_owned(),
            calls: ids
                .iter()
                .map(|id| Call {
                    id: (*id).to_owned(),
                    input: json!({"to": "/s.sock", "message": id}),
                })
                .collect(),
            issued: 0,
        }
    }

    fn request(prompts: &[&str], result: bool) -> Value {
        let mut messages: Vec<Value> = prompts
            .iter()
            .map(|p| json!({"role": "user", "content": [{"type": "text", "text": p}]}))
            .collect();
        if result {
            messages.push(json!({"role": "assistant", "content": []}));
            messages.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "claude-peers send t2"}]}));
        }
        json!({"messages": messages})
    }

    fn called(reply: &Reply) -> Option<&str> {
        match reply {
            Reply::ToolUse { id, .. } => Some(id),
            Reply::Text(_) => None,
        }
    }

    #[test]
    fn each_planned_call_is_answered_once_in_order_and_only_for_its_prompt() {
        let jobs = Jobs::default();
        jobs.0
            .lock()
            .unwrap()
            .push(job("claude-peers send t1", &["a", "a_idle"]));
        jobs.0
            .lock()
            .unwrap()
            .push(job("claude-peers send t2", &["b"]));
        assert_eq!(called(&jobs.reply(&request(&["hello"], false))), None);
        assert_eq!(
            called(&jobs.reply(&request(&["claude-peers send t1"], false))),
            Some("a")
        );
        assert_eq!(
            called(&jobs.reply(&request(&["claude-peers send t1"], true))),
            Some("a_idle")
        );
        assert_eq!(
            called(&jobs.reply(&request(&["claude-peers send t1"], true))),
            None
        );
        // Prompts Claude Code merged into one turn are each answered, and a token seen
        // only inside a tool result is not a prompt.
        assert_eq!(
            called(&jobs.reply(&request(
                &["claude-peers send t1\nclaude-peers send t2"],
                false
            ))),
            Some("b")
        );
    }

    #[test]
    fn hook_commands_quote_every_word() {
        let settings: Value = serde_json::from_str(&hooks(
            &[
                OsString::from("/opt/my tools/claude-peers"),
                OsString::from("hook"),
            ],
            Path::new("/run/it's here"),
        ))
        .unwrap();
        assert_eq!(
            settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"],
            r"'/opt/my tools/claude-peers' 'hook' 'pre-tool-use' '/run/it'\''s here'"
        );
    }
}
