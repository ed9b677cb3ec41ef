//! The user's post office as the commands reach it: the one running, or one started
//! detached on demand (as a build cache's server is), for the same Claude home.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claude_peer_post::Client;
use claude_peer_post::protocol::Request;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::CommandExt as _;

use crate::ops::{Context, Error};

/// How long a started post office may take to answer.
const START_WITHIN: Duration = Duration::from_secs(10);

/// How a post office is started when none runs: the Claude Code its sender runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct Start {
    pub(crate) claude: Option<PathBuf>,
}

/// Where this user's post office keeps its lock and socket.
pub(crate) fn runtime_dir() -> Result<PathBuf, Error> {
    claude_peer_sender::default_runtime_dir().ok_or(Error::NoHome)
}

/// A connection to the post office running for this user, that delivers to `ctx`'s
/// Claude home; with `start`, one started detached first when none answers.
pub(crate) fn connect(ctx: &Context, start: Option<&Start>) -> Result<Client, Error> {
    let dir = runtime_dir()?;
    let client = match (Client::connect(&dir), start) {
        (Ok(client), _) => client,
        (Err(err), None) => return Err(err.into()),
        (Err(_), Some(start)) => {
            let (mut child, log) = spawn(ctx, start, &dir)?;
            let deadline = Instant::now() + START_WITHIN;
            loop {
                match Client::connect(&dir) {
                    Ok(client) => break client,
                    // One that ended, or never answers, says why in its log.
                    Err(_)
                        if Instant::now() >= deadline
                            || child.try_wait().ok().flatten().is_some() =>
                    {
                        return Err(did_not_start(&log));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        }
    };
    same_home(ctx, client)
}

/// The client, once its post office is known to deliver to `ctx`'s home: one for another
/// home would send to the wrong registry.
fn same_home(ctx: &Context, mut client: Client) -> Result<Client, Error> {
    let done = client.request(&Request::Ping, |_| {})?;
    let theirs = done.home.unwrap_or_default();
    if Path::new(&theirs) == ctx.home.root() {
        Ok(client)
    } else {
        Err(Error::OtherHome {
            pid: done.pid,
            theirs: PathBuf::from(theirs),
            ours: ctx.home.root().to_owned(),
        })
    }
}

/// Starts `claude-peers serve` for `ctx`'s home, detached: its own process group, no
/// terminal, its diagnostics in `serve.log` beside its socket (what it did is in its
/// store and `outbox`). The process and its log's path.
fn spawn(ctx: &Context, start: &Start, dir: &Path) -> Result<(Child, PathBuf), Error> {
    let dir = claude_peer_sender::private_dir(dir).map_err(Error::PostOfficeStart)?;
    let log = dir.join("serve.log");
    let stderr = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&log)
        .map_err(Error::PostOfficeStart)?;
    let program = std::env::current_exe().map_err(Error::NoHookProgram)?;
    let mut command = Command::new(program);
    command
        .arg("--home")
        .arg(ctx.home.root())
        .arg("serve")
        .arg("--managed-settings")
        .arg(&ctx.managed_settings)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .process_group(0);
    if let Some(claude) = &start.claude {
        command.arg("--claude").arg(claude);
    }
    let child = command.spawn().map_err(Error::PostOfficeStart)?;
    Ok((child, log))
}

/// Why a started post office does not answer: the end of its log (4 KiB at most).
fn did_not_start(log: &Path) -> Error {
    let mut bytes = Vec::new();
    if let Ok(mut file) = std::fs::File::open(log) {
        let len = file.metadata().map_or(0, |m| m.len());
        let _ = file
            .seek(SeekFrom::Start(len.saturating_sub(4096)))
            .and_then(|_| file.take(4096).read_to_end(&mut bytes));
    }
    let tail = String::from_utf8_lossy(&bytes);
    Error::PostOfficeStart(std::io::Error::other(format!(
        "it did not answer (within {} s at most); its log `{}` says: {}",
        START_WITHIN.as_secs(),
        log.display(),
        tail.trim()
    )))
}
