//! `mailbox`: one long-lived Claude Code sender over stdin and stdout as JSON lines,
//! for harnesses in any language. A request with `session_ids` is sent to each session
//! once, through the same sender, and answered with one event per target.

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use claude_peer_deliver::Delivered;
use claude_peer_probe::stream::{self, Line};
use claude_peer_resolve::Refusal;
use claude_peer_sender::{Event, Idle, Mailbox, Waker};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{Exit, Failure};
use crate::json::{MailboxEventJson, SessionJson};
use crate::ops::broadcast::{Plan, Targets};
use crate::ops::{Context, send, sessions};

/// The longest request line read: a 64 KiB message, JSON-escaped, with room.
const MAX_REQUEST_BYTES: usize = 1024 * 1024;

/// What reaches the loop besides the mailbox's own events.
enum Input {
    Request(Result<String, BadLine>),
    End,
}

/// A request line that cannot be a request at all.
#[derive(Debug, Clone, Copy)]
enum BadLine {
    Overlong,
    NotUtf8,
}

impl BadLine {
    const fn message(self) -> &'static str {
        match self {
            Self::Overlong => "a request line over 1 MiB",
            Self::NotUtf8 => "a request line that is not UTF-8",
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    id: Option<String>,
    send: Send,
}

/// Exactly one of `session_id` and `session_ids` names whom it is for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Send {
    session_id: Option<String>,
    session_ids: Option<Vec<String>>,
    message: String,
    #[serde(default)]
    notify_when_idle: bool,
}

impl Send {
    const fn idle(&self) -> Idle {
        if self.notify_when_idle {
            Idle::Notify
        } else {
            Idle::Ignore
        }
    }
}

pub(crate) fn run(
    ctx: &Context,
    claude: Option<PathBuf>,
    from: String,
    timeout: Duration,
) -> Result<Exit, Failure> {
    // Watched before anything starts: a signal while the sender starts is not lost.
    let signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(|err| {
        Failure::error(
            "signals",
            format!("cannot watch for SIGINT and SIGTERM: {err}"),
        )
    })?;
    let relay = send::claude(claude, from, timeout)?;
    let mut mailbox = send::mailbox(ctx, &relay)?;
    let inputs = listen(signals, &mailbox.waker(), mailbox.pid());
    let mut out = io::stdout().lock();
    loop {
        let signalled = || inputs.signalled.load(Ordering::Acquire);
        if signalled() {
            return Ok(stop(mailbox, &inputs.requests, &mut out));
        }
        if let Ok(input) = inputs.requests.try_recv() {
            match input {
                Input::Request(line) => {
                    let answered = answer(&mut mailbox, ctx, line, &signalled, |event| {
                        emit(&mut out, event)
                    });
                    if answered.is_err() {
                        return Ok(close(mailbox, &mut out));
                    }
                }
                Input::End => return Ok(close(mailbox, &mut out)),
            }
            continue;
        }
        if let Some(event) = mailbox.next_event(Duration::from_secs(3600)) {
            let ended = matches!(event, Event::Closed { .. });
            let written = emit(&mut out, &MailboxEventJson::from(&event));
            if ended {
                return Ok(Exit::Error);
            }
            if written.is_err() {
                return Ok(close(mailbox, &mut out));
            }
        }
    }
}

/// Closes the mailbox and writes what is still to come, `closed` last.
fn close(mailbox: Mailbox, out: &mut impl Write) -> Exit {
    for event in mailbox.close() {
        // The reader may be gone (that is one way to end): nothing to tell anyone.
        let _ = emit(out, &MailboxEventJson::from(&event));
    }
    Exit::Success
}

/// How long after the last one a request already written to stdin is still taken, to be
/// answered `cancelled`, once a signal stopped the mailbox.
const CANCEL_GRACE: Duration = Duration::from_millis(200);

