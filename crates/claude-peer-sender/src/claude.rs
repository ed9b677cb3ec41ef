//! The built-in relay: one send by a headless Claude Code with its own `SendMessage`,
//! its model replaced by this project's scripted endpoint.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use claude_peer_resolve::RefusalKind;

use crate::hook;
use crate::sender::{Idle, Sender, SenderOptions};
use crate::stream::Line;
use claude_peer_deliver::{Confirmation, Outcome, Relay, RelayFailure, Target};

/// How long after the tool result a receiver's hold or refuse notice is waited for: 2 s.
/// Claude Code sends it 0.3–0.6 s after the message arrives; a sender that exits sooner
/// would report a held message as accepted.
pub const DEFAULT_RECEIPT_WINDOW: Duration = Duration::from_secs(2);

/// A relay that sends through Claude Code's own `SendMessage`.
///
/// It runs the user's `claude` headless (`-p`, stream-json in and out) in a private
/// Claude home of this project ([`crate::default_sender_home`]), its model a scripted
/// endpoint on 127.0.0.1 that answers "call `SendMessage` with exactly this" (no
/// language model, no API key, no request leaves the machine). Two hooks guard it: the
/// one planned call is allowed only while the target still runs the same session, and
/// inbound items never reach the model. After the tool result, it stays through the
/// receipt window: a hold or refusal notice comes back from the receiver, no notice
/// means accepted.
#[derive(Debug, Clone)]
pub struct ClaudeRelay {
    pub(crate) options: SenderOptions,
    pub(crate) timeout: Duration,
    pub(crate) receipt_window: Duration,
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

    /// Kills the sender when a send is not settled `timeout` after it started.
    #[must_use]
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How long a notice from the receiver is waited for after the tool result.
    #[must_use]
    pub const fn receipt_window(mut self, window: Duration) -> Self {
        self.receipt_window = window;
        self
    }
}

impl Relay for ClaudeRelay {
    fn send(&self, target: &Target, message: &str) -> Result<Confirmation, RelayFailure> {
        let deadline = Instant::now() + self.timeout;
        let mut sender =
            Sender::start(&self.options).map_err(|err| RelayFailure::new(err.to_string()))?;
        let result = send_once(&mut sender, target, message, deadline, self.receipt_window);
        sender.close(deadline);
        result.map_err(|failure| match failure.kind() {
            RefusalKind::DeliveryFailed => {
                RelayFailure::new(format!("{}{}", failure.message(), sender.stderr_note()))
            }
            _ => failure,
        })
    }
}

fn send_once(
    sender: &mut Sender,
    target: &Target,
    message: &str,
    deadline: Instant,
    window: Duration,
) -> Result<Confirmation, RelayFailure> {
    let ids = sender
        .request(target, message, Idle::Ignore)
        .map_err(|err| RelayFailure::new(err.to_string()))?;
    let msg_id = await_result(sender, &ids.send, deadline, TurnEnd::Fails, |_| {})?;
    let recipient = format!("uds:{}", target.socket.display());
    let until = (Instant::now() + window).min(deadline);
    loop {
        let left = until.saturating_duration_since(Instant::now());
        match sender.lines.recv_timeout(left) {
            Ok(Line::Tally(tally)) if tally.recipient == recipient => {
                return settle(tally.outcome, msg_id);
            }
            // No notice within the window: the receiver took it.
            Err(RecvTimeoutError::Timeout) => return Ok(confirmation(Outcome::Accepted, msg_id)),
            // Sent, but the sender ended before it could hear back: what the receiver
            // did is unknown.
            Ok(Line::Closed) | Err(RecvTimeoutError::Disconnected) => {
                return Ok(Confirmation {
                    msg_id,
                    ..Confirmation::default()
                });
            }
            Ok(_) => {}
        }
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
            Line::ToolResult {
                tool_use_id,
                success,
                msg_id,
                text,
            } if tool_use_id == id => {
                if success {
                    return Ok(msg_id);
                }
                return Err(hook::read_refusal(sender.plans(), id).map_or_else(
                    || RelayFailure::new(format!("Claude Code's SendMessage failed: {text}")),
                    |refusal| RelayFailure::refused(refusal.kind, refusal.message),
                ));
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
            line => other(line),
        }
    }
}

/// What a receiver's notice about the one message sent means for the send.
fn settle(outcome: Outcome, msg_id: Option<String>) -> Result<Confirmation, RelayFailure> {
    let id = msg_id.as_deref().unwrap_or("unknown");
    match outcome {
        Outcome::Refused | Outcome::Denied => Err(RelayFailure::refused(
            RefusalKind::InboundRefused,
            format!(
                "the receiving session {} the message (msg_id {id}); it was not delivered",
                outcome.as_str()
            ),
        )),
        Outcome::Expired => Err(RelayFailure::new(format!(
            "the message (msg_id {id}) expired unapproved at the receiving session"
        ))),
        outcome => Ok(confirmation(outcome, msg_id)),
    }
}

fn confirmation(outcome: Outcome, msg_id: Option<String>) -> Confirmation {
    Confirmation {
        detail: None,
        receipt: Some(outcome),
        msg_id,
    }
}
