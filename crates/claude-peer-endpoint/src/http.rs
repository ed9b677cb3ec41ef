//! The little HTTP/1.1 the endpoint speaks: a request head read within a size limit, a
//! body read only when asked, and plain responses.

use std::io::{self, BufRead, Read, Write};
use std::net::TcpStream;

use serde_json::json;

/// The largest request head (request line and headers) that is read: 64 KiB.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// The largest request body that is read: 32 MiB (a long-lived sender's history grows
/// with every message it sent).
const MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// One request head.
pub(super) struct Head {
    pub(super) method: String,
    pub(super) path: String,
    /// The API key, from `x-api-key` or `Authorization: Bearer`.
    pub(super) api_key: Option<String>,
    /// The body's announced length, at most [`MAX_BODY_BYTES`].
    pub(super) length: usize,
}

/// Reads one request head, and nothing of its body (past what a read of the head's last
/// bytes brings into `reader`'s buffer). An error of kind `InvalidData` is a head this
/// endpoint does not read; any other is the connection's (closed, timed out).
pub(super) fn read_head(reader: &mut impl BufRead) -> io::Result<Head> {
    let mut head = Vec::new();
    loop {
        let before = head.len();
        let read = reader
            .take((MAX_HEAD_BYTES + 1 - head.len()) as u64)
            .read_until(b'\n', &mut head)?;
        if read == 0 {
            return Err(invalid("the connection closed inside a request head"));
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
    Ok(Head {
        method: method.to_owned(),
        path: path.to_owned(),
        api_key,
        length,
    })
}

/// Reads the body `head` announced.
pub(super) fn read_body(reader: &mut impl Read, head: &Head) -> io::Result<Vec<u8>> {
    let mut body = vec![0; head.length];
    reader.read_exact(&mut body)?;
    Ok(body)
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what)
}

/// Whether the connection stays open after a response, as the response head tells.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Then {
    KeepAlive,
    Close,
}

pub(super) fn respond(
    mut out: &TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    then: Then,
) -> io::Result<()> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        503 => "Service Unavailable",
        _ => "Not Found",
    };
    let connection = if then == Then::Close {
        "connection: close\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\ncache-control: no-cache\r\n{connection}\r\n",
        body.len()
    );
    out.write_all(head.as_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// An error response in the Messages API's shape.
pub(super) fn respond_error(
    out: &TcpStream,
    status: u16,
    kind: &str,
    message: &str,
    then: Then,
) -> io::Result<()> {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    respond(
        out,
        status,
        "application/json",
        body.to_string().as_bytes(),
        then,
    )
}