/// The first signal: nothing more is sent. Each request written but not sent (read now
/// or within [`CANCEL_GRACE`] of the last) is answered `cancelled`, then the mailbox
/// closes (`closed` last).
fn stop(mailbox: Mailbox, requests: &Receiver<Input>, out: &mut impl Write) -> Exit {
    while let Ok(Input::Request(line)) = requests.recv_timeout(CANCEL_GRACE) {
        let id = line.ok().and_then(|line| request_id(&line));
        let _ = emit(
            out,
            &MailboxEventJson::Cancelled {
                id: id.as_deref(),
                target: None,
            },
        );
    }
    close(mailbox, out)
}

/// How many request lines wait, read but not yet sent, before stdin is read no further:
/// a flood of requests holds at most this many (each at most 1 MiB) in memory.
const WAITING_REQUESTS: usize = 64;

/// The mailbox's inputs besides its own events.
struct Inputs {
    /// Request lines in order, then the end of stdin: at most [`WAITING_REQUESTS`].
    requests: Receiver<Input>,
    /// Set by the first SIGINT or SIGTERM.
    signalled: Arc<AtomicBool>,
}

/// Reads requests from stdin and watches for SIGINT and SIGTERM, each on a thread of
/// its own that wakes the mailbox when something came. A second signal ends the process
/// at once, killing the sender's process group (`sender`) first.
fn listen(mut signals: Signals, waker: &Waker, sender: u32) -> Inputs {
    let (tx, requests) = mpsc::sync_channel(WAITING_REQUESTS);
    let signalled = Arc::new(AtomicBool::new(false));
    let signal_flag = Arc::clone(&signalled);
    let signal_waker = waker.clone();
    thread::spawn(move || {
        let mut signals = signals.forever();
        let Some(first) = signals.next() else { return };
        signal_flag.store(true, Ordering::Release);
        signal_waker.wake();
        if signals.next().is_some() {
            if let Some(group) = rustix::process::Pid::from_raw(sender.cast_signed()) {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            std::process::exit(128 + first);
        }
    });
    let waker = waker.clone();
    thread::spawn(move || {
        let _ = stream::read_lines(io::stdin().lock(), MAX_REQUEST_BYTES, |line| {
            let request = match line {
                Line::Whole(bytes) => {
                    String::from_utf8(bytes.to_vec()).map_err(|_| BadLine::NotUtf8)
                }
                Line::Overlong => Err(BadLine::Overlong),
            };
            // Blocks while the queue is full: stdin is then read no further.
            if tx.send(Input::Request(request)).is_err() {
                return ControlFlow::Break(());
            }
            waker.wake();
            ControlFlow::Continue(())
        });
        let _ = tx.send(Input::End);
        waker.wake();
    });
    Inputs {
        requests,
        signalled,
    }
}

/// The `id` of a request line, when it has one.
fn request_id(line: &str) -> Option<String> {
    serde_json::from_str::<Value>(line)
        .ok()?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

/// Answers one request line with its events, `sent`, `refused` or `error` (one per
/// target of `session_ids`), handed to `emit`, which stops it when it fails.
/// `signalled` tells that a signal came: targets not sent to yet are then `cancelled`.
fn answer(
    mailbox: &mut Mailbox,
    ctx: &Context,
    line: Result<String, BadLine>,
    signalled: &dyn Fn() -> bool,
    mut emit: impl FnMut(&MailboxEventJson<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let error = |id, message| MailboxEventJson::Error {
        id,
        target: None,
        message,
    };
    let line = match line {
        Ok(line) if line.trim().is_empty() => return emit(&error(None, "an empty request line")),
        Ok(line) => line,
        Err(bad) => return emit(&error(None, bad.message())),
    };
    let id = request_id(&line);
    let request: Request = match serde_json::from_str(&line) {
        Ok(request) => request,
        Err(err) => {
            let message = format!(
                "not a request ({err}); expected {{\"id\":…,\"send\":{{\"session_id\":…,\"message\":…}}}}, or \"session_ids\":[…] for several sessions"
            );
            return emit(&error(id.as_deref(), &message));
        }
    };
    let send = &request.send;
    let id = request.id.as_deref();
    match (&send.session_id, &send.session_ids) {
        (Some(target), None) => match sessions::session_id(ctx, target).map_err(Failure::from) {
            Ok(session_id) => {
                let result = mailbox.send(&session_id, &send.message, send.idle());
                emit(&Answer::of(&result).event(id, None))
            }
            Err(failure) => emit(&Answer::Failed(&failure).event(id, None)),
        },
        (None, Some(targets)) if !targets.is_empty() => {
            broadcast(mailbox, ctx, id, targets, send, signalled, emit)
        }
        (Some(_), Some(_)) => emit(&error(
            id,
            "a request names `session_id` or `session_ids`, not both; nothing was sent",
        )),
        (None, _) => emit(&error(
            id,
            "a request names its session with `session_id`, or several with a non-empty `session_ids`; nothing was sent",
        )),
    }
}

/// What one send, or one target of several, is answered.
enum Answer<'a> {
    Sent(&'a Delivered),
    Refused(&'a Refusal),
    Error(String),
    /// A target that names no session to send to.
    Failed(&'a Failure),
}

impl<'a> Answer<'a> {
    fn of(result: &'a Result<Delivered, claude_peer_sender::Error>) -> Self {
        match result {
            Ok(delivered) => Self::Sent(delivered),
            Err(err) => err
                .refusal()
                .map_or_else(|| Self::Error(err.to_string()), Self::Refused),
        }
    }

    fn event(&'a self, id: Option<&'a str>, target: Option<&'a str>) -> MailboxEventJson<'a> {
        match self {
            Self::Sent(delivered) => MailboxEventJson::Sent {
                id,
                target,
                msg_id: delivered.msg_id.as_deref(),
                session: Box::new(SessionJson::addressable(&delivered.session)),
            },
            Self::Refused(refusal) => MailboxEventJson::Refused {
                id,
                target,
                refusal: refusal.kind.as_str(),
                message: &refusal.message,
            },
            Self::Error(message) => MailboxEventJson::Error {
                id,
                target,
                message,
            },
            Self::Failed(failure) if failure.key == "refusal" => MailboxEventJson::Refused {
                id,
                target,
                refusal: failure.name,
                message: &failure.message,
            },
            Self::Failed(failure) => MailboxEventJson::Error {
                id,
                target,
                message: &failure.message,
            },
        }
    }
}

/// `session_ids`: resolved and ordered as `send` to several targets does
/// ([`Plan`]): a target that names no live session is refused at once, then each session
/// is sent to once, in the order of their pids, and answered for every target naming it.
fn broadcast(
    mailbox: &mut Mailbox,
    ctx: &Context,
    id: Option<&str>,
    targets: &[String],
    send: &Send,
    signalled: &dyn Fn() -> bool,
    mut emit: impl FnMut(&MailboxEventJson<'_>) -> io::Result<()>,
) -> io::Result<()> {
    let given = Targets {
        given: targets.to_vec(),
        ..Targets::default()
    };
    let plan = match Plan::new(ctx, &given).map_err(Failure::from) {
        Ok(plan) => plan,
        Err(failure) => return emit(&Answer::Failed(&failure).event(id, None)),
    };
    for (target, failure) in plan.refused() {
        emit(&Answer::Failed(&Failure::from(failure)).event(id, Some(target)))?;
    }
    let sessions: Vec<(&str, Vec<&str>)> = plan.sessions().collect();
    for (n, (session_id, named)) in sessions.iter().enumerate() {
        if signalled() {
            for target in sessions[n..].iter().flat_map(|(_, named)| named) {
                let cancelled = MailboxEventJson::Cancelled {
                    id,
                    target: Some(target),
                };
                emit(&cancelled)?;
            }
            return Ok(());
        }
        let result = mailbox.send(session_id, &send.message, send.idle());
        let answer = Answer::of(&result);
        for target in named {
            emit(&answer.event(id, Some(target)))?;
        }
    }
    Ok(())
}

fn emit(out: &mut impl Write, event: &impl Serialize) -> io::Result<()> {
    serde_json::to_writer(&mut *out, event)?;
    writeln!(out)?;
    out.flush()
}
