//! The built-in relay: one send by a headless Claude Code with its own `SendMessage`,
//! its model replaced by this project's scripted endpoint.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use claude_peer_resolve::RefusalKind;

use crate::sender::{Idle, JobIds, Sender, SenderOptions};
use crate::stream::{Line, Queued};
use crate::witness::{Heard, Witness};
use crate::{Cancel, Error, hook};
use claude_peer_deliver::{Basis, Confirmation, Outcome, Receipt, Relay, RelayFailure, Target};
use claude_peer_transcript::Fact;

/// How long after the tool result any word from the receiver is waited for (a line of its
/// transcript, a hold or refuse notice) before the receipt rests on silence: 2 s. Its
/// transcript says within milliseconds; a notice comes 0.3–0.6 s after the message.
pub const DEFAULT_RECEIPT_WINDOW: Duration = Duration::from_secs(2);
/// How long a message seen queued (its receiver is busy) is waited for to be read before
/// the send returns `queued`: 2 s.
pub const DEFAULT_READ_WAIT: Duration = Duration::from_secs(2);

/// A relay that sends through Claude Code's own `SendMessage`.
///
/// It runs the user's `claude` headless (`-p`, stream-json in and out) in a private
/// Claude home of this project ([`crate::default_sender_home`]), its model a scripted
/// endpoint on 127.0.0.1 that answers "call `SendMessage` with exactly this" (no
/// language model, no API key, no request leaves the machine). Two hooks guard it: the
/// one planned call is allowed only while the target still runs the same session, and
/// inbound items never reach the model. What the receiver did is read from its own
/// transcript, followed from the moment of the send: `read` (its model got the message),
/// `queued` (it is busy and will read it after its turn), `held`; or from its notice
/// (`held`, a refusal); `accepted` on silence only when neither says anything within the
/// receipt window.
#[derive(Debug, Clone)]
pub struct ClaudeRelay {
    pub(crate) options: SenderOptions,
    pub(crate) timeout: Duration,
    pub(crate) receipt_window: Duration,
    pub(crate) read_wait: Duration,
    cancel: Option<Cancel>,
}

impl ClaudeRelay {
    /// A relay running the Claude Code at `claude`, with hooks run as the program and
    /// arguments in `hook` followed by the hook's own arguments (for example
    /// `["/usr/local/bin/claude-peers", "hook"]`; see [`crate::hook::run`]).
    pub fn new(claude: impl Into<PathBuf>, hook: Vec<OsString>) -> Self {
        Self {
            options: SenderOptions::new(claude.into(), hook),
            timeout: claude_peer_deliver::DEFAULT_TIMEOUT,
            receipt_window: DEFAULT_RECEIPT_WINDOW,
            read_wait: DEFAULT_READ_WAIT,
            cancel: None,
        }
    }

    /// The sender's name, which the receiver sees (`Message from @<name>`).
    #[must_use]
    pub fn from(mut self, name: impl Into<String>) -> Self {
        self.options.from = name.into();
        self
    }

    /// The sender's private Claude home [default: [`crate::default_sender_home`]].
    #[must_use]
    pub fn home(mut self, dir: impl Into<PathBuf>) -> Self {
        self.options.home = Some(dir.into());
        self
    }

    /// The machine's managed settings, whose hook switches stop every send before a
    /// sender starts [default: `/etc/claude-code/managed-settings.json`].
    #[must_use]
    pub fn managed_settings(mut self, path: impl Into<PathBuf>) -> Self {
        self.options.managed_settings = path.into();
        self
    }

    /// Whether a send could start: the sender's name can be shown, and no managed
    /// setting keeps the hooks that guard it from running. Every send checks this
    /// first; call it to refuse before anything else is done.
    pub fn check(&self) -> Result<(), Error> {
        self.options.check()
    }

    /// Kills the sender when a send is not settled `timeout` after it started.
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long any word from the receiver is waited for after the tool result.
    #[must_use]
    pub const fn receipt_window(mut self, window: Duration) -> Self {
        self.receipt_window = window;
        self
    }

    /// Sends stop when `cancel` is cancelled: one whose hand-over has not started is not
    /// made; one under way has its sender killed and reaped and its plans removed.
    #[must_use]
    pub fn cancel_with(mut self, cancel: Cancel) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// How long a queued message is waited for to be read; zero returns at `queued`.
    #[must_use]
    pub const fn read_wait(mut self, wait: Duration) -> Self {
        self.read_wait = wait;
        self
    }
}

