//! The built-in relay: one send by a headless Claude Code with its own `SendMessage`,
//! its model replaced by this project's scripted endpoint; and a batch of such sends
//! through one sender.

mod awaiting;
mod receipt;

use std::cell::RefCell;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use claude_peer_deliver::{Confirmation, Recipient, Relay, RelayFailure};

use crate::cancel::Running;
use crate::channel::Line;
use crate::headless::{HeadlessClaude, HeadlessOptions};
use crate::stream::Printed;
use crate::{Cancel, Error};
use claude_peer_guard::protocol;

use crate::decider::Waits;
pub(crate) use awaiting::{TurnEnd, await_result, await_sent};
use receipt::send_once;

/// How long after the tool result any word from the receiver is waited for (a line of its
/// transcript, a hold or refuse notice) before the receipt rests on silence: 2 s. Its
/// transcript says within milliseconds; a notice comes 0.3–0.6 s after the message.
pub const DEFAULT_RECEIPT_WINDOW: Duration = Duration::from_secs(2);
/// How long a message seen queued (its receiver is busy) is waited for to be read before
/// the send returns `queued`: 2 s.
pub const DEFAULT_READ_WAIT: Duration = Duration::from_secs(2);

/// How often a receiver takes one more message from a sender that used up its burst: a
/// receiver keeps a token bucket per sender (30 at once, then 0.5 a second, in 2.1.332).
pub const RECEIVER_PACE: Duration = Duration::from_secs(2);

/// Whether a failed send's words are a receiver's rate limit ("Too many messages to this
/// session just now"): the message was not sent, and one more is taken after
/// [`RECEIVER_PACE`]. A pace, not a fault: nothing to back off from.
#[must_use]
pub fn paced_by_receiver(message: &str) -> bool {
    message.contains("Too many messages to this session just now")
}

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
    pub(crate) options: HeadlessOptions,
    pub(crate) timeout: Duration,
    pub(crate) receipt_window: Duration,
    pub(crate) read_wait: Duration,
    cancel: Option<Cancel>,
}

impl ClaudeRelay {
    /// A relay running the Claude Code at `claude`, with hooks run as the program and
    /// arguments in `hook` followed by the hook's own arguments (for example
    /// `["/usr/local/bin/claude-peers", "hook"]`; see [`claude_peer_guard::run`]).
    pub fn new(claude: impl Into<PathBuf>, hook: Vec<OsString>) -> Self {
        Self {
            options: HeadlessOptions::new(claude.into(), hook),
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
        let mut sender = HeadlessClaude::start(&self.options)?;
        sender.prompt(&format!("{}probe", protocol::PROMPT_PREFIX))?;
        let found = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match sender.lines.recv_timeout(left) {
                Ok(Line::Printed(Printed::Init {
                    version,
                    send_message,
                    messaging_socket,
                })) => {
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
    fn send(&self, target: &Recipient, message: &str) -> Result<Confirmation, RelayFailure> {
        // A batch of one, whose sender serves nothing else: the end of its turn without
        // the call is a failure at once.
        self.batch_with(TurnEnd::Fails).send(target, message)
    }
}

impl ClaudeRelay {
    /// A relay that sends any number of messages, one after the other, through one
    /// sender of this relay's, started at the first send and stopped when the batch is
    /// dropped: a broadcast pays for one Claude Code start, not one per receiver. Each
    /// send still goes through the gate, the guard and its own receipt.
    #[must_use]
    pub fn batch(&self) -> Batch<'_> {
        self.batch_with(TurnEnd::Continues)
    }

    fn batch_with(&self, turn_end: TurnEnd) -> Batch<'_> {
        Batch {
            relay: self,
            turn_end,
            running: RefCell::new(None),
        }
    }
}

/// Sends through one sender, one message after another; see [`ClaudeRelay::batch`].
#[derive(Debug)]
pub struct Batch<'a> {
    relay: &'a ClaudeRelay,
    /// What the end of a turn before the awaited call means: a batch's later sends can
    /// see the end of an earlier send's turn.
    turn_end: TurnEnd,
    running: RefCell<Option<(HeadlessClaude, Option<Running>)>>,
}

impl Relay for Batch<'_> {
    fn send(&self, target: &Recipient, message: &str) -> Result<Confirmation, RelayFailure> {
        let relay = self.relay;
        let deadline = Instant::now() + relay.timeout;
        let cancelled =
            || RelayFailure::new("the send was cancelled before it started; nothing was sent");
        if relay.cancel.as_ref().is_some_and(Cancel::is_cancelled) {
            return Err(cancelled());
        }
        let mut running = self.running.borrow_mut();
        if running.is_none() {
            let sender = HeadlessClaude::start(&relay.options)
                .map_err(|err| RelayFailure::new(err.to_string()))?;
            let registered = match &relay.cancel {
                Some(cancel) => match cancel.register(sender.wake.clone()) {
                    Some(registered) => Some(registered),
                    None => return Err(cancelled()),
                },
                None => None,
            };
            *running = Some((sender, registered));
        }
        let Some((sender, _)) = running.as_mut() else {
            return Err(cancelled());
        };
        let waits = Waits {
            window: relay.receipt_window,
            read: relay.read_wait,
        };
        let result = send_once(sender, target, message, deadline, waits, self.turn_end);
        let cancelled = relay.cancel.as_ref().is_some_and(Cancel::is_cancelled);
        // A sender that failed a send, or was stopped, serves no more: the next send of
        // the batch starts a new one.
        if (result.is_err() || cancelled)
            && let Some((mut sender, registered)) = running.take()
        {
            if cancelled {
                sender.kill();
            } else {
                sender.close(deadline);
            }
            // Reaped, and its plans removed, before the cancel hears it has ended.
            drop(sender);
            drop(registered);
        }
        result
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        if let Some((mut sender, registered)) = self.running.get_mut().take() {
            sender.close(Instant::now() + self.relay.timeout);
            drop(sender);
            drop(registered);
        }
    }
}
