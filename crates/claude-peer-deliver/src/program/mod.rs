//! A relay that runs a program the user names.

mod run;
mod stdout;
mod verdict;

use std::ffi::OsString;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread;
use std::time::Duration;

use crate::child::ChildGroup;
use crate::{Confirmation, Recipient, Relay, RelayFailure};
use run::watch;

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

/// Tries of a spawn that fails with `ETXTBSY` (a script written a moment ago, whose
/// write descriptor a concurrently forked process still holds).
const SPAWN_TRIES: u32 = 5;

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
    stop: Option<Stop>,
}

/// A flag that, once set, stops the program under way (its group killed, reaped).
#[derive(Debug, Clone)]
struct Stop(Arc<AtomicBool>);

/// Two relays stop alike when they watch the same flag.
impl PartialEq for Stop {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Stop {}

impl CommandRelay {
    /// A relay running `program` (a path, or a name looked up in `PATH`) with no arguments.
    pub fn new(program: impl Into<OsString>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            stop: None,
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

    /// Kills the program under way (its whole process group, which a terminal's Ctrl-C
    /// does not reach) as soon as `stop` is set: a signal to this process, say.
    #[must_use]
    pub fn stop_when(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(Stop(stop));
        self
    }

    fn spawn(&self, target: &Recipient) -> io::Result<Child> {
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
    fn send(&self, target: &Recipient, message: &str) -> Result<Confirmation, RelayFailure> {
        let name = self.name();
        let child = self
            .spawn(target)
            .map_err(|err| RelayFailure::new(format!("cannot start the {name}: {err}")))?;
        let mut group = ChildGroup::new(child);
        let stop = self.stop.as_ref().map(|stop| &*stop.0);
        match watch(&mut group, message, self.timeout, stop) {
            Ok(run) => run.verdict(&name),
            Err(err) => Err(RelayFailure::new(format!("cannot run the {name}: {err}"))),
        }
    }
}
