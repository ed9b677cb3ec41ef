//! A headless Claude Code that sends with its own `SendMessage`: its private home, its
//! scripted model, its hooks, its process, and the lines it prints.
//!
//! One [`HeadlessClaude`] serves one send ([`crate::ClaudeRelay`]) or many
//! ([`crate::Mailbox`]). Each send is a *job*: a prompt carrying the job's token, the
//! planned tool calls the scripted model answers it with, and a plan per call that the
//! `pre-tool-use` hook checks at the moment of the call.

mod home;
mod script;
mod spawn;

use std::ffi::OsString;
use std::io::{Read, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::sync::mpsc::{self, Receiver, Sender as Channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_deliver::Recipient;
use claude_peer_deliver::STDERR_TAIL_BYTES;
use claude_peer_deliver::child::{ChildGroup, Ended};
use claude_peer_probe::stream::{self, Tail};
use claude_peer_settings::ManagedSettings;
use serde_json::{Value, json};

pub use home::default_sender_home;

use crate::Error;
use crate::channel::Line;
use crate::stream::Printed;
use claude_peer_endpoint::Endpoint;
use claude_peer_guard::protocol::Token;
use claude_peer_guard::{Call as PlannedCall, Plan};
use script::{Call, Jobs};

/// The sender's default name, shown to the receiver: `claude-peers`.
pub const DEFAULT_SENDER_NAME: &str = "claude-peers";
/// The longest stdout line of the sender that is parsed: 8 MiB (a 64 KiB message appears
/// several times, escaped, in one line).
const MAX_LINE_BYTES: usize = 8 * 1024 * 1024;
/// How long a sender whose stdin closed may take to exit cleanly before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(5);

/// Which Claude Code sends, as whom, with which hook program, from which home, under
/// which managed settings.
#[derive(Debug, Clone)]
pub(crate) struct HeadlessOptions {
    pub(crate) claude: PathBuf,
    pub(crate) hook: Vec<OsString>,
    pub(crate) from: String,
    pub(crate) home: Option<PathBuf>,
    pub(crate) managed_settings: PathBuf,
}

impl HeadlessOptions {
    pub(crate) fn new(claude: PathBuf, hook: Vec<OsString>) -> Self {
        Self {
            claude,
            hook,
            from: DEFAULT_SENDER_NAME.to_owned(),
            home: None,
            managed_settings: PathBuf::from(claude_peer_settings::MANAGED_SETTINGS_PATH),
        }
    }

    /// Whether a sender may start: its name can be shown, and no managed setting keeps
    /// its hooks from running.
    pub(crate) fn check(&self) -> Result<(), Error> {
        crate::check_sender_name(&self.from)?;
        match ManagedSettings::read(&self.managed_settings)
            .hooks_off()
            .into_iter()
            .next()
        {
            Some(off) => Err(Error::HooksOff {
                path: off.path,
                setting: off.setting,
            }),
            None => Ok(()),
        }
    }
}

/// Whether a send also subscribes to the receiver's next idle moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Idle {
    /// Only the message.
    #[default]
    Ignore,
    /// Also a `notify_when_idle` subscription: the receiver's next idle moment is told.
    Notify,
}

/// The tool-use ids of one job: the canary that proves the guard runs, its send, and its
/// idle subscription when asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobIds {
    pub(crate) canary: String,
    pub(crate) send: String,
    pub(crate) subscribe: Option<String>,
}

/// A running sender (its [`ChildGroup`] is killed and reaped if dropped before it exited);
/// its run directory (the plans) goes with it.
pub(crate) struct HeadlessClaude {
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
    /// Its own messaging socket, as its `init` line names it: the address receivers see.
    socket: Option<String>,
    run_dir: tempfile::TempDir,
    _endpoint: Endpoint,
}

impl std::fmt::Debug for HeadlessClaude {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadlessClaude")
            .field("pid", &self.group.id())
            .finish_non_exhaustive()
    }
}