/// What a Claude Code says it can do, in the `init` line of a turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// Its version, as it reports it.
    pub version: Option<String>,
    /// Whether `SendMessage` is among its tools.
    pub send_message: bool,
    /// Its own messaging socket: present only when it can message other sessions.
    pub messaging_socket: Option<PathBuf>,
}

impl ClaudeRelay {
    /// Starts this relay's sender once, as a send would (the private home, the scripted
    /// model, the hooks, the environment), and reads what the `init` line of its first
    /// turn says it can do; nothing is sent. Probed rather than guessed from a version:
    /// builds with the messaging code may still open no socket.
    pub fn probe(&self) -> Result<Capabilities, Error> {
        let deadline = Instant::now() + self.timeout;
        let mut sender = Sender::start(&self.options)?;
        sender.prompt(&format!("{}probe", hook::PROMPT_PREFIX))?;
        let found = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match sender.lines.recv_timeout(left) {
                Ok(Line::Init {
                    version,
                    send_message,
                    messaging_socket,
                }) => {
                    break Ok(Capabilities {
                        version,
                        send_message,
                        messaging_socket: messaging_socket.map(PathBuf::from),
                    });
                }
                Ok(Line::Closed) | Err(RecvTimeoutError::Disconnected) => {
                    let status = sender.wait_exit(Duration::from_secs(1));
                    break Err(Error::NoTurn(format!(
                        "it ended ({status}){}",
                        sender.stderr_note()
                    )));
                }
                Err(RecvTimeoutError::Timeout) => {
                    break Err(Error::NoTurn(format!(
                        "none within {} s{}",
                        self.timeout.as_secs(),
                        sender.stderr_note()
                    )));
                }
                Ok(_) => {}
            }
        };
        sender.close(deadline);
        found
    }
}

impl Relay for ClaudeRelay {
    fn send(&self, target: &Target, message: &str) -> Result<Confirmation, RelayFailure> {
        let deadline = Instant::now() + self.timeout;
        let cancelled =
            || RelayFailure::new("the send was cancelled before it started; nothing was sent");
        if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return Err(cancelled());
        }
        let mut sender =
            Sender::start(&self.options).map_err(|err| RelayFailure::new(err.to_string()))?;
        let running = match &self.cancel {
            Some(cancel) => match cancel.register(sender.wake.clone()) {
                Some(running) => Some(running),
                None => return Err(cancelled()),
            },
            None => None,
        };
        let waits = Waits {
            window: self.receipt_window,
            read: self.read_wait,
        };
        let result = send_once(&mut sender, target, message, deadline, waits);
        if self.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            sender.kill();
        } else {
            sender.close(deadline);
        }
        let result = result.map_err(|failure| match failure.kind() {
            RefusalKind::DeliveryFailed => {
                RelayFailure::new(format!("{}{}", failure.message(), sender.stderr_note()))
            }
            _ => failure,
        });
        // Reaped, and its plans removed, before the cancel hears it has ended.
        drop(sender);
        drop(running);
        result
    }
}

fn send_once(
    sender: &mut Sender,
    target: &Target,
    message: &str,
    deadline: Instant,
    waits: Waits,
) -> Result<Confirmation, RelayFailure> {
    // From the transcript's end as it is before the send: nothing earlier counts.
    let _witness = Witness::start(&target.home, &target.session_id, sender.wake.clone());
    let ids = sender
        .request(target, message, Idle::Ignore)
        .map_err(|err| RelayFailure::new(err.to_string()))?;
    let mut early = Vec::new();
    let msg_id = await_sent(sender, &ids, deadline, TurnEnd::Fails, |line| {
        early.push(line);
    })?;
    let sent = Sent {
        msg_id: msg_id.as_deref(),
        from: sender.socket().map(|socket| format!("uds:{socket}")),
        recipient: format!("uds:{}", target.socket.display()),
        message,
    };
    let mut decision = Decision::new(waits, deadline);
    let mut lines = early.into_iter();
    loop {
        let line = match lines.next() {
            Some(line) => Ok(line),
            None => sender
                .lines
                .recv_timeout(decision.until().saturating_duration_since(Instant::now())),
        };
        let decided = match line {
            // Sent; cancelled before the receiver's word came: what it did is unknown.
            Ok(Line::Cancelled) => {
                return Ok(Confirmation {
                    detail: Some("cancelled before the receipt was decided".to_owned()),
                    receipt: None,
                    msg_id,
                });
            }
            Ok(Line::Closed) | Err(RecvTimeoutError::Disconnected) => {
                // Sent, but the sender ended before it could hear back.
                Some(decision.ended())
            }
            Ok(line) => decision.hear(&sent, line),
            Err(RecvTimeoutError::Timeout) => decision.waited(Instant::now()),
        };
        if let Some(receipt) = decided {
            return settle(receipt, msg_id);
        }
    }
}

