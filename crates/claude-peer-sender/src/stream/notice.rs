//! The notices and inbound items a sender hears, read from Claude Code's own wording:
//! one reading of the outcome words for both the sender's informational lines and the
//! delivery notices queued as prompts.

use claude_peer_deliver::Outcome;

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

impl Queued {
    pub(crate) fn parse(prompt: &str) -> Self {
        if let Some(at) = prompt.find("<cross-session-message") {
            if let Some(message) = parse_message(&prompt[at..]) {
                return message;
            }
        } else if let Some(at) = prompt.find("[Cross-session delivery notice]") {
            if let Some(notice) = parse_notice(&prompt[at..]) {
                return notice;
            }
        } else if let Some(at) = prompt.find("[Cross-session idle notice]") {
            let rest = &prompt[at..];
            let quoted = rest.split('"').nth(1);
            if let Some(recipient) = quoted {
                return Self::Idle {
                    recipient: recipient.to_owned(),
                };
            }
        }
        Self::Other(prompt.to_owned())
    }
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
    let is_uuid = |word: &str| {
        let groups: Vec<&str> = word.split('-').collect();
        groups.len() == 5
            && groups.iter().zip([8, 4, 4, 4, 12]).all(|(group, len)| {
                group.len() == len && group.bytes().all(|b| b.is_ascii_hexdigit())
            })
    };
    text.split(|c: char| !(c.is_ascii_hexdigit() || c == '-'))
        .filter(|word| is_uuid(word))
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
        let message = Queued::parse(
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
        let held = Queued::parse(
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
        let released = Queued::parse(
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
            let parsed = Queued::parse(&format!(
                "[Cross-session delivery notice] Your message to another session {text}"
            ));
            assert!(
                matches!(parsed, Queued::Notice { outcome: o, .. } if o == outcome),
                "{text}"
            );
        }
        assert_eq!(
            Queued::parse(
                "[Cross-session idle notice] \"uds:/tmp/cc-socks/9.sock\", which you asked to be notified about, is idle now"
            ),
            Queued::Idle {
                recipient: "uds:/tmp/cc-socks/9.sock".to_owned()
            }
        );
        assert_eq!(
            Queued::parse("something else"),
            Queued::Other("something else".to_owned())
        );
    }
}
