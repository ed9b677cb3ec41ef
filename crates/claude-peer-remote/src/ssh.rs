//! The transport: the system `ssh`, one connection per host, running `claude-peers` on
//! the other side.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::{Error, shell_line};

/// The remote protocol this build speaks: the JSON shapes and flags one `claude-peers`
/// relies on in another. Raised when they change incompatibly.
pub const PROTOCOL: u32 = 1;

/// The hidden flag that carries [`PROTOCOL`] to the remote: the handshake, in the same
/// invocation as the command (no extra round trip). A remote too old to know it fails
/// with a usage error naming it; a remote that knows it refuses another number.
pub const PROTOCOL_FLAG: &str = "--peer-protocol";

/// The stable name a remote answers an other protocol number with.
pub const INCOMPATIBLE: &str = "incompatible_protocol";

/// Names the ssh program instead of `ssh` (tests, wrappers).
pub const SSH_VAR: &str = "CLAUDE_PEERS_SSH";

/// A remote answer read no further than this: far beyond any registry's listing.
const MAX_ANSWER_BYTES: u64 = 64 << 20;

/// How long ssh may take to connect before the host counts as unreachable.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A Unix socket path is at most 107 bytes; ssh adds a 17-byte suffix while it binds.
const MAX_CONTROL_PATH: usize = 107 - 17;

/// How to reach other machines.
#[derive(Debug, Clone)]
pub struct Ssh {
    program: OsString,
    control_dir: Option<PathBuf>,
    connect_timeout: Duration,
    remote_bin: OsString,
}

/// What a remote `claude-peers` answered: its exit code and output.
#[derive(Debug)]
pub struct Answer {
    pub exit: i32,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

impl Ssh {
    /// `ssh` (or `$CLAUDE_PEERS_SSH`), its connections shared through control sockets in
    /// `control_dir` (a private directory of ours) unless the user's ssh configuration
    /// multiplexes already; `claude-peers` on the remote `PATH`.
    #[must_use]
    pub fn new(control_dir: Option<PathBuf>) -> Self {
        Self {
            program: std::env::var_os(SSH_VAR)
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| "ssh".into()),
            control_dir,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            remote_bin: "claude-peers".into(),
        }
    }

    /// Runs `bin` on the remote instead of `claude-peers` from its `PATH`.
    #[must_use]
    pub fn remote_bin(mut self, bin: impl Into<OsString>) -> Self {
        self.remote_bin = bin.into();
        self
    }

    /// Gives up connecting after `timeout` [default: [`DEFAULT_CONNECT_TIMEOUT`]].
    #[must_use]
    pub const fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The remote program, as the errors name it.
    #[must_use]
    pub fn remote_bin_name(&self) -> String {
        self.remote_bin.to_string_lossy().into_owned()
    }

    /// The `ssh` command that runs `claude-peers --peer-protocol N ARGS` on
    /// `host`: never a password prompt (`BatchMode`), a connect timeout, keepalives (a
    /// dead link ends a `watch`), the destination after `--` and the remote command as
    /// one line of single-quoted words.
    #[must_use]
    pub fn command<S: AsRef<OsStr>>(&self, host: &str, args: &[S]) -> Command {
        let mut command = Command::new(&self.program);
        command.args([
            "-T",
            "-o",
            "BatchMode=yes",
            "-o",
            "ServerAliveInterval=5",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
        ]);
        command.arg(format!(
            "ConnectTimeout={}",
            self.connect_timeout.as_secs().max(1)
        ));
        if let Some(path) = self.control_path(host) {
            command.args(["-o", "ControlMaster=auto", "-o", "ControlPersist=60"]);
            command.arg("-o").arg(path);
        }
        let protocol = PROTOCOL.to_string();
        let mut words: Vec<&OsStr> = vec![
            &self.remote_bin,
            OsStr::new(PROTOCOL_FLAG),
            OsStr::new(&protocol),
        ];
        words.extend(args.iter().map(AsRef::as_ref));
        command
            .arg("--")
            .arg(host)
            .arg(OsStr::from_bytes(&shell_line(&words)));
        command
    }

    /// `ControlPath=DIR/<hash of host>` when we multiplex `host`: not when the user's own
    /// ssh configuration does (`ssh -G` says so, asked only while no connection of ours
    /// to `host` is open), nor when the path would be too long.
    fn control_path(&self, host: &str) -> Option<OsString> {
        let dir = self.control_dir.as_ref()?;
        let name = blake3::hash(host.as_bytes()).to_hex();
        let path = dir.join(&name[..32]);
        if path.as_os_str().len() > MAX_CONTROL_PATH {
            return None;
        }
        let ours_open = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if !ours_open && self.user_multiplexes(host) {
            return None;
        }
        let mut option = OsString::from("ControlPath=");
        option.push(path);
        Some(option)
    }

