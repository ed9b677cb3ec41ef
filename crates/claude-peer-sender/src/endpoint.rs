//! A scripted model: the part of the Messages API that Claude Code speaks, answered by
//! a script instead of a language model.
//!
//! A headless Claude Code asks its model what to do next; an [`Endpoint`] answers from a
//! [`Script`], so the sender does exactly what this project decided (call `SendMessage`
//! with these bytes), offline, at no cost, with no credentials. It listens on an
//! ephemeral port of 127.0.0.1 for the life of one sender and answers only requests that
//! carry its per-run secret as the API key.

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use serde_json::{Value, json};

/// The largest request head (request line and headers) that is read: 64 KiB.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest request body that is read: 32 MiB (a long-lived sender's history grows
/// with every message it sent).
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// An idle keep-alive connection is closed after this long.
const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

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
        let secret: Arc<str> = Arc::from(secret);
        let acceptor = {
            let stop = Arc::clone(&stop);
            thread::Builder::new()
                .name("endpoint-accept".to_owned())
                .spawn(move || {
                    for stream in listener.incoming() {
                        if stop.load(Ordering::Acquire) {
                            return;
                        }
                        let Ok(stream) = stream else { continue };
                        let (secret, script) = (Arc::clone(&secret), Arc::clone(&script));
                        // A connection that cannot get a thread is dropped: the client retries.
                        let _ = thread::Builder::new()
                            .name("endpoint-conn".to_owned())
                            .spawn(move || serve(stream, &secret, script.as_ref()));
                    }
                })?
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

/// One parsed request.
struct Request {
    method: String,
    path: String,
    api_key: Option<String>,
    body: Vec<u8>,
}

/// Serves one keep-alive connection until the client closes it, it idles too long, or
/// it sends something this endpoint does not read.
fn serve(stream: TcpStream, secret: &str, script: &dyn Script) {
    if stream.set_read_timeout(Some(IDLE_TIMEOUT)).is_err() {
        return;
    }
    let Ok(writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut writer = writer;
    loop {
        let request = match read_request(&mut reader) {
            Ok(Some(request)) => request,
            Ok(None) => return,
            Err(err) => {
                let _ = respond_error(&mut writer, 400, "invalid_request_error", &err.to_string());
                return;
            }
        };
        if answer(&mut writer, &request, secret, script).is_err() {
            return;
        }
    }
}

fn answer(
    out: &mut TcpStream,
    request: &Request,
    secret: &str,
    script: &dyn Script,
) -> io::Result<()> {
    if request.api_key.as_deref() != Some(secret) {
        return respond_error(out, 401, "authentication_error", "invalid x-api-key");
    }
    let path = request.path.split('?').next().unwrap_or_default();
    match (request.method.as_str(), path) {
        ("HEAD" | "GET", "/api/hello" | "/") => respond(out, 200, "text/plain", b""),
        ("POST", "/v1/messages") => {
            let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
                return respond_error(out, 400, "invalid_request_error", "the body is not JSON");
            };
            let reply = script.reply(&body);
            // What the request would cost a model, about four bytes a token: Claude Code
            // compacts a conversation by the usage it is told, so a long-lived sender's
            // history stays bounded by it.
            let tokens = request.body.len() / 4;
            let model = body
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("scripted");
            if body.get("stream").and_then(Value::as_bool) == Some(true) {
                respond(
                    out,
                    200,
                    "text/event-stream",
                    stream_events(model, &reply, tokens).as_bytes(),
                )
            } else {
                respond(
                    out,
                    200,
                    "application/json",
                    message(model, &reply, tokens).to_string().as_bytes(),
                )
            }
        }
        ("POST", "/v1/messages/count_tokens") => {
            respond(out, 200, "application/json", br#"{"input_tokens":1}"#)
        }
        _ => respond_error(out, 404, "not_found_error", "not served by this endpoint"),
    }
}

/// Reads one request; `None` when the client closed the connection between requests.
fn read_request(reader: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let read = reader
            .take((MAX_HEAD_BYTES + 1 - head.len()) as u64)
            .read_until(b'\n', &mut head)?;
        if read == 0 {
            return if head.is_empty() {
                Ok(None)
            } else {
                Err(invalid("the connection closed inside a request head"))
            };
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(invalid("the request head is over 64 KiB"));
        }
        if head[before..] == *b"\r\n" || head[before..] == *b"\n" {
            break;
        }
    }
    let head = String::from_utf8(head).map_err(|_| invalid("the request head is not UTF-8"))?;
    let mut lines = head.lines();
    let mut first = lines.next().unwrap_or_default().split(' ');
    let (method, path) = (
        first.next().unwrap_or_default(),
        first.next().unwrap_or_default(),
    );
    let mut length = 0;
    let mut api_key = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => {
                length = value.parse().map_err(|_| invalid("a bad Content-Length"))?;
            }
            "transfer-encoding" => return Err(invalid("chunked request bodies are not read")),
            "x-api-key" => api_key = Some(value.to_owned()),
            "authorization" => {
                api_key = value.strip_prefix("Bearer ").map(str::to_owned).or(api_key);
            }
            _ => {}
        }
    }
    if length > MAX_BODY_BYTES {
        return Err(invalid("the request body is over 32 MiB"));
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some(Request {
        method: method.to_owned(),
        path: path.to_owned(),
        api_key,
        body,
    }))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

fn respond(out: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        _ => "Not Found",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\ncache-control: no-cache\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

fn respond_error(out: &mut TcpStream, status: u16, kind: &str, message: &str) -> io::Result<()> {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    respond(out, status, "application/json", body.to_string().as_bytes())
}

/// The reply's content block and stop reason.
fn content(reply: &Reply) -> (Value, &'static str) {
    match reply {
        Reply::Text(text) => (json!({"type": "text", "text": text}), "end_turn"),
        Reply::ToolUse { id, name, input } => (
            json!({"type": "tool_use", "id": id, "name": name, "input": input}),
            "tool_use",
        ),
    }
}

/// A whole (non-streamed) message.
fn message(model: &str, reply: &Reply, input_tokens: usize) -> Value {
    let (block, stop) = content(reply);
    json!({
        "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
        "content": [block], "stop_reason": stop, "stop_sequence": null,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    })
}

/// The same message as server-sent events, as the streaming API sends it.
fn stream_events(model: &str, reply: &Reply, input_tokens: usize) -> String {
    let (block, stop) = content(reply);
    let (start, delta) = match reply {
        Reply::Text(text) => (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": text}),
        ),
        Reply::ToolUse { input, .. } => {
            let mut start = block;
            start["input"] = json!({});
            (
                start,
                json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            )
        }
    };
    let mut start_message = message(model, reply, input_tokens);
    start_message["content"] = json!([]);
    start_message["stop_reason"] = Value::Null;
    let events = [
        (
            "message_start",
            json!({"type": "message_start", "message": start_message}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    events.iter().fold(String::new(), |mut out, (name, data)| {
        let _ = write!(out, "event: {name}\ndata: {data}\n\n");
        out
    })
}