/// How long a one-shot send waits for the receiver's word.
#[derive(Debug, Clone, Copy)]
struct Waits {
    /// For anything at all (a transcript line, a notice) before the receipt rests on
    /// silence.
    window: Duration,
    /// For `read` once the message is known to be queued.
    read: Duration,
}

/// What was sent, to recognise it in the receiver's transcript and notices.
struct Sent<'a> {
    msg_id: Option<&'a str>,
    /// The sender's own address, `uds:<socket>`, as the receiver names it.
    from: Option<String>,
    /// The receiver's address, as notices name it.
    recipient: String,
    message: &'a str,
}

impl Sent<'_> {
    fn is_from_us(&self, from: &str) -> bool {
        self.from.as_deref() == Some(from)
    }
}

/// The receipt of one send, decided from what is heard, or from silence.
#[derive(Debug)]
struct Decision {
    waits: Waits,
    deadline: Instant,
    /// When the window for any word ends.
    silent_after: Instant,
    /// When the message was seen queued: from then on only `read` is waited for.
    queued_at: Option<Instant>,
}

impl Decision {
    fn new(waits: Waits, deadline: Instant) -> Self {
        Self {
            waits,
            deadline,
            silent_after: Instant::now() + waits.window,
            queued_at: None,
        }
    }

    /// When the next wait ends.
    fn until(&self) -> Instant {
        let until = match self.queued_at {
            Some(at) => at + self.waits.read,
            None => self.silent_after,
        };
        until.min(self.deadline)
    }

