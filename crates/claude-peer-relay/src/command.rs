//! A relay that runs a program the user names.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io::{self, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::group::Group;
use crate::{Confirmation, Relay, RelayFailure, Target};

/// How long a relay program may take before it is killed: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// How much of a relay's stderr is kept (its end): 4 KiB.
pub const STDERR_TAIL_BYTES: usize = 4096;
/// The longest stdout line that is looked at for the confirmation: 64 KiB.
pub const STDOUT_LINE_BYTES: usize = 65_536;

/// `CLAUDE_PEERS_TARGET_SESSION_ID`: the target's session id.
pub const ENV_SESSION_ID: &str = "CLAUDE_PEERS_TARGET_SESSION_ID";
/// `CLAUDE_PEERS_TARGET_NAME`: the target's name, empty when its record gives none.
pub const ENV_NAME: &str = "CLAUDE_PEERS_TARGET_NAME";
/// `CLAUDE_PEERS_TARGET_PID`: the target's pid, in decimal.
pub const ENV_PID: &str = "CLAUDE_PEERS_TARGET_PID";
/// `CLAUDE_PEERS_TARGET_SOCKET`: the target's messaging socket path.
pub const ENV_SOCKET: &str = "CLAUDE_PEERS_TARGET_SOCKET";
/// `CLAUDE_PEERS_TARGET_CWD`: the target's working directory.
pub const ENV_CWD: &str = "CLAUDE_PEERS_TARGET_CWD";

/// After the relay exits, how long its output pipes may stay open (held by something it
/// left running) before what was read so far is taken as all of it.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
/// Tries of a spawn that fails with `ETXTBSY` (a script written a moment ago, whose
/// write descriptor a concurrently forked process still holds).
const SPAWN_TRIES: u32 = 5;
/// The stdout end quoted in a failure.
const STDOUT_EXCERPT_BYTES: usize = 512;

/// A relay that runs a program, with this contract:
///
/// - the program is started directly, without a shell, with the arguments exactly as
///   given, in its own process group, inheriting this process's environment and cwd;
/// - the target is in the environment: [`ENV_SESSION_ID`], [`ENV_NAME`] (empty when the
///   session has no name), [`ENV_PID`], [`ENV_SOCKET`], [`ENV_CWD`];
/// - the message is written to its stdin, which is then closed (a program that does not
///   read it is fine);
/// - it succeeds by exiting with status 0 after printing a stdout line that is a JSON
///   object with `"sent": true`, optionally with `"detail"` (a string); the last such
///   line counts;
/// - anything else fails with the program's own words: `{"sent": false, "detail": …}`,
///   another exit status, a signal, or no confirmation line, each with the last 4 KiB of
///   its stderr;
/// - one that runs past the timeout (default [`DEFAULT_TIMEOUT`]) is killed with its
///   process group (`SIGKILL`) and reaped.
///
/// ```no_run
/// use std::time::Duration;
/// use claude_peer_relay::CommandRelay;
///
/// let relay = CommandRelay::new("/usr/local/bin/send-via-claude")
///     .arg("--quiet")
///     .timeout(Duration::from_secs(30));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRelay {
    program: OsString,
    args: Vec<OsString>,
    timeout: Duration,
}

impl CommandRelay {
    /// A relay running `program` (a path, or a name looked up in `PATH`) with no arguments.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Adds one argument, passed as given.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments, passed as given.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Kills the program when it has not exited `timeout` after it started.
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The program.
    #[must_use]
    pub fn program(&self) -> &OsStr {
        &self.program
    }

    /// The arguments.
    #[must_use]
    pub fn get_args(&self) -> &[OsString] {
        &self.args
    }

    /// The timeout.
    #[must_use]
    pub const fn get_timeout(&self) -> Duration {
        self.timeout
    }

