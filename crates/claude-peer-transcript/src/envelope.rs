//! The envelope Claude Code wraps around a cross-session message:
//! `<cross-session-message from="uds:…" from-name="…" from-mode="…">\n<text>\n</cross-session-message>`.
//! The one reader of it: the transcript's queued lines and a sender's inbound prompts
//! both go through [`parse`], so the two cannot read a message differently.

/// The closing tag; inside a text the receiver escapes it as `<\/cross-session-message>`.
const CLOSE: &str = "</cross-session-message>";

/// A message as its envelope gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The sender's address, `uds:<socket path>`: where a reply would go.
    pub from: String,
    /// The name the sender claims (unverified), when it gave one.
    pub from_name: Option<String>,
    /// The message text, unescaped.
    pub text: String,
}

/// Reads a string that begins with `<cross-session-message`; `None` when it has no
/// `from` attribute or no closing tag.
///
/// The text runs to the last closing tag, so a closing tag the receiver failed to
/// escape cannot cut it short; attribute values are XML-unescaped.
///
/// ```
/// use claude_peer_transcript::envelope;
///
/// let message = envelope::parse(
///     "<cross-session-message from=\"uds:/tmp/a.sock\" from-name=\"rev\">\nhi <\\/cross-session-message>\n</cross-session-message>",
/// )
/// .unwrap();
/// assert_eq!(message.from, "uds:/tmp/a.sock");
/// assert_eq!(message.from_name.as_deref(), Some("rev"));
/// assert_eq!(message.text, "hi </cross-session-message>");
/// ```
#[must_use]
pub fn parse(envelope: &str) -> Option<Envelope> {
    let (tag, rest) = envelope.split_once('>')?;
    let body = rest.strip_prefix('\n').unwrap_or(rest);
    let end = body.rfind(CLOSE)?;
    let text = body[..end].strip_suffix('\n').unwrap_or(&body[..end]);
    let attribute = |name: &str| {
        let (_, after) = tag.split_once(&format!(" {name}=\""))?;
        let value = after.split('"').next()?;
        Some(
            value
                .replace("&quot;", "\"")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&"),
        )
    };
    Some(Envelope {
        from: attribute("from")?,
        from_name: attribute("from-name"),
        text: text.replace("<\\/cross-session-message>", CLOSE),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_as_claude_code_queues_it_is_read_whole() {
        let envelope = "<cross-session-message from=\"uds:/tmp/cc-socks/22051.sock\" from-name=\"claude-peers\" from-mode=\"prompting\">\nhello accept\n</cross-session-message>";
        assert_eq!(
            parse(envelope),
            Some(Envelope {
                from: "uds:/tmp/cc-socks/22051.sock".to_owned(),
                from_name: Some("claude-peers".to_owned()),
                text: "hello accept".to_owned(),
            })
        );
    }

    #[test]
    fn attributes_are_unescaped_and_the_name_is_optional() {
        let named = parse(
            "<cross-session-message from=\"uds:/a.sock\" from-name=\"rev &quot;one&quot; &lt;&amp;&gt;\">\nx\n</cross-session-message>",
        )
        .unwrap();
        assert_eq!(named.from_name.as_deref(), Some("rev \"one\" <&>"));
        let anonymous =
            parse("<cross-session-message from=\"uds:/a.sock\">\nx\n</cross-session-message>")
                .unwrap();
        assert_eq!(anonymous.from_name, None, "no from-name, no name");
        assert_eq!(anonymous.from, "uds:/a.sock");
    }

    #[test]
    fn an_escaped_closing_tag_in_the_text_is_unescaped_and_does_not_end_it() {
        let message = parse(
            "<cross-session-message from=\"uds:/a.sock\">\nline 1\nfake <\\/cross-session-message> end\n</cross-session-message>",
        )
        .unwrap();
        assert_eq!(message.text, "line 1\nfake </cross-session-message> end");
    }

    #[test]
    fn text_keeps_inner_newlines_and_an_empty_text_is_empty() {
        let message =
            parse("<cross-session-message from=\"uds:/a.sock\">\n\na\n\n</cross-session-message>")
                .unwrap();
        assert_eq!(
            message.text, "\na\n",
            "only one newline is stripped at each end"
        );
        let empty = parse("<cross-session-message from=\"uds:/a.sock\">\n</cross-session-message>")
            .unwrap();
        assert_eq!(empty.text, "");
    }

    #[test]
    fn an_envelope_without_a_sender_or_a_closing_tag_is_not_read() {
        assert_eq!(
            parse("<cross-session-message from-name=\"x\">\nhi\n</cross-session-message>"),
            None,
            "from-name is not from"
        );
        assert_eq!(
            parse("<cross-session-message from=\"uds:/a.sock\">\nhi\n"),
            None
        );
        assert_eq!(parse("<cross-session-message from=\"uds:/a.sock\""), None);
        assert_eq!(parse(""), None);
    }
}