    /// Whether the user's ssh configuration for `host` already shares connections.
    fn user_multiplexes(&self, host: &str) -> bool {
        let Ok(out) = Command::new(&self.program)
            .args(["-G", "--", host])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
        else {
            return false;
        };
        String::from_utf8_lossy(&out.stdout).lines().any(|line| {
            let mut words = line.split_whitespace();
            match (words.next(), words.next()) {
                (Some("controlmaster"), Some(value)) => value != "false",
                (Some("controlpath"), Some(value)) => value != "none",
                _ => false,
            }
        })
    }

    /// Runs `args` on `host` with `stdin` as the remote's standard input, and waits for
    /// its answer.
    ///
    /// # Errors
    ///
    /// What [`Ssh::check`] finds, or [`Error::NoSsh`] when ssh cannot be started.
    pub fn run<S: AsRef<OsStr>>(
        &self,
        host: &str,
        args: &[S],
        stdin: &[u8],
    ) -> Result<Answer, Error> {
        let mut child = self.spawn(host, args, true)?;
        let mut input = child.stdin.take();
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
        else {
            return Err(self.no_ssh(host, std::io::Error::other("its output is not piped")));
        };
        let (out, err) = std::thread::scope(|scope| {
            let writer = scope.spawn(move || {
                if let Some(mut pipe) = input.take() {
                    // A remote that ends without reading all of it has answered anyway.
                    let _ = pipe.write_all(stdin);
                }
            });
            let errors = scope.spawn(move || read_bounded(&mut stderr));
            let out = read_bounded(&mut stdout);
            let _ = writer.join();
            (out, errors.join().unwrap_or_default())
        });
        let status = child.wait().map_err(|source| self.no_ssh(host, source))?;
        let exit = status.code().unwrap_or(255);
        let stderr = String::from_utf8_lossy(&err).into_owned();
        self.check(host, exit, &stderr)?;
        Ok(Answer {
            exit,
            stdout: out,
            stderr,
        })
    }

    /// Starts `args` on `host`, its stdout and stderr piped (and its stdin when
    /// `with_stdin`), for a caller that reads as it goes (`watch`).
    ///
    /// # Errors
    ///
    /// [`Error::NoSsh`] when ssh cannot be started.
    pub fn spawn<S: AsRef<OsStr>>(
        &self,
        host: &str,
        args: &[S],
        with_stdin: bool,
    ) -> Result<Child, Error> {
        self.command(host, args)
            .stdin(if with_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| self.no_ssh(host, source))
    }

    /// What an ended remote command's exit code and stderr say about the way there: ssh's
    /// own failure (255), no remote program (127), or a remote of another protocol.
    /// `Ok` for everything `claude-peers` itself answered, a refusal or error included.
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`], [`Error::NotInstalled`] or [`Error::Incompatible`].
    pub fn check(&self, host: &str, exit: i32, stderr: &str) -> Result<(), Error> {
        let said = || last_words(stderr);
        match exit {
            255 => Err(Error::Unreachable {
                host: host.to_owned(),
                message: said().unwrap_or_else(|| "ssh failed and said nothing".to_owned()),
            }),
            126 | 127 => Err(Error::NotInstalled {
                host: host.to_owned(),
                bin: self.remote_bin_name(),
            }),
            2 if stderr.contains(PROTOCOL_FLAG) => Err(Error::Incompatible {
                host: host.to_owned(),
                message: format!(
                    "its claude-peers predates the remote protocol (this one speaks {PROTOCOL}); upgrade it"
                ),
            }),
            _ if stderr.contains(INCOMPATIBLE) => Err(Error::Incompatible {
                host: host.to_owned(),
                message: said().unwrap_or_default(),
            }),
            _ => Ok(()),
        }
    }

    fn no_ssh(&self, host: &str, source: std::io::Error) -> Error {
        Error::NoSsh {
            host: host.to_owned(),
            program: self.program.to_string_lossy().into_owned(),
            source,
        }
    }
}

fn read_bounded(from: &mut impl Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let _ = from.take(MAX_ANSWER_BYTES).read_to_end(&mut bytes);
    bytes
}

/// The last line of `stderr` that says something, at most 500 characters: what an
/// error quotes of a program's diagnostics.
#[must_use]
pub fn last_words(stderr: &str) -> Option<String> {
    stderr
        .lines()
        .map(str::trim)
        .rfind(|line| !line.is_empty())
        .map(|line| line.chars().take(500).collect())
}
