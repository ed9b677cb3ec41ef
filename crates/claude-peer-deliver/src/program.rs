//! A relay that runs a program the user names.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::ioctl_fionbio;
use rustix::process::{Pid as RawPid, PidfdFlags, Signal, pidfd_open};

use crate::bounded::{Line, LineBuffer, Tail};
use crate::child::ChildGroup;
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
/// use claude_peer_deliver::CommandRelay;
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
        let mut group = ChildGroup::new(child);
        match watch(&mut group, message, self.timeout) {
            Ok(run) => run.verdict(&name),
            Err(err) => Err(RelayFailure::new(format!("cannot run the {name}: {err}"))),
        }
    }
}

/// What one run of a relay came to.
struct Run {
    /// The exit status, or `None` when it was killed for running past `timeout`.
    status: Option<ExitStatus>,
    timeout: Duration,
    stdin_error: Option<io::Error>,
    stderr: Tail,
    stdout: Stdout,
}

/// Feeds the message, drains the output and waits for the exit in one `poll` over the
/// child's pidfd and its pipes (non-blocking, so a relay that reads no stdin or fills a
/// pipe cannot stall us), killing the process group at the timeout. After the exit, the
/// pipes get [`DRAIN_GRACE`] to close: something the relay left running may hold them.
fn watch(group: &mut ChildGroup, message: &str, timeout: Duration) -> io::Result<Run> {
    let deadline = Instant::now().checked_add(timeout);
    let pid = RawPid::from_raw(group.id().cast_signed());
    // Without pidfds (old kernels), the exit is looked for every few milliseconds.
    let pidfd = pid.and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let mut stdin = group.child_mut().stdin.take();
    let mut stdout = group.child_mut().stdout.take();
    let mut stderr = group.child_mut().stderr.take();
    for fd in [
        stdin.as_ref().map(AsFd::as_fd),
        stdout.as_ref().map(AsFd::as_fd),
        stderr.as_ref().map(AsFd::as_fd),
    ]
    .into_iter()
    .flatten()
    {
        ioctl_fionbio(fd, true)?;
    }
    let mut input = message.as_bytes();
    let mut run = Run {
        status: None,
        timeout,
        stdin_error: None,
        stderr: Tail::new(STDERR_TAIL_BYTES),
        stdout: Stdout::default(),
    };
    let mut ended_at: Option<Instant> = None;
    let mut buf = vec![0; 8192];
    loop {
        if ended_at.is_none()
            && let Some(status) = group.try_wait()?
        {
            run.status = Some(status);
            ended_at = Some(Instant::now());
        }
        let now = Instant::now();
        let until = match ended_at {
            Some(_) if stdout.is_none() && stderr.is_none() => break,
            Some(at) if now >= at + DRAIN_GRACE => break,
            Some(at) => at + DRAIN_GRACE,
            None if deadline.is_some_and(|d| now >= d) => {
                group.kill_and_reap();
                ended_at = Some(now);
                continue;
            }
            None => deadline.unwrap_or(now + Duration::from_secs(3600)),
        };
        let wait = if pidfd.is_some() || ended_at.is_some() {
            until - now
        } else {
            (until - now).min(Duration::from_millis(5))
        };
        // The pidfd only wakes the wait: the next turn reaps the relay.
        let pidfd = pidfd.as_ref().filter(|_| ended_at.is_none());
        let [_, out_ready, err_ready, in_ready] = ready(
            [
                watched(pidfd.map(AsFd::as_fd), PollFlags::IN),
                watched(stdout.as_ref().map(AsFd::as_fd), PollFlags::IN),
                watched(stderr.as_ref().map(AsFd::as_fd), PollFlags::IN),
                watched(stdin.as_ref().map(AsFd::as_fd), PollFlags::OUT),
            ],
            wait,
        )?;
        if out_ready && !read_some(&mut stdout, &mut buf, |chunk| run.stdout.push(chunk)) {
            run.stdout.finish();
        }
        if err_ready {
            read_some(&mut stderr, &mut buf, |chunk| run.stderr.push(chunk));
        }
        if in_ready && let Some(pipe) = &stdin {
            match rustix::io::write(pipe, input) {
                Ok(n) => input = &input[n..],
                Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::PIPE) => input = &[],
                Err(err) => {
                    run.stdin_error = Some(err.into());
                    input = &[];
                }
            }
            if input.is_empty() {
                stdin = None; // Closing it tells the relay the message is whole.
            }
        }
    }
    Ok(run)
}

/// Polls the fds present in `slots` up to `wait`; which of the slots are ready.
fn ready<const N: usize>(slots: [Option<PollFd<'_>>; N], wait: Duration) -> io::Result<[bool; N]> {
    let present = slots.each_ref().map(Option::is_some);
    let mut fds: Vec<PollFd<'_>> = slots.into_iter().flatten().collect();
    let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
        tv_sec: 3600,
        tv_nsec: 0,
    });
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(err) => return Err(err.into()),
    }
    let mut events = fds.iter().map(|fd| !fd.revents().is_empty());
    Ok(present.map(|here| here && events.next().unwrap_or(false)))
}