    fn hear(&mut self, sent: &Sent<'_>, line: Line) -> Option<Receipt> {
        let transcript = |outcome| Receipt {
            outcome,
            basis: Basis::Transcript,
        };
        match line {
            Line::Tally(tally) if tally.recipient == sent.recipient => Some(Receipt {
                outcome: tally.outcome,
                basis: Basis::Notice,
            }),
            Line::Transcript {
                heard: Heard::Fact(fact),
                ..
            } => match fact {
                Fact::Read { msg_id, .. } if Some(msg_id.as_str()) == sent.msg_id => {
                    Some(transcript(Outcome::Read))
                }
                Fact::Held { from, .. } if sent.is_from_us(&from) => {
                    Some(transcript(Outcome::Held))
                }
                Fact::Queued { from, text } if sent.is_from_us(&from) && text == sent.message => {
                    self.queued_at.get_or_insert_with(Instant::now);
                    self.waited(Instant::now())
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// What the time alone decides: `queued` once the wait for `read` is over, else
    /// `accepted` on silence once the window is.
    fn waited(&self, now: Instant) -> Option<Receipt> {
        if now < self.until() {
            return None;
        }
        Some(match self.queued_at {
            Some(_) => Receipt {
                outcome: Outcome::Queued,
                basis: Basis::Transcript,
            },
            None => Receipt {
                outcome: Outcome::Accepted,
                basis: Basis::Silence,
            },
        })
    }

    /// The sender ended: what the transcript said so far, else nothing.
    fn ended(&self) -> Receipt {
        self.queued_at.map_or(
            Receipt {
                outcome: Outcome::Accepted,
                basis: Basis::Silence,
            },
            |_| Receipt {
                outcome: Outcome::Queued,
                basis: Basis::Transcript,
            },
        )
    }
}

/// What the end of a turn before the awaited call means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TurnEnd {
    /// The send failed: a sender that serves one send has nothing else to do.
    Fails,
    /// Nothing: a mailbox's sender ends turns of other sends meanwhile.
    Continues,
}

/// Follows the sender's stream through a job's canary to the tool result of its send,
/// handing every other line to `other`: the `msg_id` on success. Nothing is sent unless
/// the guard proved it runs by blocking the canary ([`hook::canary_blocked`], the same
/// fact the scripted model goes by); without that proof, `delivery_failed` says why.
pub(crate) fn await_sent(
    sender: &mut Sender,
    ids: &JobIds,
    deadline: Instant,
    turn_end: TurnEnd,
    mut other: impl FnMut(Line),
) -> Result<Option<String>, RelayFailure> {
    let canary = await_call(sender, &ids.canary, deadline, turn_end, &mut other)?;
    if !hook::canary_blocked(sender.plans(), &ids.canary) {
        return Err(RelayFailure::new(format!(
            "the sender's guard hook did not run (hooks switched off by managed settings, or the hook program cannot start), so nothing was sent; its check call ended: {}",
            canary.text
        )));
    }
    await_result(sender, &ids.send, deadline, turn_end, other)
}

/// Follows the sender's stream until the tool result of `id`, handing every other line
/// to `other`; the `msg_id` on success. A failed call is the hook's refusal when it
/// noted one, else `delivery_failed` in Claude Code's words.
pub(crate) fn await_result(
    sender: &mut Sender,
    id: &str,
    deadline: Instant,
    turn_end: TurnEnd,
    mut other: impl FnMut(Line),
) -> Result<Option<String>, RelayFailure> {
    let called = await_call(sender, id, deadline, turn_end, &mut other)?;
    if called.success {
        return Ok(called.msg_id);
    }
    Err(hook::read_refusal(sender.plans(), id).map_or_else(
        || RelayFailure::new(format!("Claude Code's SendMessage failed: {}", called.text)),
        |refusal| RelayFailure::refused(refusal.kind, refusal.message),
    ))
}

/// What became of one tool call, as its tool result says.
struct Called {
    success: bool,
    msg_id: Option<String>,
    text: String,
}

/// Follows the sender's stream until the tool result of `id`, handing every other line
/// to `other`.
fn await_call(
    sender: &mut Sender,
    id: &str,
    deadline: Instant,
    turn_end: TurnEnd,
    other: &mut impl FnMut(Line),
) -> Result<Called, RelayFailure> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match sender.lines.recv_timeout(left) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                sender.kill();
                return Err(RelayFailure::new(
                    "Claude Code did not settle the send within the timeout; it was killed",
                ));
            }
            Err(RecvTimeoutError::Disconnected) => Line::Closed,
        };
        match line {
            Line::Init {
                version,
                send_message,
                messaging_socket,
            } if !send_message || messaging_socket.is_none() => {
                let version = version.unwrap_or_else(|| "of unknown version".to_owned());
                let lacks = if send_message {
                    "no messaging socket"
                } else {
                    "no SendMessage tool"
                };
                return Err(RelayFailure::new(format!(
                    "this Claude Code ({version}) cannot send cross-session messages: it reports {lacks}"
                )));
            }
            Line::Init {
                messaging_socket: Some(socket),
                ..
            } => sender.set_socket(socket),
            Line::ToolResult {
                tool_use_id,
                success,
                msg_id,
                text,
            } if tool_use_id == id => {
                return Ok(Called {
                    success,
                    msg_id,
                    text,
                });
            }
            Line::Result if turn_end == TurnEnd::Fails => {
                return Err(RelayFailure::new(
                    "Claude Code ended its turn without making the planned SendMessage",
                ));
            }
            Line::Closed => {
                let status = sender.wait_exit(Duration::from_secs(1));
                return Err(RelayFailure::new(format!(
                    "Claude Code ended before the send was settled ({status})"
                )));
            }
            // The prompt hook lets every prompt of this project's own through: one
            // blocked alone means the hook program failed, and `|| exit 2` made it block.
            Line::Queued(items)
                if !items.is_empty()
                    && items.iter().all(|item| matches!(item, Queued::Ours(_))) =>
            {
                return Err(RelayFailure::new(
                    "the sender's prompt hook blocked this project's own send prompt: the hook program cannot run (was it moved or removed?), so nothing was sent",
                ));
            }
            Line::Queued(_) => {
                sender.ask_again(&line);
                other(line);
            }
            Line::Cancelled => {
                sender.kill();
                return Err(RelayFailure::new(
                    "the send was cancelled before Claude Code reported it sent",
                ));
            }
            line => other(line),
        }
    }
}

/// What the receipt of the one message sent means for the send.
fn settle(receipt: Receipt, msg_id: Option<String>) -> Result<Confirmation, RelayFailure> {
    let id = msg_id.as_deref().unwrap_or("unknown");
    match receipt.outcome {
        Outcome::Refused | Outcome::Denied => Err(RelayFailure::refused(
            RefusalKind::InboundRefused,
            format!(
                "the receiving session {} the message (msg_id {id}); it was not delivered",
                receipt.outcome.as_str()
            ),
        )),
        Outcome::Expired => Err(RelayFailure::new(format!(
            "the message (msg_id {id}) expired unapproved at the receiving session"
        ))),
        _ => Ok(Confirmation {
            detail: None,
            receipt: Some(receipt),
            msg_id,
        }),
    }
}