    fn spawn(&self, target: &Target) -> io::Result<Child> {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env(ENV_SESSION_ID, &target.session_id)
            .env(ENV_NAME, target.name.as_deref().unwrap_or(""))
            .env(ENV_PID, target.pid.to_string())
            .env(ENV_SOCKET, &target.socket)
            .env(ENV_CWD, &target.cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut tries = 1;
        loop {
            match command.spawn() {
                Err(err)
                    if err.raw_os_error() == Some(rustix::io::Errno::TXTBSY.raw_os_error())
                        && tries < SPAWN_TRIES =>
                {
                    thread::sleep(Duration::from_millis(20 * u64::from(tries)));
                    tries += 1;
                }
                result => return result,
            }
        }
    }

    fn name(&self) -> String {
        format!("relay `{}`", self.program.to_string_lossy())
    }
}

impl Relay for CommandRelay {
    fn send(&self, target: &Target, message: &str) -> Result<Confirmation, RelayFailure> {
        let name = self.name();
        let child = self
            .spawn(target)
            .map_err(|err| RelayFailure::new(format!("cannot start the {name}: {err}")))?;
        let mut running = Running::new(child);
        let outcome = running.watch(message, self.timeout);
        match outcome {
            Ok(run) => run.verdict(&name),
            Err(err) => Err(RelayFailure::new(format!(
                "cannot run the {name}: {err}{}",
                running.stderr_note()
            ))),
        }
    }
}

/// A started relay process, killed with its group and reaped if dropped before it was.
struct Running {
    group: Group,
    stderr: Arc<Mutex<Tail>>,
    stdout: Arc<Mutex<Lines>>,
}

/// What one run of a relay came to.
struct Run {
    /// The exit status, or `None` when it was killed for running past `timeout`.
    status: Option<ExitStatus>,
    timeout: Duration,
    stdin_error: Option<io::Error>,
    stderr: Tail,
    stdout: Lines,
}

impl Running {
    fn new(child: Child) -> Self {
        Self {
            group: Group::new(child),
            stderr: Arc::new(Mutex::new(Tail::new(STDERR_TAIL_BYTES))),
            stdout: Arc::new(Mutex::new(Lines::default())),
        }
    }

    /// Feeds the message, drains the output and waits for the exit, killing the
    /// process group at the timeout.
    fn watch(&mut self, message: &str, timeout: Duration) -> io::Result<Run> {
        let deadline = Instant::now().checked_add(timeout);
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let mut drains = 0;
        if let Some(mut stderr) = self.group.child.stderr.take() {
            let tail = Arc::clone(&self.stderr);
            spawn_named("relay-stderr", done_tx.clone(), move || {
                drain(&mut stderr, STDERR_TAIL_BYTES, |chunk| {
                    lock(&tail).push(chunk);
                });
            })?;
            drains += 1;
        }
        if let Some(mut stdout) = self.group.child.stdout.take() {
            let lines = Arc::clone(&self.stdout);
            spawn_named("relay-stdout", done_tx, move || {
                drain(&mut stdout, 8192, |chunk| lock(&lines).push(chunk));
                lock(&lines).finish();
            })?;
            drains += 1;
        }
        let (stdin_tx, stdin_rx) = mpsc::channel::<io::Error>();
        if let Some(mut stdin) = self.group.child.stdin.take() {
            let bytes = message.as_bytes().to_vec();
            // Its own thread: a relay that reads no stdin must not block us. The thread
            // ends when the write completes or the pipe's last reader is gone.
            thread::Builder::new()
                .name("relay-stdin".to_owned())
                .spawn(move || {
                    if let Err(err) = stdin.write_all(&bytes).and_then(|()| stdin.flush())
                        && err.kind() != io::ErrorKind::BrokenPipe
                    {
                        let _ = stdin_tx.send(err);
                    }
                })?;
        }
        let status = self.wait(deadline)?;
        if status.is_none() {
            self.kill_and_reap();
        }
        wait_drained(&done_rx, drains, Instant::now() + DRAIN_GRACE);
        Ok(Run {
            status,
            timeout,
            stdin_error: stdin_rx.try_recv().ok(),
            stderr: lock(&self.stderr).clone(),
            stdout: lock(&self.stdout).clone(),
        })
    }

