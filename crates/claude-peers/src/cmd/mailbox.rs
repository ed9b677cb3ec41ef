//! `mailbox`: one long-lived Claude Code sender over stdin and stdout as JSON lines,
//! for harnesses in any language. A request with `session_ids` is sent to each session
//! once, through the same sender, and answered with one event per target.

use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::thread;
use std::time::Duration;

use claude_peer_deliver::{Delivered, Refusal};
use claude_peer_guard::protocol::MAX_ESCAPED_MESSAGE_BYTES;
use claude_peer_post::DEFAULT_EXPIRY;
use claude_peer_probe::stream::{self, Line};
use claude_peer_sender::{Idle, MailboxEvent, MailboxHandle, Reply, Waiting};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::cmd::queue;
use crate::error::{Exit, Failure};
use crate::json::{MailboxEventJson, SessionJson};
use crate::ops::broadcast::{SendOrder, Targets};
use crate::ops::history::Journal;
use crate::ops::{Context, send, sessions};
use crate::output::{Format, Output};
use crate::signals;

/// The longest request line read: one message, JSON-escaped, with room.
const MAX_REQUEST_BYTES: usize = MAX_ESCAPED_MESSAGE_BYTES;

/// What reaches the main thread: request lines, the end of stdin, or a wake to look at
/// [`State`].
enum MainInput {
    Request(Result<String, BadLine>),
    End,
    Wake,
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
    /// Handed to the post office instead, which keeps it until its receiver can take it.
    #[serde(default)]
    queue: bool,
    /// With `queue`: how long it may wait, in seconds.
    expire_s: Option<u64>,
    /// With `queue`: its idempotency key.
    id: Option<String>,
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
    let (to_main, inputs) = mpsc::sync_channel(WAITING_REQUESTS);
    let state = Arc::new(State::default());
    // Watched before anything starts: a signal while the sender starts is not lost.
    {
        let (first, second) = (Arc::clone(&state), Arc::clone(&state));
        let to_main = to_main.clone();
        signals::watch(
            move |_| {
                first.signalled.store(true, Ordering::Release);
                wake(&to_main);
            },
            move || kill_group(second.sender.load(Ordering::Acquire)),
        )?;
    }
    let queue_as = QueueAs {
        from: from.clone(),
        claude: claude.clone(),
    };
    let (journal, unrecorded) = Journal::open(&from);
    if let Some(err) = unrecorded {
        Output::new(Format::Json).warn(&format!("the history is not kept: {err}"));
    }
    let relay = send::claude(claude, from, timeout)?;
    let mailbox = send::mailboxes(ctx, &relay)()?;
    state.sender.store(mailbox.pid(), Ordering::Release);
    let events = {
        let (state, to_main) = (Arc::clone(&state), to_main.clone());
        Arc::clone(&journal).events(move |event: MailboxEvent, logged| {
            let written = emit(&MailboxEventJson::heard(&event, logged.as_ref()));
            if matches!(event, MailboxEvent::Closed { .. }) {
                state.ended.store(true, Ordering::Release);
                wake(&to_main);
            }
            state.heard(&written, &to_main);
        })
    };
    let handle = MailboxHandle::spawn(Some(mailbox), None, events).map_err(|err| {
        Failure::error("mailbox_failed", format!("cannot start the mailbox: {err}"))
    })?;
    read_requests(to_main.clone());
    loop {
        if state.ended.load(Ordering::Acquire) {
            return Ok(Exit::Error);
        }
        if state.signalled.load(Ordering::Acquire) {
            return Ok(stop(&handle, &inputs));
        }
        if state.gone.load(Ordering::Acquire) {
            handle.close(Waiting::Cancel);
            return Ok(Exit::Success);
        }
        match inputs.recv() {
            Ok(MainInput::Request(line)) => {
                let answered = answer(&handle, &journal, ctx, &queue_as, line, &state, &to_main);
                state.heard(&answered, &to_main);
            }
            Ok(MainInput::Wake) => {}
            Ok(MainInput::End) | Err(_) => {
                handle.close(Waiting::Cancel);
                return Ok(Exit::Success);
            }
        }
    }
}

/// What the threads tell the main one besides requests.
#[derive(Debug, Default)]
struct State {
    /// The first stop signal came.
    signalled: AtomicBool,
    /// The mailbox's sender ended (its `closed` was written).
    ended: AtomicBool,
    /// Stdout's reader has gone.
    gone: AtomicBool,
    /// The sender's pid, once it started: its process group is killed at a second signal.
    sender: AtomicU32,
}

impl State {
    /// Notes a failed write: the reader has gone.
    fn heard(&self, written: &io::Result<()>, to_main: &SyncSender<MainInput>) {
        if written.is_err() {
            self.gone.store(true, Ordering::Release);
            wake(to_main);
        }
    }
}

