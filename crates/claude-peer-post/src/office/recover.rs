//! Settling what a killed post office left `sending`: its sender stopped, then the
//! receiver's transcript read for the message.

use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Outcome, Receipt};
use claude_peer_probe::{OsProcessTable, ProcessTable};
use claude_peer_registry::{ClaudeHome, Pid};
use claude_peer_transcript::{Fact, Follower};

use crate::{Error, Message, SenderProcess, Step, Store};

/// How long recovery waits for a killed post office's sender to be gone.
const SENDER_GONE_WAIT: Duration = Duration::from_secs(5);

/// What became of `message`, left `sending` by a post office that stopped: see
/// [`PostOffice::recover`].
pub(super) fn reconcile(
    store: &Store,
    home: &ClaudeHome,
    message: &Message,
) -> Result<Step, Error> {
    let unknown = |why: String| {
        Step::Unknown(format!(
            "the post office stopped during its attempt, and {why}: whether Claude Code took it is not known"
        ))
    };
    let Some(attempt) = &message.attempt else {
        return Ok(unknown("the attempt was not recorded".to_owned()));
    };
    let (Some(sender), Some(len)) = (&attempt.sender, attempt.transcript_len) else {
        return Ok(unknown(
            "its sender or its receiver's transcript was not known before it".to_owned(),
        ));
    };
    if !stop(sender) {
        return Ok(unknown(format!(
            "its sender (process group {}) is still running",
            sender.pid
        )));
    }
    let facts = match facts_since(home, &attempt.session_id, len) {
        Ok(facts) => facts,
        Err(err) => {
            return Ok(unknown(format!(
                "its receiver's transcript cannot be read: {err}"
            )));
        }
    };
    // Ours: our sender name and the exact text (from our sender's address, when it was
    // known); then the first read from that address of a message the store does not
    // know (its messages before this one have their msg_ids).
    let mut address = sender.address.clone();
    let mut receipt = None;
    let mut msg_id = None;
    for fact in facts {
        match fact {
            Fact::Queued {
                from,
                from_name,
                text,
            } if receipt.is_none()
                && from_name.as_deref() == Some(message.from.as_str())
                && text == message.text
                && address.as_ref().is_none_or(|ours| *ours == from) =>
            {
                receipt = Some(Outcome::Queued);
                address = Some(from);
            }
            Fact::Read { msg_id: id, from }
                if receipt == Some(Outcome::Queued)
                    && msg_id.is_none()
                    && from.is_some()
                    && from == address
                    && store.by_msg_id(&id)?.is_none() =>
            {
                msg_id = Some(id);
                receipt = Some(Outcome::Read);
            }
            Fact::Held { from, preview }
                if receipt.is_none() && message.text.starts_with(preview.trim_end_matches('…')) =>
            {
                // A held line names no sender name: only our address tells it is ours.
                match &address {
                    Some(ours) if *ours == from => receipt = Some(Outcome::Held),
                    Some(_) => {}
                    None => {
                        return Ok(unknown(
                            "its receiver holds a message like it from a sender it cannot tell"
                                .to_owned(),
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(match receipt {
        Some(outcome) => Step::Deliver {
            session_id: attempt.session_id.clone(),
            session_name: None,
            msg_id,
            receipt: Some(Receipt {
                outcome,
                basis: Basis::Transcript,
            }),
        },
        None => Step::Fail {
            reason: "the post office stopped during its attempt; its receiver's transcript shows it did not arrive, and its sender is gone: sent again".to_owned(),
            retry_at_ms: 0,
        },
    })
}

/// Every fact the transcript of `session_id` wrote from `len` bytes in.
fn facts_since(
    home: &ClaudeHome,
    session_id: &str,
    len: u64,
) -> Result<Vec<Fact>, claude_peer_transcript::Error> {
    let mut follower = Follower::since(home, session_id, len)?;
    let mut facts = Vec::new();
    loop {
        let more = follower.next(Duration::ZERO)?;
        if more.is_empty() {
            return Ok(facts);
        }
        facts.extend(more);
    }
}

/// Makes sure the sender a stopped post office left is gone: its process group is
/// killed when its leader is still that process, then awaited, at most
/// [`SENDER_GONE_WAIT`]; whether it is gone. The group outlives nothing of ours: a pid
/// is not reused while a group of that id has members.
fn stop(sender: &SenderProcess) -> bool {
    let Some(group) = i32::try_from(sender.pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return false;
    };
    let table = OsProcessTable::new();
    if let Some(pid) = Pid::new(sender.pid) {
        let facts = table.facts(pid, table.signal(pid));
        if facts.start_token.as_deref() == Some(sender.start_token.as_str()) {
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
        }
    }
    let deadline = Instant::now() + SENDER_GONE_WAIT;
    loop {
        match rustix::process::test_kill_process_group(group) {
            Err(rustix::io::Errno::SRCH) => return true,
            _ if Instant::now() >= deadline => return false,
            _ => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}