    /// Polls for the exit until `deadline`; `None` when it is still running then.
    fn wait(&mut self, deadline: Option<Instant>) -> io::Result<Option<ExitStatus>> {
        let mut pause = Duration::from_millis(1);
        loop {
            if let Some(status) = self.group.try_wait()? {
                return Ok(Some(status));
            }
            let now = Instant::now();
            let left = match deadline {
                Some(deadline) if deadline <= now => return Ok(None),
                Some(deadline) => deadline - now,
                None => pause,
            };
            thread::sleep(pause.min(left));
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Kills the whole process group (what the relay started too), then reaps the relay.
    fn kill_and_reap(&mut self) {
        self.group.kill_and_reap();
    }

    fn stderr_note(&self) -> String {
        lock(&self.stderr).note()
    }
}

impl Run {
    fn verdict(self, name: &str) -> Result<Confirmation, RelayFailure> {
        let stderr = self.stderr.note();
        let fail = |what: String| RelayFailure::new(format!("the {name} {what}{stderr}"));
        let Some(status) = self.status else {
            return Err(fail(format!(
                "did not finish within {}; it was killed",
                describe_duration(self.timeout)
            )));
        };
        if let Some(signal) = status.signal() {
            let core = if status.core_dumped() {
                " (core dumped)"
            } else {
                ""
            };
            return Err(fail(format!(
                "crashed: killed by signal {}{core}",
                signal_name(signal)
            )));
        }
        let reply = self.stdout.reply.clone();
        match (status.code(), reply) {
            (Some(0), Some(Reply { sent: true, detail })) => Ok(Confirmation {
                detail,
                ..Confirmation::default()
            }),
            (
                Some(0),
                Some(Reply {
                    sent: false,
                    detail,
                }),
            ) => Err(fail(format!(
                "reported that it did not send: {}",
                detail.as_deref().unwrap_or("(no detail)")
            ))),
            (Some(0), None) => {
                let stdin = self
                    .stdin_error
                    .map(|err| format!(" (writing the message to its stdin failed: {err})"))
                    .unwrap_or_default();
                Err(fail(format!(
                    "exited with status 0 but printed no {{\"sent\":true}} line{stdin}; its stdout ended with: {}",
                    self.stdout.excerpt()
                )))
            }
            (Some(code), _) => Err(fail(format!("exited with status {code}"))),
            (None, _) => Err(fail(format!("ended with {status}"))),
        }
    }
}

/// What a confirmation line said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reply {
    sent: bool,
    detail: Option<String>,
}

/// Parses one stdout line: a JSON object with a boolean `sent` is a reply.
fn parse_reply(line: &[u8]) -> Option<Reply> {
    let serde_json::Value::Object(object) = serde_json::from_slice(line).ok()? else {
        return None;
    };
    let sent = object.get("sent")?.as_bool()?;
    let detail = match object.get("detail") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(detail)) => Some(detail.clone()),
        Some(other) => Some(other.to_string()),
    };
    Some(Reply { sent, detail })
}

/// A relay's stdout, read line by line: only the current line (at most
/// [`STDOUT_LINE_BYTES`]), the last reply and a short excerpt are kept.
#[derive(Debug, Clone, Default)]
struct Lines {
    line: Vec<u8>,
    overlong: bool,
    reply: Option<Reply>,
    excerpt: Option<Tail>,
}

impl Lines {
    fn push(&mut self, chunk: &[u8]) {
        self.excerpt
            .get_or_insert_with(|| Tail::new(STDOUT_EXCERPT_BYTES))
            .push(chunk);
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.take(&rest[..end]);
            self.end_line();
            rest = &rest[end + 1..];
        }
        self.take(rest);
    }

    fn take(&mut self, part: &[u8]) {
        if self.overlong || self.line.len() + part.len() > STDOUT_LINE_BYTES {
            self.overlong = true;
            self.line.clear();
        } else {
            self.line.extend_from_slice(part);
        }
    }

    fn end_line(&mut self) {
        if !self.overlong {
            let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
            if let Some(reply) = parse_reply(line) {
                self.reply = Some(reply);
            }
        }
        self.line.clear();
        self.overlong = false;
    }

    /// The end of output without a final newline is a line too.
    fn finish(&mut self) {
        if self.overlong || !self.line.is_empty() {
            self.end_line();
        }
    }

    fn excerpt(&self) -> String {
        match &self.excerpt {
            Some(tail) if !tail.text().trim().is_empty() => format!("{:?}", tail.text()),
            _ => "(nothing)".to_owned(),
        }
    }
}

/// The last `cap` bytes of a stream; never holds more.
#[derive(Debug, Clone)]
struct Tail {
    bytes: VecDeque<u8>,
    cap: usize,
    cut: bool,
}

impl Tail {
    fn new(cap: usize) -> Self {
        Self {
            bytes: VecDeque::with_capacity(cap.min(1024)),
            cap,
            cut: false,
        }
    }

    fn push(&mut self, chunk: &[u8]) {
        let chunk = if chunk.len() > self.cap {
            self.cut = true;
            self.bytes.clear();
            &chunk[chunk.len() - self.cap..]
        } else {
            chunk
        };
        let over = (self.bytes.len() + chunk.len()).saturating_sub(self.cap);
        if over > 0 {
            self.cut = true;
            self.bytes.drain(..over);
        }
        self.bytes.extend(chunk);
    }