/// Wakes the main thread to look at the [`State`], unless it has inputs to take anyway
/// (then it looks before the next).
fn wake(to_main: &SyncSender<MainInput>) {
    let _ = to_main.try_send(MainInput::Wake);
}

fn kill_group(sender: u32) {
    if let Some(group) = rustix::process::Pid::from_raw(sender.cast_signed()) {
        let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    }
}

/// How long after the last one a request already written to stdin is still taken, to be
/// answered `cancelled`, once a signal stopped the mailbox.
const CANCEL_GRACE: Duration = Duration::from_millis(200);

/// The first signal: nothing more is sent. Each request written but not sent (read now
/// or within [`CANCEL_GRACE`] of the last) is answered `cancelled`, then the mailbox
/// closes (`closed` last).
fn stop(handle: &MailboxHandle, inputs: &Receiver<MainInput>) -> Exit {
    loop {
        match inputs.recv_timeout(CANCEL_GRACE) {
            Ok(MainInput::Request(line)) => {
                let id = line.ok().and_then(|line| request_id(&line));
                let _ = emit(&MailboxEventJson::Cancelled {
                    id: id.as_deref(),
                    target: None,
                });
            }
            Ok(MainInput::Wake) => {}
            Ok(MainInput::End) | Err(_) => break,
        }
    }
    handle.close(Waiting::Cancel);
    Exit::Success
}

/// How many request lines wait, read but not yet sent, before stdin is read no further:
/// a flood of requests holds at most this many (each at most 1 MiB) in memory.
const WAITING_REQUESTS: usize = 64;

