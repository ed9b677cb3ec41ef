//! A scripted model: the part of the Messages API that Claude Code speaks, answered by
//! a script instead of a language model.
//!
//! A headless Claude Code asks its model what to do next; an [`Endpoint`] answers from a
//! [`Script`], so the sender does exactly what this project decided (call `SendMessage`
//! with these bytes), offline, at no cost, with no credentials. It listens on an
//! ephemeral port of 127.0.0.1 for the life of one sender and answers only requests that
//! carry its per-run secret as the API key.
//!
//! Anyone on the machine can connect, so a stranger gets little:
//!
//! - The key is checked, in constant time, as soon as a request head is in, before any
//!   of its body is read; a request without it gets a 401 and its connection is closed.
//! - Every wait has a deadline that a client cannot stretch by sending a byte at a time:
//!   a request's first byte within 120 s of the connection's start or of the previous
//!   response, the rest of its head within 10 s of that byte, its body (up to 32 MiB
//!   over loopback) within 60 s of the head.
//! - At most 64 connections are kept that have not shown the key: a new one shuts the
//!   oldest of them down, so a flood of idle connections only displaces itself, while
//!   Claude Code, which sends its head as soon as it connects, shows its key at once.
//!   Connections that showed it are a separate 16 (Claude Code keeps a few); past
//!   those a new one gets a 503, which Claude Code retries.
//! - When the process is out of descriptors, the acceptor pauses instead of spinning.

//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::TcpStream;
//! use std::sync::Arc;
//!
//! use claude_peer_endpoint::{Endpoint, Reply};
//! use serde_json::Value;
//!
//! let endpoint = Endpoint::start("s3cret", Arc::new(|_: &Value| Reply::Text("Done.".to_owned())))?;
//! let address = endpoint.base_url();
//! let mut stream = TcpStream::connect(address.trim_start_matches("http://"))?;
//! stream.write_all(b"POST /v1/messages HTTP/1.1\r\nx-api-key: wrong\r\ncontent-length: 2\r\n\r\n{}")?;
//! let mut answer = String::new();
//! stream.read_to_string(&mut answer)?;
//! assert!(answer.starts_with("HTTP/1.1 401"), "a request without the secret is refused: {answer}");
//! # Ok::<(), std::io::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod guard;
mod http;
mod messages;

use std::io::{self, BufRead, BufReader};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::Value;

use self::guard::{Connections, Secret, Slot, Timed};
use self::http::{Head, Then, respond, respond_error};

/// How long a connection may wait for a request's first byte: an idle keep-alive
/// connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the rest of a request head may take after its first byte; a client sends its
/// head at once.
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may take after its head: generous for 32 MiB over loopback.
const BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the acceptor pauses after a failed accept (out of descriptors, say), so as
/// not to spin while the cause lasts.
const ACCEPT_PAUSE: Duration = Duration::from_millis(50);

/// What the model answers to one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A final text; the turn ends.
    Text(String),
    /// One tool call; the turn goes on with its result.
    ToolUse {
        /// The tool-use id, echoed in the tool result.
        id: String,
        /// The tool's name, e.g. `SendMessage`.
        name: String,
        /// Its input, a JSON object.
        input: Value,
    },
}

/// Decides the answer to each Messages API request (the parsed JSON body).
pub trait Script: Send + Sync {
    /// The answer to `request`.
    fn reply(&self, request: &Value) -> Reply;
}

impl<F: Fn(&Value) -> Reply + Send + Sync> Script for F {
    fn reply(&self, request: &Value) -> Reply {
        self(request)
    }
}

/// A running scripted endpoint; stops listening when dropped.
#[derive(Debug)]
pub struct Endpoint {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl Endpoint {
    /// Listens on an ephemeral port of 127.0.0.1, answering requests whose API key
    /// (`x-api-key`, or `Authorization: Bearer`) is `secret` from `script`.
    pub fn start(secret: &str, script: Arc<dyn Script>) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let secret = Arc::new(Secret::new(secret));
        let acceptor = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("endpoint-accept".to_owned())
                .spawn(move || accept(&listener, &stop, &secret, &script))?
        };
        Ok(Self {
            addr,
            stop,
            acceptor: Some(acceptor),
        })
    }

    /// `http://127.0.0.1:<port>`, for `ANTHROPIC_BASE_URL`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the acceptor, which then sees the flag and returns.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

