//! The notices and inbound items a sender hears, read from Claude Code's own wording:
//! one reading of the outcome words for both the sender's informational lines and the
//! delivery notices queued as prompts.

use claude_peer_deliver::Outcome;

use claude_peer_guard::protocol;

/// A prompt another session queued for the sender, kept from its model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Queued {
    /// A message (a reply, or anything sent to the sender's address).
    Message {
        /// The sender's address, `uds:<socket path>`.
        from: String,
        from_name: Option<String>,
        text: String,
    },
    /// What a receiver did with messages sent earlier, naming (some of) them.
    Notice {
        outcome: Outcome,
        recipient: String,
        msg_ids: Vec<String>,
    },
    /// A receiver the sender subscribed to finished its turn.
    Idle { recipient: String },
    /// One of this project's own send prompts, merged into a prompt the hook blocked:
    /// it must be asked again.
    Ours(String),
    /// Anything else, verbatim.
    Other(String),
}

/// A receiver's notice: `Cross-session message held by the receiving session
/// (recipient: uds:/…)`, or coalesced, `Cross-session messages (35) held …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Tally {
    pub(crate) outcome: Outcome,
    /// The receiver's address as the notice gives it (`uds:<socket path>`).
    pub(crate) recipient: String,
    /// How many messages the notice covers.
    pub(crate) count: usize,
}

/// Where each kind of queued item begins in a prompt.
const MESSAGE: &str = "<cross-session-message";
const DELIVERY_NOTICE: &str = "[Cross-session delivery notice]";
const IDLE_NOTICE: &str = "[Cross-session idle notice]";
/// How a message block ends (one inside a text arrives escaped).
const CLOSE: &str = "</cross-session-message>";

impl Queued {
    /// Every item of a prompt, in order: Claude Code merges prompts queued during a turn
    /// into one, so a prompt may hold several messages and notices, and this project's
    /// own send prompts. Each message block, each notice and each of our prompt lines is
    /// an item of its own; text that is none of these, when there is no item at all, is
    /// one `Other`.
    pub(crate) fn parse_all(prompt: &str) -> Vec<Self> {
        let mut items = Vec::new();
        let mut rest = prompt;
        loop {
            let next = [MESSAGE, DELIVERY_NOTICE, IDLE_NOTICE]
                .iter()
                .filter_map(|marker| rest.find(marker).map(|at| (at, *marker)))
                .min();
            let Some((at, marker)) = next else {
                items.extend(ours(rest));
                break;
            };
            items.extend(ours(&rest[..at]));
            let item = &rest[at..];
            let end = match marker {
                MESSAGE => item
                    .find(CLOSE)
                    .map_or(item.len(), |close| close + CLOSE.len()),
                _ => next_marker(&item[marker.len()..]).map_or(item.len(), |n| n + marker.len()),
            };
            let block = &item[..end];
            let parsed = match marker {
                MESSAGE => parse_message(block),
                DELIVERY_NOTICE => parse_notice(block),
                _ => block.split('"').nth(1).map(|recipient| Self::Idle {
                    recipient: recipient.to_owned(),
                }),
            };
            items.push(parsed.unwrap_or_else(|| Self::Other(block.to_owned())));
            rest = &item[end..];
        }
        if items.is_empty() {
            items.push(Self::Other(prompt.to_owned()));
        }
        items
    }
}

/// Where the next item begins in `text`.
fn next_marker(text: &str) -> Option<usize> {
    [MESSAGE, DELIVERY_NOTICE, IDLE_NOTICE]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
}

/// This project's own send prompts among the lines of `text` (outside any message).
fn ours(text: &str) -> impl Iterator<Item = Queued> + '_ {
    protocol::ours(text).map(|line| Queued::Ours(line.to_owned()))
}

/// A message in its envelope, read by the one envelope reader (the transcript's).
fn parse_message(envelope: &str) -> Option<Queued> {
    let envelope = claude_peer_transcript::envelope::parse(envelope)?;
    Some(Queued::Message {
        from: envelope.from,
        from_name: envelope.from_name,
        text: envelope.text,
    })
}

/// `[Cross-session delivery notice] Your message to another session was held by that
/// session (recipient: uds:…; msg_id: <uuid>). …`, possibly naming several `msg_id`s.
fn parse_notice(notice: &str) -> Option<Queued> {
    let (outcome, recipient, tail) = outcome_and_recipient(notice)?;
    Some(Queued::Notice {
        outcome,
        recipient: recipient.to_owned(),
        msg_ids: uuids(tail),
    })
}

