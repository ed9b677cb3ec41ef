//! The user's post office as the commands reach it: the one running, or one started
//! detached on demand (as a build cache's server is), for the same Claude home.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Delivered, Outcome, Receipt, Refusal, RefusalKind};
use claude_peer_post::protocol::Request;
use claude_peer_post::{Address, Attempt, Client, NewMessage, Step, Store, default_store_path};
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

/// `send` to one session through the running post office's warm sender (a running
/// sender's turn instead of a fresh Claude Code), recorded in its store: `None` when no
/// post office runs for this home. The gate is read here first, for the session and
/// policy the answer reports; the post office's sender goes through it again.
pub(crate) fn send_now(
    ctx: &Context,
    target: &str,
    letter: &Letter<'_>,
) -> Option<Result<Delivered, Error>> {
    let client = Client::connect(&runtime_dir().ok()?).ok()?;
    let mut client = same_home(ctx, client).ok()?;
    Some(send_by(ctx, &mut client, target, letter))
}

/// A message as one of our senders sends it: who, what, and what it answers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Letter<'a> {
    pub(crate) from: &'a str,
    pub(crate) text: &'a str,
    /// The post id of the message it answers.
    pub(crate) in_reply_to: Option<&'a str>,
}

fn send_by(
    ctx: &Context,
    client: &mut Client,
    target: &str,
    letter: &Letter<'_>,
) -> Result<Delivered, Error> {
    let courier = ctx.courier();
    let prepared = match courier.prepare(&ctx.home, target, letter.text) {
        Ok(prepared) => prepared,
        Err(err) => {
            let err = Error::from(err);
            // Refused here, before the post office was asked: recorded as it is without one.
            let _ = record_sent(letter, target, Err(err.refusal()));
            return Err(err);
        }
    };
    let (session, inbound, policy) = (
        prepared.session().clone(),
        prepared.inbound(),
        prepared.policy().clone(),
    );
    let request = Request::Send {
        from: letter.from.to_owned(),
        to: session.record.session_id.clone(),
        text: letter.text.to_owned(),
        in_reply_to: letter.in_reply_to.map(str::to_owned),
    };
    let done = client.request(&request, |_| {})?;
    let (Some(record), Some(sent)) = (done.record, done.sent) else {
        return Err(claude_peer_post::Error::answered(
            "post_office_refused",
            "the post office answered a send without its outcome".to_owned(),
        )
        .into());
    };
    if sent.delivered {
        let outcome = record.receipt.as_deref().and_then(Outcome::from_name);
        let basis = record.receipt_basis.as_deref().and_then(Basis::from_name);
        return Ok(Delivered {
            session,
            inbound,
            policy,
            detail: sent.detail,
            receipt: outcome
                .zip(basis)
                .map(|(outcome, basis)| Receipt { outcome, basis }),
            msg_id: record.msg_id,
        });
    }
    let words = sent.message.unwrap_or_default();
    let name = sent.refusal.unwrap_or_default();
    Err(match RefusalKind::from_name(&name) {
        Some(kind) => claude_peer_deliver::Error::Refused(Refusal {
            kind,
            message: words,
            standing: sent.standing,
            uncertain: sent.uncertain,
        })
        .into(),
        None => claude_peer_post::Error::answered(&name, words).into(),
    })
}

/// Records a send made without a post office in the user's store, so that `log` lists
/// every message this user sent: a delivered one with its receipt, a refused one with
/// the refusal. Other failures sent nothing worth a record.
pub(crate) fn record_sent(
    letter: &Letter<'_>,
    target: &str,
    result: Result<&Delivered, Option<Refusal>>,
) -> Result<(), Error> {
    if let Some((new, steps, now)) = sent_record(letter, target, result) {
        let mut store = Store::open(&default_store_path()?)?;
        store.record(&new, &steps, now)?;
    }
    Ok(())
}

/// What [`record_sent`] records: the message, its steps and when; `None` for a failure
/// that sent nothing.
pub(crate) fn sent_record(
    letter: &Letter<'_>,
    target: &str,
    result: Result<&Delivered, Option<Refusal>>,
) -> Option<(NewMessage, Vec<Step>, u64)> {
    let (to, steps) = match result {
        Ok(delivered) => {
            let session_id = delivered.session.record.session_id.clone();
            let steps = vec![
                Step::Send(Attempt::to(session_id.clone())),
                Step::Deliver {
                    session_id: session_id.clone(),
                    session_name: delivered.session.record.name.clone(),
                    msg_id: delivered.msg_id.clone(),
                    receipt: delivered.receipt,
                },
            ];
            (Address::SessionId(session_id), steps)
        }
        Err(refusal) => {
            let to = if claude_peer_registry::is_uuid(target) {
                Address::SessionId(target.to_owned())
            } else {
                Address::Name(target.to_owned())
            };
            (to, vec![Step::Refuse(refusal?.to_string())])
        }
    };
    let now = now_ms();
    let new = NewMessage {
        from: letter.from.to_owned(),
        key: None,
        to,
        text: letter.text.to_owned(),
        expires_at_ms: now.saturating_add(
            u64::try_from(claude_peer_post::DEFAULT_EXPIRY.as_millis()).unwrap_or(u64::MAX),
        ),
        in_reply_to: letter.in_reply_to.map(str::to_owned),
    };
    Some((new, steps, now))
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}
