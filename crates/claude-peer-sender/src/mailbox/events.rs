//! What the sender's stream lines tell a mailbox: receipts, replies, idle notices.

use std::collections::VecDeque;
use std::path::Path;

use claude_peer_deliver::Courier;
use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;

use super::MailboxEvent;
use super::tracker::Tracker;
use crate::channel::Line;
use crate::stream::{Printed, Queued};

/// The live session of `home` whose messaging socket is `address` (`uds:<path>`).
pub(super) fn session_at<P: ProcessTable, F: RegistryFs>(
    courier: &Courier<P, F>,
    home: &ClaudeHome,
    address: &str,
) -> Option<String> {
    let path = address.strip_prefix("uds:").unwrap_or(address);
    let scan = courier.discovery().live(home).ok()?;
    scan.entries.into_iter().find_map(|session| {
        let record = session.record;
        (record.messaging_socket_path.as_deref().map(Path::new) == Some(Path::new(path)))
            .then_some(record.session_id)
    })
}

/// Turns one stream line into events (receipts, messages, idle notices). Our own send
/// prompts merged into a blocked prompt are asked again by whoever holds the sender
/// ([`crate::relay::await_result`], [`Mailbox::next_event`]), not here.
pub(super) fn observe(
    line: Line,
    tracker: &mut Tracker,
    ready: &mut VecDeque<MailboxEvent>,
    session_at: impl Fn(&str) -> Option<String>,
) {
    match line {
        Line::Printed(Printed::Tally(tally)) => {
            tracker.counted(&tally.recipient, tally.outcome, tally.count);
        }
        Line::Printed(Printed::Queued(items)) => {
            for item in items {
                match item {
                    Queued::Notice {
                        outcome,
                        recipient,
                        msg_ids,
                    } => ready.extend(
                        tracker
                            .notice(outcome, &recipient, &msg_ids)
                            .map(MailboxEvent::Receipt),
                    ),
                    Queued::Message {
                        from,
                        from_name,
                        text,
                    } => {
                        let session_id = session_at(&from);
                        ready.push_back(MailboxEvent::Message {
                            from,
                            from_name,
                            session_id,
                            text,
                        });
                    }
                    Queued::Idle { recipient } => {
                        let session_id = session_at(&recipient);
                        ready.push_back(MailboxEvent::Idle {
                            recipient,
                            session_id,
                        });
                    }
                    Queued::Other(text) => ready.push_back(MailboxEvent::Notice(text)),
                    Queued::Ours(_) => {}
                }
            }
        }
        _ => {}
    }
}