/// `fd` polled for `flags`, when there is one.
fn watched(fd: Option<BorrowedFd<'_>>, flags: PollFlags) -> Option<PollFd<'_>> {
    fd.map(|fd| PollFd::from_borrowed_fd(fd, flags))
}

/// Reads what `pipe` has now into `sink`; closes it (and says `false`) at its end.
fn read_some<P: AsFd>(pipe: &mut Option<P>, buf: &mut [u8], mut sink: impl FnMut(&[u8])) -> bool {
    let Some(fd) = pipe else { return false };
    match rustix::io::read(&*fd, &mut *buf) {
        Ok(0) => {}
        Ok(n) => {
            sink(&buf[..n]);
            return true;
        }
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return true,
        Err(_) => {}
    }
    *pipe = None;
    false
}

impl Run {
    fn verdict(self, name: &str) -> Result<Confirmation, RelayFailure> {
        let stderr = self.stderr.stderr_note();
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
        let reply = self.stdout.confirmation.clone();
        match (status.code(), reply) {
            (Some(0), Some(ConfirmationLine { sent: true, detail })) => Ok(Confirmation {
                detail,
                ..Confirmation::default()
            }),
            (
                Some(0),
                Some(ConfirmationLine {
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

/// What a confirmation line (`{"sent": …}`) said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ConfirmationLine {
    sent: bool,
    detail: Option<String>,
}

/// Parses one stdout line: a JSON object with a boolean `sent` is a reply.
fn parse_confirmation(line: &[u8]) -> Option<ConfirmationLine> {
    let serde_json::Value::Object(object) = serde_json::from_slice(line).ok()? else {
        return None;
    };
    let sent = object.get("sent")?.as_bool()?;
    let detail = match object.get("detail") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(detail)) => Some(detail.clone()),
        Some(other) => Some(other.to_string()),
    };
    Some(ConfirmationLine { sent, detail })
}

/// A relay's stdout, read line by line: only the current line (at most
/// [`STDOUT_LINE_BYTES`]), the last confirmation and a short excerpt are kept.
#[derive(Debug, Clone)]
struct Stdout {
    lines: LineBuffer,
    confirmation: Option<ConfirmationLine>,
    excerpt: Option<Tail>,
}

impl Default for Stdout {
    fn default() -> Self {
        Self {
            lines: LineBuffer::new(STDOUT_LINE_BYTES),
            confirmation: None,
            excerpt: None,
        }
    }
}

impl Stdout {
    fn push(&mut self, chunk: &[u8]) {
        self.excerpt
            .get_or_insert_with(|| Tail::new(STDOUT_EXCERPT_BYTES))
            .push(chunk);
        let confirmation = &mut self.confirmation;
        self.lines.push(chunk, |line| note(confirmation, line));
    }

    /// The end of output without a final newline is a line too.
    fn finish(&mut self) {
        let confirmation = &mut self.confirmation;
        self.lines.finish(|line| note(confirmation, line));
    }

    fn excerpt(&self) -> String {
        match &self.excerpt {
            Some(tail) if !tail.text().trim().is_empty() => format!("{:?}", tail.text()),
            _ => "(nothing)".to_owned(),
        }
    }
}

/// Keeps `line` when it is a confirmation line: the last one counts.
fn note(confirmation: &mut Option<ConfirmationLine>, line: Line<'_>) {
    if let Line::Whole(line) = line
        && let Some(parsed) = parse_confirmation(line)
    {
        *confirmation = Some(parsed);
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
    fn the_last_reply_line_counts_and_other_lines_are_ignored() {
        let mut lines = Stdout::default();
        lines.push(b"starting\n{\"sent\":false}\r\n[1,2]\n{\"sen");
        lines.push(b"t\":true,\"detail\":{\"id\":7}}");
        lines.finish();
        assert_eq!(
            lines.confirmation,
            Some(ConfirmationLine {
                sent: true,
                detail: Some("{\"id\":7}".into())
            })
        );
    }

    #[test]
    fn an_overlong_line_is_dropped_without_being_kept() {
        let mut lines = Stdout::default();
        lines.push(b"{\"sent\":true,\"detail\":\"");
        lines.push(&vec![b'x'; STDOUT_LINE_BYTES]);
        assert!(lines.lines.line.is_empty(), "the overlong line is not kept");
        lines.push(b"\"}\n{\"sent\":true}\n");
        lines.finish();
        assert_eq!(
            lines.confirmation,
            Some(ConfirmationLine {
                sent: true,
                detail: None
            })
        );
    }

    #[test]
    fn a_reply_needs_a_boolean_sent() {
        assert_eq!(parse_confirmation(br#"{"sent":"yes"}"#), None);
        assert_eq!(parse_confirmation(b"true"), None);
        assert_eq!(parse_confirmation(b"garbage"), None);
        assert_eq!(
            parse_confirmation(br#" {"sent":true,"detail":null} "#),
            Some(ConfirmationLine {
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
