//! Real Claude Code in tests: the pinned binary (installed by `cargo xtask test`),
//! interactive receivers in tmux whose model is a local fake that answers with text.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_endpoint::{Endpoint, Reply, Script};
use serde_json::{Value, json};

/// The receivers' API key, approved in their `.claude.json` (which keeps the last 20
/// characters of a key, so it is shorter than that).
const RECEIVER_KEY: &str = "sk-ant-peers-test";

/// The pinned Claude Code that `cargo xtask test` installs; a test run without it fails
/// with the reason.
pub(crate) fn claude() -> PathBuf {
    let path = std::env::var_os("CLAUDE_PEERS_TEST_CLAUDE").map(PathBuf::from).expect(
        "CLAUDE_PEERS_TEST_CLAUDE is not set: run the tests with `cargo xtask test`, which installs the pinned Claude Code and sets it",
    );
    assert!(path.is_file(), "no Claude Code at {}", path.display());
    path
}

/// A Claude Code too old to message other sessions (2.1.197: a teammate-only
/// `SendMessage`, no socket), which `cargo xtask test` installs beside the pinned one.
pub(crate) fn old_claude() -> PathBuf {
    let path = std::env::var_os("CLAUDE_PEERS_TEST_CLAUDE_OLD").map(PathBuf::from).expect(
        "CLAUDE_PEERS_TEST_CLAUDE_OLD is not set: run the tests with `cargo xtask test`, which installs it",
    );
    assert!(path.is_file(), "no Claude Code at {}", path.display());
    path
}

/// A `claude` in `dir` that notes each start in `dir/starts`, then runs the pinned Claude
/// Code: how many senders a command started.
pub(crate) fn counting_claude(dir: &Path) -> (PathBuf, PathBuf) {
    let starts = dir.join("starts");
    let wrapper = claude_peer_testkit::process::shell_script(
        dir.join("claude"),
        &format!(
            "echo start >> '{}'\nexec '{}' \"$@\"",
            starts.display(),
            claude().display()
        ),
    )
    .unwrap();
    (wrapper, starts)
}