/// Reads request lines from stdin on a thread of its own, then tells the end of stdin.
fn read_requests(to_main: SyncSender<MainInput>) {
    thread::spawn(move || {
        let _ = stream::read_lines(io::stdin().lock(), MAX_REQUEST_BYTES, |line| {
            let request = match line {
                Line::Whole(bytes) => {
                    String::from_utf8(bytes.to_vec()).map_err(|_| BadLine::NotUtf8)
                }
                Line::Overlong => Err(BadLine::Overlong),
            };
            // Blocks while the queue is full: stdin is then read no further.
            if to_main.send(MainInput::Request(request)).is_err() {
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        });
        let _ = to_main.send(MainInput::End);
    });
}

/// The `id` of a request line, when it has one.
fn request_id(line: &str) -> Option<String> {
    serde_json::from_str::<Value>(line)
        .ok()?
        .get("id")?
        .as_str()
        .map(str::to_owned)
}

/// Answers one request line with its events, `sent`, `refused`, `error` or
/// `cancelled` (one per target of `session_ids`); an error is stdout's reader gone.
/// Targets not sent to yet when a signal came are `cancelled`.
fn answer(
    handle: &MailboxHandle,
    journal: &Arc<Journal>,
    ctx: &Context,
    queue_as: &QueueAs,
    line: Result<String, BadLine>,
    state: &Arc<State>,
    to_main: &SyncSender<MainInput>,
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
    if send.queue {
        return queued(ctx, queue_as, id, send);
    }
    if send.expire_s.is_some() || send.id.is_some() {
        return emit(&error(
            id,
            "`expire_s` and `id` go with `\"queue\":true`; nothing was sent",
        ));
    }
    let sends = Sends {
        handle,
        journal,
        state,
        to_main,
    };
    match (&send.session_id, &send.session_ids) {
        (Some(target), None) => match sessions::session_id(ctx, target) {
            Ok(session_id) => sends.send(&session_id, send, id, &[]),
            Err(err) => emit(&Answer::Failed(&Failure::from(err)).event(id, None)),
        },
        (None, Some(targets)) if !targets.is_empty() => broadcast(&sends, ctx, id, targets, send),
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

/// How a request with `"queue":true` is handed to the post office: under the mailbox's
/// sender name, a post office started with its Claude Code when none runs.
struct QueueAs {
    from: String,
    claude: Option<PathBuf>,
}

/// Hands the message of request `id` to the post office: a `queued` event for each
/// target (its `target` when there are several), or an `error` naming why not.
fn queued(ctx: &Context, queue_as: &QueueAs, id: Option<&str>, send: &Send) -> io::Result<()> {
    let targets = match (&send.session_id, &send.session_ids) {
        (Some(target), None) => vec![target.clone()],
        (None, Some(targets)) if !targets.is_empty() => targets.clone(),
        _ => {
            let message = "a request names its session with `session_id`, or several with a non-empty `session_ids`; nothing was queued";
            return emit(&MailboxEventJson::Error {
                id,
                target: None,
                message,
            });
        }
    };
    let several = targets.len() > 1;
    let order = queue::Order {
        targets,
        cwd: None,
        from: queue_as.from.clone(),
        text: send.message.clone(),
        expire: send.expire_s.map_or(DEFAULT_EXPIRY, Duration::from_secs),
        key: send.id.clone(),
        in_reply_to: None,
    };
    let results = match queue::post_all(ctx, &order, queue_as.claude.clone()) {
        Ok(results) => results,
        Err(failure) => {
            let message = format!("{}: {}", failure.name, failure.message);
            return emit(&MailboxEventJson::Error {
                id,
                target: None,
                message: &message,
            });
        }
    };
    for (target, result) in &results {
        let target = several.then_some(target.as_str());
        match result {
            Ok(record) => emit(&MailboxEventJson::Queued {
                id,
                target,
                post_id: &record.id,
                state: &record.state,
                reason: record.reason.as_deref(),
                expires_at_ms: record.expires_at_ms,
            })?,
            Err(failure) => {
                let message = format!("{}: {}", failure.name, failure.message);
                emit(&MailboxEventJson::Error {
                    id,
                    target,
                    message: &message,
                })?;
            }
        }
    }
    Ok(())
}

/// Sends through the mailbox service, as the main thread makes them: one at a time.
struct Sends<'a> {
    handle: &'a MailboxHandle,
    journal: &'a Arc<Journal>,
    state: &'a Arc<State>,
    to_main: &'a SyncSender<MainInput>,
}

impl Sends<'_> {
    /// Sends `send` to `session_id`, and waits until its answer (one per target of
    /// `targets`, or one without a target when there are none) is written: on the
    /// mailbox's thread, in its place among the events. Cancelled when a signal came
    /// before its turn.
    fn send(
        &self,
        session_id: &str,
        send: &Send,
        id: Option<&str>,
        targets: &[&str],
    ) -> io::Result<()> {
        let (done, answered) = mpsc::channel();
        let id = id.map(str::to_owned);
        let targets: Vec<String> = targets.iter().map(|&t| t.to_owned()).collect();
        let (state, to_main) = (Arc::clone(self.state), self.to_main.clone());
        let reply = move |reply: Reply| {
            let result = match reply {
                Reply::Sent(result) => Some(result),
                Reply::Cancelled => None,
            };
            let answer = result.as_ref().map_or(Answer::Cancelled, Answer::of);
            let written = if targets.is_empty() {
                emit(&answer.event(id.as_deref(), None))
            } else {
                targets
                    .iter()
                    .try_for_each(|target| emit(&answer.event(id.as_deref(), Some(target))))
            };
            state.heard(&written, &to_main);
            let _ = done.send(());
        };
        let signalled = Arc::clone(self.state);
        self.handle.send(
            self.journal
                .job(session_id.to_owned(), send.message.clone(), None, reply)
                .idle(send.idle())
                .cancelled_when(move || signalled.signalled.load(Ordering::Acquire)),
        );
        // Unanswered only when the mailbox ended meanwhile, which the main loop sees.
        let _ = answered.recv();
        if self.state.gone.load(Ordering::Acquire) {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        Ok(())
    }
}

/// What one send, or one target of several, is answered.
enum Answer<'a> {
    Sent(&'a Delivered),
    Refused(&'a Refusal),
    Error(String),
    /// A target that names no session to send to.
    Failed(&'a Failure),
    /// Not sent: a signal came first.
    Cancelled,
}

impl<'a> Answer<'a> {
    fn of(result: &'a Result<Box<Delivered>, claude_peer_sender::Error>) -> Self {
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
            Self::Cancelled => MailboxEventJson::Cancelled { id, target },
        }
    }
}

/// `session_ids`: resolved and ordered as `send` to several targets does
/// ([`SendOrder`]): a target that names no live session is refused at once, then each session
/// is sent to once, in the order of their pids, and answered for every target naming it.
fn broadcast(
    sends: &Sends<'_>,
    ctx: &Context,
    id: Option<&str>,
    targets: &[String],
    send: &Send,
) -> io::Result<()> {
    let given = Targets {
        given: targets.to_vec(),
        ..Targets::default()
    };
    let order = match SendOrder::new(ctx, &given).map_err(Failure::from) {
        Ok(order) => order,
        Err(failure) => return emit(&Answer::Failed(&failure).event(id, None)),
    };
    for (target, failure) in order.refused() {
        emit(&Answer::Failed(&Failure::from(failure)).event(id, Some(target)))?;
    }
    for (session_id, named) in order.sessions() {
        sends.send(session_id, send, id, &named)?;
    }
    Ok(())
}

/// Writes one JSON line to stdout, whole: the main thread and the mailbox's write them.
fn emit(event: &impl Serialize) -> io::Result<()> {
    let mut out = io::stdout().lock();
    serde_json::to_writer(&mut out, event)?;
    writeln!(out)?;
    out.flush()
}