impl HeadlessClaude {
    /// Prepares the private home, starts the scripted model and the sender.
    pub(crate) fn start(options: &HeadlessOptions) -> Result<Self, Error> {
        options.check()?;
        let home = options
            .home
            .clone()
            .or_else(default_sender_home)
            .ok_or(Error::NoHome)?;
        let home = home::prepare_home(&home).map_err(|source| Error::Home {
            path: home.clone(),
            source,
        })?;
        home::remove_leftover_runs(&home.join("runs"));
        let run_dir = tempfile::Builder::new()
            .prefix(&home::run_prefix())
            .tempdir_in(home.join("runs"))
            .map_err(|source| Error::RunDir {
                path: home.clone(),
                source,
            })?;
        home::mark_owner(run_dir.path()).map_err(|source| Error::RunDir {
            path: run_dir.path().to_owned(),
            source,
        })?;
        let secret = home::secret().map_err(Error::Random)?;
        let jobs = Arc::new(Jobs::new(run_dir.path().to_path_buf()));
        let script = Arc::clone(&jobs);
        let endpoint = Endpoint::start(
            &secret,
            Arc::new(move |request: &Value| script.reply(request)),
        )
        .map_err(Error::Endpoint)?;
        let mut child =
            spawn::spawn(options, &home, run_dir.path(), &endpoint, &secret).map_err(|source| {
                Error::Spawn {
                    claude: options.claude.clone(),
                    source,
                }
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
            socket: None,
            run_dir,
            _endpoint: endpoint,
        })
    }

    /// The directory the plans are in; the `pre-tool-use` hook reads it.
    pub(crate) fn plans(&self) -> &Path {
        self.run_dir.path()
    }

    /// Plans one send of `message` to `target` (and an idle subscription to it with
    /// [`Idle::Notify`]), writes the plans for the hook, and asks the sender with the
    /// job's prompt.
    pub(crate) fn request(
        &mut self,
        target: &Recipient,
        message: &str,
        idle: Idle,
    ) -> Result<JobIds, Error> {
        let n = self.next_job;
        self.next_job += 1;
        let ids = JobIds {
            canary: format!("toolu_claude_peers_{n}_canary"),
            send: format!("toolu_claude_peers_{n}"),
            subscribe: (idle == Idle::Notify).then(|| format!("toolu_claude_peers_{n}_idle")),
        };
        let plan = |call| Plan {
            target: target.clone(),
            call,
        };
        let mut plans = vec![
            (ids.canary.clone(), plan(PlannedCall::Canary)),
            (
                ids.send.clone(),
                plan(PlannedCall::Message(message.to_owned())),
            ),
        ];
        if let Some(id) = &ids.subscribe {
            plans.push((id.clone(), plan(PlannedCall::IdleSubscription)));
        }
        for (id, plan) in &plans {
            plan.write(self.run_dir.path(), id).map_err(Error::Plan)?;
        }
        let token = Token::new(&self.secret[..8], n);
        let calls = plans
            .into_iter()
            .map(|(id, plan)| Call {
                id,
                input: plan.input(),
            })
            .collect();
        self.jobs.push(token.clone(), calls);
        self.prompt(token.as_str())?;
        Ok(ids)
    }

    /// Asks again for this project's own send prompts that Claude Code merged with
    /// inbound items into a prompt the hook blocked (so the model never got them).
    pub(crate) fn ask_again(&mut self, line: &Line) {
        let Line::Printed(Printed::Queued(items)) = line else {
            return;
        };
        let ours: Vec<&str> = items
            .iter()
            .filter_map(|item| match item {
                crate::stream::Queued::Ours(prompt) => Some(prompt.as_str()),
                _ => None,
            })
            .collect();
        if !ours.is_empty() {
            // A failure here shows as the send's timeout, in its own words.
            let _ = self.prompt(&ours.join("\n"));
        }
    }

    /// Starts a turn with `text` as its prompt (the hook lets only this project's own
    /// prompts through; one that names no job is answered with a final text).
    pub(crate) fn prompt(&mut self, text: &str) -> Result<(), Error> {
        let prompt = json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null, "session_id": ""});
        let stdin = self.stdin.as_mut().ok_or(Error::Ended)?;
        writeln!(stdin, "{prompt}")
            .and_then(|()| stdin.flush())
            .map_err(Error::Stdin)
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

    /// Its own messaging socket, once its `init` line named it.
    pub(crate) fn socket(&self) -> Option<&str> {
        self.socket.as_deref()
    }

    /// Notes its own messaging socket.
    pub(crate) fn set_socket(&mut self, socket: String) {
        self.socket = Some(socket);
    }

    /// Whether the sender has ended (it is reaped then, or now).
    pub(crate) fn ended(&mut self) -> bool {
        !matches!(self.group.try_wait(), Ok(None))
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
    let _ = stream::read_lines(stdout, MAX_LINE_BYTES, |line| match line {
        stream::Line::Whole(line) => match tx.send(Line::Printed(Printed::parse(line))) {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        },
        stream::Line::Overlong => ControlFlow::Continue(()),
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
