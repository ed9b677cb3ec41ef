//! Following a sender's stream to the result of one planned call, through the canary
//! that proves its guard runs.

use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use claude_peer_deliver::RelayFailure;
use claude_peer_guard::{canary_blocked, read_refusal};

use crate::channel::Line;
use crate::headless::{HeadlessClaude, JobIds};
use crate::stream::{Printed, Queued};

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
/// the guard proved it runs by blocking the canary ([`canary_blocked`], the same
/// fact the scripted model goes by); without that proof, `delivery_failed` says why.
pub(crate) fn await_sent(
    sender: &mut HeadlessClaude,
    ids: &JobIds,
    deadline: Instant,
    turn_end: TurnEnd,
    mut other: impl FnMut(Line),
) -> Result<Option<String>, RelayFailure> {
    let canary = await_call(sender, &ids.canary, deadline, turn_end, &mut other)?;
    if !canary_blocked(sender.plans(), &ids.canary) {
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
    sender: &mut HeadlessClaude,
    id: &str,
    deadline: Instant,
    turn_end: TurnEnd,
    mut other: impl FnMut(Line),
) -> Result<Option<String>, RelayFailure> {
    let called = await_call(sender, id, deadline, turn_end, &mut other)?;
    if called.success {
        return Ok(called.msg_id);
    }
    Err(read_refusal(sender.plans(), id).map_or_else(
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
    sender: &mut HeadlessClaude,
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
                return Err(RelayFailure::uncertain(format!(
                    "Claude Code did not settle the send within the timeout; it was killed{}",
                    sender.stderr_note()
                )));
            }
            Err(RecvTimeoutError::Disconnected) => Line::Closed,
        };
        match line {
            Line::Printed(Printed::Init {
                version,
                send_message,
                messaging_socket,
            }) if !send_message || messaging_socket.is_none() => {
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
            Line::Printed(Printed::Init {
                messaging_socket: Some(socket),
                ..
            }) => sender.set_socket(socket),
            Line::Printed(Printed::ToolResult {
                tool_use_id,
                success,
                msg_id,
                text,
            }) if tool_use_id == id => {
                return Ok(Called {
                    success,
                    msg_id,
                    text,
                });
            }
            Line::Printed(Printed::Result) if turn_end == TurnEnd::Fails => {
                return Err(RelayFailure::new(
                    "Claude Code ended its turn without making the planned SendMessage",
                ));
            }
            Line::Closed => {
                let status = sender.wait_exit(Duration::from_secs(1));
                return Err(RelayFailure::uncertain(format!(
                    "Claude Code ended before the send was settled ({status}){}",
                    sender.stderr_note()
                )));
            }
            // The prompt hook lets every prompt of this project's own through: one
            // blocked alone means the hook program failed, and `|| exit 2` made it block.
            Line::Printed(Printed::Queued(items))
                if !items.is_empty()
                    && items.iter().all(|item| matches!(item, Queued::Ours(_))) =>
            {
                return Err(RelayFailure::new(
                    "the sender's prompt hook blocked this project's own send prompt: the hook program cannot run (was it moved or removed?), so nothing was sent",
                ));
            }
            Line::Printed(Printed::Queued(_)) => {
                sender.ask_again(&line);
                other(line);
            }
            Line::Cancelled => {
                sender.kill();
                return Err(RelayFailure::uncertain(
                    "the send was cancelled before Claude Code reported it sent",
                ));
            }
            line => other(line),
        }
    }
}