/// Polls `check` every 50 ms until it gives a value or `limit` passes.
pub(crate) fn wait_for<T>(limit: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if Instant::now() > deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

/// One tmux server per test process, so receivers never meet the user's own sessions.
pub(crate) fn tmux() -> Command {
    let mut command = Command::new("tmux");
    command.args(["-L", &format!("claude-peers-test-{}", std::process::id())]);
    command
}

/// Makes `home` ready for receivers in its folders `cwds` (each trusted, created), with
/// `settings` as its user settings.
pub(crate) fn prepare_home(home: &Path, cwds: &[&str], settings: &Value) {
    let mut projects = serde_json::Map::new();
    for cwd in cwds {
        let cwd = home.join(cwd);
        fs::create_dir_all(&cwd).unwrap();
        projects.insert(
            cwd.to_str().unwrap().to_owned(),
            json!({"hasTrustDialogAccepted": true}),
        );
    }
    let config = json!({
        "hasCompletedOnboarding": true, "theme": "dark", "bypassPermissionsModeAccepted": true,
        "customApiKeyResponses": {"approved": [RECEIVER_KEY], "rejected": []},
        "projects": projects,
    });
    fs::write(home.join(".claude.json"), config.to_string()).unwrap();
    fs::write(home.join("settings.json"), settings.to_string()).unwrap();
}

/// How a replying receiver runs: auto mode would ask a server to check the reply, so the
/// receiver allows the tool.
pub(crate) const REPLYING_ARGS: [&str; 4] = [
    "--permission-mode",
    "default",
    "--allowedTools",
    "SendMessage",
];

/// A model that answers any message from another session with `reply`, sent to the
/// address in its envelope.
pub(crate) fn replying_script(reply: String) -> Arc<dyn Script> {
    Arc::new(move |request: &Value| {
        let text = last_user_message(request);
        if text.contains("tool_result") {
            return Reply::Text("Replied.".to_owned());
        }
        match text
            .split("from=\\\"")
            .nth(1)
            .and_then(|rest| rest.split("\\\"").next())
        {
            Some(from) => Reply::ToolUse {
                id: "toolu_reply".to_owned(),
                name: "SendMessage".to_owned(),
                input: json!({"to": from, "message": reply}),
            },
            None => Reply::Text("Noted.".to_owned()),
        }
    })
}

/// The content of the last user message of a Messages API request, as JSON text.
pub(crate) fn last_user_message(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()["content"]
        .to_string()
}

/// A live interactive Claude Code in tmux, in its own temporary Claude home; its tmux
/// session is killed (and its process waited for) when dropped.
pub(crate) struct Receiver {
    /// Its Claude home, which other receivers may share.
    pub(crate) home: Arc<tempfile::TempDir>,
    pub(crate) cwd: PathBuf,
    pub(crate) pid: u32,
    pub(crate) session_id: String,
    /// Its messaging socket.
    pub(crate) socket: String,
    tmux_name: String,
    _model: Endpoint,
}

impl Receiver {
    /// Starts a receiver whose user settings set `crossSessionInbound` to `policy`
    /// (unset for `None`), with `args` added to its command line.
    pub(crate) fn start(policy: Option<&str>, args: &[&str]) -> Self {
        Self::start_with(
            policy,
            args,
            Arc::new(|_: &Value| Reply::Text("Noted.".to_owned())),
        )
    }

    /// Starts a receiver whose model answers with `script`.
    pub(crate) fn start_with(policy: Option<&str>, args: &[&str], script: Arc<dyn Script>) -> Self {
        let settings = policy.map_or_else(|| json!({}), |p| json!({"crossSessionInbound": p}));
        Self::spawn(&settings, args, &[], script)
    }

    /// A receiver that accepts messages and whose model answers any message from another
    /// session with `reply`, sent to the address in its envelope.
    pub(crate) fn replying(reply: impl Into<String>) -> Self {
        Self::start_with(
            Some("accept"),
            &REPLYING_ARGS,
            replying_script(reply.into()),
        )
    }

    /// A receiver that accepts messages and whose every model turn takes `turn`.
    pub(crate) fn slow(turn: Duration) -> Self {
        let slow = Arc::new(move |_: &Value| {
            thread::sleep(turn);
            Reply::Text("Done thinking.".to_owned())
        });
        Self::start_with(Some("accept"), &[], slow)
    }

    /// Starts a receiver that bypasses permission prompts (allowed as root with
    /// `IS_SANDBOX=1`) with no policy set, so messages from a sender that does not are
    /// held in a dialog; `settings` adds to its user settings (`dialogExpiry`).
    pub(crate) fn start_bypassing(settings: &Value) -> Self {
        Self::spawn(
            settings,
            &["--permission-mode", "bypassPermissions"],
            &["IS_SANDBOX=1"],
            Arc::new(|_: &Value| Reply::Text("Noted.".to_owned())),
        )
    }

    fn spawn(settings: &Value, args: &[&str], env: &[&str], script: Arc<dyn Script>) -> Self {
        let home = Arc::new(tempfile::tempdir().unwrap());
        prepare_home(home.path(), &["project"], settings);
        Self::launch(&home, "project", args, env, script)
    }

    /// Starts a receiver in `home` (made ready by [`prepare_home`] for `cwd`), in its
    /// folder `cwd`, with `args` added to its command line.
    pub(crate) fn start_in(home: &Arc<tempfile::TempDir>, cwd: &str, args: &[&str]) -> Self {
        let script = Arc::new(|_: &Value| Reply::Text("Noted.".to_owned()));
        Self::launch(home, cwd, args, &[], script)
    }

    pub(crate) fn launch(
        home: &Arc<tempfile::TempDir>,
        cwd: &str,
        args: &[&str],
        env: &[&str],
        script: Arc<dyn Script>,
    ) -> Self {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let home = Arc::clone(home);
        let cwd = home.path().join(cwd);
        let model = Endpoint::start(RECEIVER_KEY, script).unwrap();
        let tmux_name = format!("r{}", COUNT.fetch_add(1, Ordering::Relaxed));
        let mut command = vec![
            "env".to_owned(),
            "-i".to_owned(),
            format!("PATH={}", std::env::var("PATH").unwrap_or_default()),
            format!("HOME={}", home.path().display()),
            "TERM=xterm-256color".to_owned(),
            format!("CLAUDE_CONFIG_DIR={}", home.path().display()),
            format!("ANTHROPIC_API_KEY={RECEIVER_KEY}"),
            format!("ANTHROPIC_BASE_URL={}", model.base_url()),
            "DISABLE_AUTOUPDATER=1".to_owned(),
            "DISABLE_TELEMETRY=1".to_owned(),
            "DISABLE_ERROR_REPORTING=1".to_owned(),
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1".to_owned(),
            format!("CLAUDE_CODE_SESSION_NAME=receiver-{tmux_name}"),
        ];
        command.extend(env.iter().map(|&e| e.to_owned()));
        command.push(claude().to_str().unwrap().to_owned());
        command.extend(args.iter().map(|&a| a.to_owned()));
        let status = tmux()
            .args([
                "new-session",
                "-d",
                "-x",
                "200",
                "-y",
                "50",
                "-s",
                &tmux_name,
                "-c",
            ])
            .arg(&cwd)
            .args(&command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        // `env` execs Claude Code, so the pane's process is the session's.
        let pane = tmux()
            .args(["display-message", "-p", "-t", &tmux_name, "#{pane_pid}"])
            .output()
            .unwrap();
        let pid = String::from_utf8_lossy(&pane.stdout).trim().to_owned();
        let record_path = home.path().join("sessions").join(format!("{pid}.json"));
        let record = wait_for(Duration::from_secs(30), || {
            let record: Value = serde_json::from_slice(&fs::read(&record_path).ok()?).ok()?;
            let socket = record.get("messagingSocketPath")?.as_str()?;
            (record.get("status")?.as_str()? == "idle" && Path::new(socket).exists())
                .then_some(record)
        });
        let Some(record) = record else {
            let screen = tmux()
                .args(["capture-pane", "-p", "-t", &tmux_name])
                .output();
            let screen = screen.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            let _ = tmux().args(["kill-session", "-t", &tmux_name]).status();
            panic!(
                "the receiver did not become idle with a socket within 30 s; its screen: {screen:?}"
            );
        };
        Self {
            cwd,
            pid: u32::try_from(record["pid"].as_u64().unwrap()).unwrap(),
            session_id: record["sessionId"].as_str().unwrap().to_owned(),
            socket: record["messagingSocketPath"].as_str().unwrap().to_owned(),
            home,
            tmux_name,
            _model: model,
        }
    }

    /// What its terminal shows now, for failure messages.
    pub(crate) fn screen(&self) -> String {
        let out = tmux()
            .args(["capture-pane", "-p", "-t", &self.tmux_name])
            .output();
        out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    }

    /// Types `keys` into its terminal (tmux key names, e.g. `Enter`).
    pub(crate) fn keys(&self, keys: &str) {
        let status = tmux()
            .args(["send-keys", "-t", &self.tmux_name, keys])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Where Claude Code writes the transcript of `session_id`, as it names it today.
    pub(crate) fn transcript_path(&self, session_id: &str) -> PathBuf {
        let slug: String = self
            .cwd
            .to_str()
            .unwrap()
            .chars()
            .map(|c| if c == '/' || c == '.' { '-' } else { c })
            .collect();
        self.home
            .path()
            .join("projects")
            .join(slug)
            .join(format!("{session_id}.jsonl"))
    }

    /// Every line of the transcript of `session_id`, parsed.
    pub(crate) fn transcript_of(&self, session_id: &str) -> Vec<Value> {
        fs::read_to_string(self.transcript_path(session_id))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The session id its record names now (a `/clear` gives it a new one).
    pub(crate) fn current_session_id(&self) -> Option<String> {
        let record = self
            .home
            .path()
            .join("sessions")
            .join(format!("{}.json", self.pid));
        let record: Value = serde_json::from_slice(&fs::read(record).ok()?).ok()?;
        record["sessionId"].as_str().map(str::to_owned)
    }

    /// Types a prompt and waits until its record says it is busy with it.
    pub(crate) fn make_busy(&self) {
        self.keys("think it over");
        self.keys("Enter");
        let record = self
            .home
            .path()
            .join("sessions")
            .join(format!("{}.json", self.pid));
        let busy = wait_for(Duration::from_secs(30), || {
            let record: Value = serde_json::from_slice(&fs::read(&record).ok()?).ok()?;
            (record["status"] == "busy").then_some(())
        });
        assert!(
            busy.is_some(),
            "the receiver did not become busy: {}",
            self.screen()
        );
    }

    /// Every line of the receiver's transcript, parsed.
    pub(crate) fn transcript(&self) -> Vec<Value> {
        fs::read_to_string(self.transcript_path(&self.session_id))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// How many times its Claude was given a message whose text is `text`.
    pub(crate) fn times_read(&self, text: &str) -> usize {
        self.transcript()
            .iter()
            .filter(|entry| entry.pointer("/origin/body").and_then(Value::as_str) == Some(text))
            .count()
    }

    /// The transcript entry that gave the message `msg_id` to the receiver's Claude.
    pub(crate) fn delivered(&self, msg_id: &str) -> Option<Value> {
        self.delivered_in(&self.session_id, msg_id)
    }

    /// The same in the transcript of `session_id`.
    pub(crate) fn delivered_in(&self, session_id: &str, msg_id: &str) -> Option<Value> {
        self.transcript_of(session_id)
            .into_iter()
            .find(|entry| entry.pointer("/origin/msg_id").and_then(Value::as_str) == Some(msg_id))
    }

    /// Runs `claude-peers --json send <this session> --message <message>` with `args`
    /// through the pinned Claude Code, the sender's private home under `cache` (as
    /// `XDG_CACHE_HOME`). Sender and receiver share the default
    /// runtime directory: a receiver sends its notices only to a sender whose socket is
    /// in its own socket directory. The inherited environment points everywhere else
    /// (another model, a parent session, a proxy): the sender must replace all of it.
    pub(crate) fn send(&self, cache: &Path, message: &str, args: &[&str]) -> (i32, Value, String) {
        let output = self
            .send_command(
                Command::new(env!("CARGO_BIN_EXE_claude-peers")),
                cache,
                message,
            )
            .arg("--managed-settings")
            .arg(cache.join("no-managed-settings.json"))
            .args(args)
            .output()
            .unwrap();
        parsed(&output)
    }

    /// The command [`Receiver::send`] runs: `command` (`claude-peers`, or what runs it)
    /// with the arguments and environment of the send, but for `--managed-settings`.
    pub(crate) fn send_command(
        &self,
        mut command: Command,
        cache: &Path,
        message: &str,
    ) -> Command {
        command
            .arg("--home")
            .arg(self.home.path())
            .args(["--json", "send", &self.session_id])
            .arg("--claude")
            .arg(claude())
            .args(["--message", message])
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", cache)
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
            .env("ANTHROPIC_API_KEY", "sk-ant-inherited")
            .env("CLAUDECODE", "1")
            .env("CLAUDE_CODE_MESSAGING_SOCKET", "/nonexistent/parent.sock")
            .env("CLAUDE_CONFIG_DIR", "/nonexistent/home")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .stdin(Stdio::null());
        command
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = tmux()
            .args(["kill-session", "-t", &self.tmux_name])
            .status();
        let pid = self.pid;
        wait_for(Duration::from_secs(10), || {
            (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
        });
    }
}

/// Processes that keep every core busy until dropped.
pub(crate) struct Burners(Vec<Child>);

impl Burners {
    pub(crate) fn start(n: usize) -> Self {
        Self(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Writes `{"crossSessionInbound": policy}` as the user settings of `home`.
pub(crate) fn set_policy(home: &Path, policy: &str) {
    fs::write(
        home.join("settings.json"),
        json!({"crossSessionInbound": policy}).to_string(),
    )
    .unwrap();
}

/// Exit code, stdout as JSON (`null` when empty) and stderr.
pub(crate) fn parsed(output: &Output) -> (i32, Value, String) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let json = if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}): {stdout}"))
    };
    (
        output.status.code().unwrap_or(-1),
        json,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