/// What a notice says happened, to whom: the first outcome word before `(recipient: `,
/// the recipient's address, and everything after the marker (where `msg_id`s are named).
/// The one reading of Claude Code's notice wording, for its informational lines and its
/// delivery notices alike.
fn outcome_and_recipient(notice: &str) -> Option<(Outcome, &str, &str)> {
    let (head, tail) = notice.split_once("(recipient: ")?;
    let outcome = head
        .split(|c: char| !c.is_ascii_alphabetic())
        .find_map(|word| match word {
            "held" => Some(Outcome::Held),
            "released" => Some(Outcome::Released),
            "denied" => Some(Outcome::Denied),
            "expired" | "expiry" => Some(Outcome::Expired),
            "refused" => Some(Outcome::Refused),
            _ => None,
        })?;
    let recipient = tail.split([';', ')']).next()?.trim();
    Some((outcome, recipient, tail))
}

/// Every UUID-shaped word (8-4-4-4-12 hex digits) in `text`, in order.
fn uuids(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .filter(|word| claude_peer_registry::is_uuid(word))
        .map(str::to_owned)
        .collect()
}

/// `Cross-session message <outcome> … (recipient: <address>)`, or the coalesced
/// `Cross-session messages (<count>) <outcome> …`.
pub(crate) fn parse_tally(content: &str) -> Option<Tally> {
    let rest = content.strip_prefix("Cross-session message")?;
    let (count, rest) = match rest.strip_prefix("s (") {
        Some(rest) => {
            let (count, rest) = rest.split_once(')')?;
            (count.parse().ok()?, rest)
        }
        None => (1, rest),
    };
    let (outcome, recipient, _) = outcome_and_recipient(rest)?;
    Some(Tally {
        outcome,
        recipient: recipient.to_owned(),
        count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one item of `prompt`.
    fn only(prompt: &str) -> Queued {
        let mut items = Queued::parse_all(prompt);
        assert_eq!(items.len(), 1, "{items:?}");
        items.remove(0)
    }

    #[test]
    fn receipts_are_read_from_the_notices_claude_code_prints() {
        let cases = [
            (
                "Cross-session message held by the receiving session (recipient: uds:/tmp/cc-socks/11755.sock). Claude in that session hasn't seen it.",
                Outcome::Held,
                1,
            ),
            (
                "Cross-session message released after approval (recipient: uds:/tmp/cc-socks/11755.sock).",
                Outcome::Released,
                1,
            ),
            (
                "Cross-session message denied (recipient: uds:/tmp/cc-socks/11755.sock). The recipient's user declined it; it was not delivered.",
                Outcome::Denied,
                1,
            ),
            (
                "Cross-session message expired without approval (recipient: uds:/tmp/cc-socks/11755.sock). It was not delivered.",
                Outcome::Expired,
                1,
            ),
            (
                "Cross-session message refused (recipient: uds:/tmp/cc-socks/11755.sock). The receiving session refuses messages; it was not delivered.",
                Outcome::Refused,
                1,
            ),
            (
                "Cross-session messages (35) held by the receiving session (recipient: uds:/tmp/cc-socks/11755.sock).",
                Outcome::Held,
                35,
            ),
        ];
        for (content, outcome, count) in cases {
            assert_eq!(
                parse_tally(content),
                Some(Tally {
                    outcome,
                    recipient: "uds:/tmp/cc-socks/11755.sock".to_owned(),
                    count
                }),
                "{content}"
            );
        }
        assert_eq!(parse_tally("Cross-session message sent somewhere"), None);
        assert_eq!(
            parse_tally("Cross-session messages (x) held (recipient: a)"),
            None
        );
        assert_eq!(parse_tally("Something else (recipient: a)"), None);
    }

    #[test]
    fn inbound_messages_notices_and_idle_notices_are_read_from_their_prompts() {
        let message = only(
            "Another Claude session sent a message:\n<cross-session-message from=\"uds:/tmp/cc-socks/9.sock\" from-name=\"rev &quot;one&quot;\" from-mode=\"prompting\">\nline 1\nfake <\\/cross-session-message> end\n</cross-session-message>\n\nThis came from another Claude session.",
        );
        assert_eq!(
            message,
            Queued::Message {
                from: "uds:/tmp/cc-socks/9.sock".to_owned(),
                from_name: Some("rev \"one\"".to_owned()),
                text: "line 1\nfake </cross-session-message> end".to_owned(),
            }
        );
        let held = only(
            "[Cross-session delivery notice] Your message to another session was held by that session (recipient: uds:/tmp/cc-socks/11755.sock; msg_id: cd1883a0-a16e-4ccb-a708-edc8131d1c28). NOT delivered: its Claude has not seen it.",
        );
        assert_eq!(
            held,
            Queued::Notice {
                outcome: Outcome::Held,
                recipient: "uds:/tmp/cc-socks/11755.sock".to_owned(),
                msg_ids: vec!["cd1883a0-a16e-4ccb-a708-edc8131d1c28".to_owned()],
            }
        );
        let released = only(
            "[Cross-session delivery notice] Your message to another session was approved and released to that session (recipient: uds:/a.sock; msg_id: cd1883a0-a16e-4ccb-a708-edc8131d1c28).",
        );
        assert!(matches!(
            released,
            Queued::Notice {
                outcome: Outcome::Released,
                ..
            }
        ));
        for (text, outcome) in [
            (
                "was denied by the recipient user (recipient: uds:/a.sock; msg_id: x)",
                Outcome::Denied,
            ),
            (
                "was not approved before expiry (recipient: uds:/a.sock; msg_id: x)",
                Outcome::Expired,
            ),
            (
                "was refused by that session (recipient: uds:/a.sock; msg_id: x)",
                Outcome::Refused,
            ),
        ] {
            let parsed = only(&format!(
                "[Cross-session delivery notice] Your message to another session {text}"
            ));
            assert!(
                matches!(parsed, Queued::Notice { outcome: o, .. } if o == outcome),
                "{text}"
            );
        }
        assert_eq!(
            only(
                "[Cross-session idle notice] \"uds:/tmp/cc-socks/9.sock\", which you asked to be notified about, is idle now"
            ),
            Queued::Idle {
                recipient: "uds:/tmp/cc-socks/9.sock".to_owned()
            }
        );
        assert_eq!(
            only("something else"),
            Queued::Other("something else".to_owned())
        );
    }

    #[test]
    fn a_merged_prompt_gives_each_message_and_notice_to_its_own_sender_and_keeps_ours() {
        let merged = "claude-peers send 0a1b2c3d-4\n\
[Cross-session delivery notice] Your message to another session was held by that session (recipient: uds:/r1.sock; msg_id: cd1883a0-a16e-4ccb-a708-edc8131d1c28). NOT delivered.\n\
[Cross-session delivery notice] Your message to another session was refused by that session (recipient: uds:/r2.sock; msg_id: 11111111-a16e-4ccb-a708-edc8131d1c28).\n\
Another Claude session sent a message:\n<cross-session-message from=\"uds:/a.sock\" from-name=\"a\">\nfirst reply\n</cross-session-message>\n\nThis came from another Claude session.\n\
Another Claude session sent a message:\n<cross-session-message from=\"uds:/b.sock\" from-name=\"b\">\nsecond reply, quoting <\\/cross-session-message>\nclaude-peers send 0a1b2c3d-9\n</cross-session-message>";
        let items = Queued::parse_all(merged);
        assert_eq!(
            items,
            [
                Queued::Ours("claude-peers send 0a1b2c3d-4".to_owned()),
                Queued::Notice {
                    outcome: Outcome::Held,
                    recipient: "uds:/r1.sock".to_owned(),
                    msg_ids: vec!["cd1883a0-a16e-4ccb-a708-edc8131d1c28".to_owned()],
                },
                Queued::Notice {
                    outcome: Outcome::Refused,
                    recipient: "uds:/r2.sock".to_owned(),
                    msg_ids: vec!["11111111-a16e-4ccb-a708-edc8131d1c28".to_owned()],
                },
                Queued::Message {
                    from: "uds:/a.sock".to_owned(),
                    from_name: Some("a".to_owned()),
                    text: "first reply".to_owned(),
                },
                Queued::Message {
                    from: "uds:/b.sock".to_owned(),
                    from_name: Some("b".to_owned()),
                    text: "second reply, quoting </cross-session-message>\nclaude-peers send 0a1b2c3d-9"
                        .to_owned(),
                },
            ],
            "a send prompt inside a message text is the message's, not ours"
        );
    }
}
