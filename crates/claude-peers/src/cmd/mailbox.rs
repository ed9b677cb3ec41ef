//! `mailbox`: one long-lived Claude Code sender over stdin and stdout as JSON lines,
//! for harnesses in any language.

use std::io::{self, BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use claude_peer_deliver::Courier;
use claude_peer_registry::ClaudeHome;
use claude_peer_sender::{Event, Idle, Mailbox, Waker};
use serde::Deserialize;
use serde_json::{Value, json};
use signal_hook::consts::{SIGINT, SIGTERM};

use crate::error::{Exit, Failure};
use crate::view::SessionJson;

/// The longest request line read: a 64 KiB message, JSON-escaped, with room.
const MAX_REQUEST_BYTES: u64 = 1024 * 1024;

/// What reaches the loop besides the mailbox's own events.
enum Input {
    Request(Result<String, String>),
    End,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Request {
    id: Option<String>,
    send: Send,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Send {
    session_id: String,
    message: String,
    #[serde(default)]
    notify_when_idle: bool,
}

pub(crate) fn run(
    home: &ClaudeHome,
    relay: &claude_peer_sender::ClaudeRelay,
    managed_settings: PathBuf,
) -> Result<Exit, Failure> {
    let courier = Courier::os().with_managed_settings(managed_settings);
    let mut mailbox = Mailbox::with_courier(courier, home.clone(), relay)
        .map_err(|err| Failure::error("sender_failed", err.to_string()))?;
    let inputs = listen(&mailbox.waker())?;
    let mut out = io::stdout().lock();
    loop {
        while let Ok(input) = inputs.try_recv() {
            match input {
                Input::Request(line) => {
                    let event = answer(&mut mailbox, line);
                    if emit(&mut out, &event).is_err() {
                        return Ok(close(mailbox, &mut out));
                    }
                }
                Input::End => return Ok(close(mailbox, &mut out)),
            }
        }
        if let Some(event) = mailbox.next_event(Duration::from_secs(3600)) {
            let ended = matches!(event, Event::Closed { .. });
            let written = emit(&mut out, &event_json(&event));
            if ended {
                return Ok(Exit::Error);
            }
            if written.is_err() {
                return Ok(close(mailbox, &mut out));
            }
        }
    }
}

/// Closes the mailbox and writes what is still to come, `closed` last.
fn close(mailbox: Mailbox, out: &mut impl Write) -> Exit {
    for event in mailbox.close() {
        // The reader may be gone (that is one way to end): nothing to tell anyone.
        let _ = emit(out, &event_json(&event));
    }
    Exit::Success
}

/// Reads requests from stdin and watches for SIGINT and SIGTERM, each on a thread of
/// its own that wakes the mailbox when something came.
fn listen(waker: &Waker) -> Result<Receiver<Input>, Failure> {
    let (tx, rx) = mpsc::channel();
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).map_err(|err| {
        Failure::error(
            "signals",
            format!("cannot watch for SIGINT and SIGTERM: {err}"),
        )
    })?;
    let (signal_tx, signal_waker) = (tx.clone(), waker.clone());
    thread::spawn(move || {
        if signals.forever().next().is_some() {
            let _ = signal_tx.send(Input::End);
            signal_waker.wake();
        }
    });
    let waker = waker.clone();
    thread::spawn(move || {
        let mut stdin = io::stdin().lock();
        loop {
            let mut line = Vec::new();
            let read = stdin
                .by_ref()
                .take(MAX_REQUEST_BYTES)
                .read_until(b'\n', &mut line);
            let input = match read {
                Ok(0) | Err(_) => Input::End,
                Ok(_) if !line.ends_with(b"\n") && line.len() as u64 == MAX_REQUEST_BYTES => {
                    let _ = stdin.skip_until(b'\n');
                    Input::Request(Err("a request line over 1 MiB".to_owned()))
                }
                Ok(_) => Input::Request(
                    String::from_utf8(line)
                        .map_err(|_| "a request line that is not UTF-8".to_owned()),
                ),
            };
            let end = matches!(input, Input::End);
            if tx.send(input).is_err() {
                return;
            }
            waker.wake();
            if end {
                return;
            }
        }
    });
    Ok(rx)
}

/// The event that answers one request line: `sent`, `refused` or `error`.
fn answer(mailbox: &mut Mailbox, line: Result<String, String>) -> Value {
    let line = match line {
        Ok(line) if line.trim().is_empty() => {
            return json!({"event": "error", "id": null, "message": "an empty request line"});
        }
        Ok(line) => line,
        Err(what) => return json!({"event": "error", "id": null, "message": what}),
    };
    let id = serde_json::from_str::<Value>(&line)
        .ok()
        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
    let request: Request = match serde_json::from_str(&line) {
        Ok(request) => request,
        Err(err) => {
            return json!({"event": "error", "id": id, "message": format!("not a request ({err}); expected {{\"id\":…,\"send\":{{\"session_id\":…,\"message\":…}}}}")});
        }
    };
    let send = request.send;
    let idle = if send.notify_when_idle {
        Idle::Notify
    } else {
        Idle::Ignore
    };
    match mailbox.send(&send.session_id, &send.message, idle) {
        Ok(delivered) => json!({
            "event": "sent", "id": request.id, "msg_id": delivered.msg_id,
            "session": SessionJson::addressable(&delivered.session),
        }),
        Err(err) => match err.refusal() {
            Some(refusal) => {
                json!({"event": "refused", "id": request.id, "refusal": refusal.kind.as_str(), "message": refusal.message})
            }
            None => json!({"event": "error", "id": request.id, "message": err.to_string()}),
        },
    }
}

fn event_json(event: &Event) -> Value {
    match event {
        Event::Receipt(receipt) => json!({
            "event": "receipt", "outcome": receipt.outcome.as_str(), "msg_ids": receipt.msg_ids,
            "count": receipt.count, "recipient": receipt.recipient,
        }),
        Event::Message {
            from,
            from_name,
            session_id,
            text,
        } => json!({
            "event": "message", "from": from, "from_name": from_name, "session_id": session_id, "text": text,
        }),
        Event::Idle {
            recipient,
            session_id,
        } => {
            json!({"event": "idle", "recipient": recipient, "session_id": session_id})
        }
        Event::Notice(text) => json!({"event": "notice", "text": text}),
        Event::Closed { unknown, reason } => {
            json!({"event": "closed", "unknown": unknown, "reason": reason})
        }
    }
}

fn emit(out: &mut impl Write, value: &Value) -> io::Result<()> {
    writeln!(out, "{value}")?;
    out.flush()
}