    /// The kept bytes as text; a character cut in two at the start is dropped.
    fn text(&self) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let start = if self.cut {
            bytes
                .iter()
                .take(3)
                .take_while(|&&b| b & 0xC0 == 0x80)
                .count()
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// `; its stderr …: <text>` for a failure message, or nothing when it is empty.
    fn note(&self) -> String {
        let text = self.text();
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else if self.cut {
            format!("; the last {} bytes of its stderr: {text}", self.cap)
        } else {
            format!("; its stderr: {text}")
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads `source` to its end in chunks of at most `chunk` bytes, handing each to `sink`.
fn drain(source: &mut impl Read, chunk: usize, mut sink: impl FnMut(&[u8])) {
    let mut buf = vec![0; chunk];
    loop {
        match source.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => sink(&buf[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Runs `work` on a named thread that says when it is done; never joined, so a pipe
/// held open by something the relay left running cannot hold us.
fn spawn_named(
    name: &str,
    done: mpsc::Sender<()>,
    work: impl FnOnce() + Send + 'static,
) -> io::Result<()> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            work();
            let _ = done.send(());
        })?;
    Ok(())
}

/// Waits until `count` drains are done or `deadline` passes.
fn wait_drained(done: &Receiver<()>, count: usize, deadline: Instant) {
    let mut left = count;
    while left > 0 {
        let timeout = deadline.saturating_duration_since(Instant::now());
        match done.recv_timeout(timeout) {
            Ok(()) => left -= 1,
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
    }
}

fn describe_duration(duration: Duration) -> String {
    if duration.subsec_nanos() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

/// `SIGKILL (9)`, or `9` for a signal without a well-known name.
fn signal_name(raw: i32) -> String {
    const NAMES: [(Signal, &str); 15] = [
        (Signal::HUP, "SIGHUP"),
        (Signal::INT, "SIGINT"),
        (Signal::QUIT, "SIGQUIT"),
        (Signal::ILL, "SIGILL"),
        (Signal::TRAP, "SIGTRAP"),
        (Signal::ABORT, "SIGABRT"),
        (Signal::BUS, "SIGBUS"),
        (Signal::FPE, "SIGFPE"),
        (Signal::KILL, "SIGKILL"),
        (Signal::USR1, "SIGUSR1"),
        (Signal::SEGV, "SIGSEGV"),
        (Signal::USR2, "SIGUSR2"),
        (Signal::PIPE, "SIGPIPE"),
        (Signal::ALARM, "SIGALRM"),
        (Signal::TERM, "SIGTERM"),
    ];
    NAMES
        .iter()
        .find(|(signal, _)| signal.as_raw() == raw)
        .map_or_else(|| raw.to_string(), |(_, name)| format!("{name} ({raw})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tail_keeps_only_the_last_bytes_and_drops_a_split_character() {
        let mut tail = Tail::new(4);
        tail.push(b"ab");
        tail.push(b"cd");
        assert_eq!(tail.text(), "abcd");
        assert!(!tail.cut);
        tail.push("xé".as_bytes());
        assert_eq!(tail.bytes.len(), 4);
        assert_eq!(tail.text(), "dxé");
        tail.push("0123é".as_bytes());
        assert_eq!(tail.text(), "23é");
        let mut split = Tail::new(3);
        split.push("aé€".as_bytes()); // the last three bytes are € alone
        assert_eq!(split.text(), "€");
        split.push(b"z");
        assert_eq!(
            split.text(),
            "z",
            "the two continuation bytes of € are dropped"
        );
    }

    #[test]
    fn the_last_reply_line_counts_and_other_lines_are_ignored() {
        let mut lines = Lines::default();
        lines.push(b"starting\n{\"sent\":false}\r\n[1,2]\n{\"sen");
        lines.push(b"t\":true,\"detail\":{\"id\":7}}");
        lines.finish();
        assert_eq!(
            lines.reply,
            Some(Reply {
                sent: true,
                detail: Some("{\"id\":7}".into())
            })
        );
    }

    #[test]
    fn an_overlong_line_is_dropped_without_being_kept() {
        let mut lines = Lines::default();
        lines.push(b"{\"sent\":true,\"detail\":\"");
        lines.push(&vec![b'x'; STDOUT_LINE_BYTES]);
        assert!(lines.line.is_empty(), "the overlong line is not kept");
        lines.push(b"\"}\n{\"sent\":true}\n");
        lines.finish();
        assert_eq!(
            lines.reply,
            Some(Reply {
                sent: true,
                detail: None
            })
        );
    }

    #[test]
    fn a_reply_needs_a_boolean_sent() {
        assert_eq!(parse_reply(br#"{"sent":"yes"}"#), None);
        assert_eq!(parse_reply(b"true"), None);
        assert_eq!(parse_reply(b"garbage"), None);
        assert_eq!(
            parse_reply(br#" {"sent":true,"detail":null} "#),
            Some(Reply {
                sent: true,
                detail: None
            })
        );
    }

    #[test]
    fn signals_are_named() {
        assert_eq!(
            signal_name(Signal::KILL.as_raw()),
            format!("SIGKILL ({})", Signal::KILL.as_raw())
        );
        assert_eq!(signal_name(63), "63");
    }
}