/// Accepts connections until `stop`, serving each on its own thread.
fn accept(
    listener: &TcpListener,
    stop: &AtomicBool,
    secret: &Arc<Secret>,
    script: &Arc<dyn Script>,
) {
    let connections = Arc::new(Connections::default());
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok((stream, _)) = accepted else {
            thread::sleep(ACCEPT_PAUSE);
            continue;
        };
        // A connection that cannot be counted or get a thread is dropped: the client
        // retries.
        let Ok(slot) = connections.admit(&stream) else {
            continue;
        };
        let (secret, script) = (Arc::clone(secret), Arc::clone(script));
        let _ = thread::Builder::new()
            .name("endpoint-conn".to_owned())
            .spawn(move || serve(stream, slot, &secret, script.as_ref()));
    }
}

/// Serves one keep-alive connection until the client closes it, a deadline passes, or
/// it sends something this endpoint does not read. A head this endpoint does not read
/// gets a 400, one without the key a 401; either closes the connection, its body unread.
fn serve(stream: TcpStream, mut slot: Slot, secret: &Secret, script: &dyn Script) {
    let mut reader = BufReader::new(Timed::new(stream, IDLE_TIMEOUT));
    loop {
        // The next request's first byte, or the client closing the connection.
        if !matches!(reader.fill_buf(), Ok([_, ..])) {
            return;
        }
        reader.get_mut().wait(HEAD_TIMEOUT);
        let head = http::read_head(&mut reader);
        let out = reader.get_ref().stream();
        let head = match head {
            Ok(head) => head,
            Err(err) if err.kind() == io::ErrorKind::InvalidData => {
                let message = err.to_string();
                let _ = respond_error(out, 400, "invalid_request_error", &message, Then::Close);
                return;
            }
            Err(_) => return,
        };
        // The key, before any of the body: a stranger's request costs its head only.
        if !secret.matches(head.api_key.as_deref()) {
            let _ = respond_error(
                out,
                401,
                "authentication_error",
                "invalid x-api-key",
                Then::Close,
            );
            return;
        }
        // It leaves the connections waiting for a key for those that showed it.
        if !slot.authenticate() {
            let message = "too many connections";
            let _ = respond_error(out, 503, "overloaded_error", message, Then::Close);
            return;
        }
        reader.get_mut().wait(BODY_TIMEOUT);
        let Ok(body) = http::read_body(&mut reader, &head) else {
            return;
        };
        if answer(reader.get_ref().stream(), &head, &body, script).is_err() {
            return;
        }
        reader.get_mut().wait(IDLE_TIMEOUT);
    }
}

/// Answers one request that carried the key.
fn answer(out: &TcpStream, head: &Head, body: &[u8], script: &dyn Script) -> io::Result<()> {
    let path = head.path.split('?').next().unwrap_or_default();
    match (head.method.as_str(), path) {
        ("HEAD" | "GET", "/api/hello" | "/") => {
            respond(out, 200, "text/plain", b"", Then::KeepAlive)
        }
        ("POST", "/v1/messages") => {
            let Ok(request) = serde_json::from_slice::<Value>(body) else {
                let message = "the body is not JSON";
                return respond_error(out, 400, "invalid_request_error", message, Then::KeepAlive);
            };
            let reply = script.reply(&request);
            // What the request would cost a model, about four bytes a token: Claude Code
            // compacts a conversation by the usage it is told, so a long-lived sender's
            // history stays bounded by it.
            let tokens = body.len() / 4;
            let model = request
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("scripted");
            if request.get("stream").and_then(Value::as_bool) == Some(true) {
                let events = messages::stream_events(model, &reply, tokens);
                respond(
                    out,
                    200,
                    "text/event-stream",
                    events.as_bytes(),
                    Then::KeepAlive,
                )
            } else {
                let message = messages::message(model, &reply, tokens).to_string();
                respond(
                    out,
                    200,
                    "application/json",
                    message.as_bytes(),
                    Then::KeepAlive,
                )
            }
        }
        ("POST", "/v1/messages/count_tokens") => {
            let count = br#"{"input_tokens":1}"#;
            respond(out, 200, "application/json", count, Then::KeepAlive)
        }
        _ => {
            let message = "not served by this endpoint";
            respond_error(out, 404, "not_found_error", message, Then::KeepAlive)
        }
    }
}
