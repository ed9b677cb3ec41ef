//! The scripted model endpoint over real TCP: only its secret is answered, replies are
//! the Messages API's event stream, oversized requests and requests without the secret
//! are refused unread, and neither idle nor slow clients keep it from serving.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_endpoint::{Endpoint, Reply};
use serde_json::{Value, json};

fn endpoint() -> Endpoint {
    Endpoint::start(
        "s3cret",
        Arc::new(|request: &Value| {
            if request["messages"][0]["content"] == "call" {
                Reply::ToolUse {
                    id: "toolu_1".to_owned(),
                    name: "SendMessage".to_owned(),
                    input: json!({"to": "/tmp/cc-socks/1.sock", "message": "a \"quoted\"\nline"}),
                }
            } else {
                Reply::Text("Done.".to_owned())
            }
        }),
    )
    .unwrap()
}

fn connect(endpoint: &Endpoint) -> TcpStream {
    TcpStream::connect(endpoint.base_url().trim_start_matches("http://")).unwrap()
}

/// Sends one raw request and reads the response until the server closes or it is whole.
fn exchange(endpoint: &Endpoint, request: &[u8]) -> String {
    let mut stream = connect(endpoint);
    // The server may answer and close before it read all of an oversized request.
    let _ = stream.write_all(request);
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let mut response = Vec::new();
    let mut buf = [0; 4096];
    while let Ok(n @ 1..) = stream.read(&mut buf) {
        response.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(response).unwrap()
}

fn post(key_header: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST /v1/messages?beta=true HTTP/1.1\r\nhost: x\r\n{key_header}content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The `data:` payloads of an event stream.
fn events_of(response: &str) -> Vec<Value> {
    response
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[test]
fn a_request_without_the_secret_is_rejected() {
    let endpoint = endpoint();
    let body = json!({"stream": true, "messages": [{"role": "user", "content": "call"}]});
    for header in ["", "x-api-key: wrong\r\n", "authorization: Bearer nope\r\n"] {
        let response = exchange(&endpoint, &post(header, &body));
        assert!(
            response.starts_with("HTTP/1.1 401"),
            "{header:?}: {response}"
        );
        assert!(!response.contains("SendMessage"));
    }
}

#[test]
fn a_tool_call_streams_as_the_messages_api_does_with_the_exact_input() {
    let endpoint = endpoint();
    let body =
        json!({"stream": true, "model": "m", "messages": [{"role": "user", "content": "call"}]});
    let response = exchange(&endpoint, &post("x-api-key: s3cret\r\n", &body));
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("content-type: text/event-stream"));
    let events = events_of(&response);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    assert_eq!(events[1]["content_block"]["name"], "SendMessage");
    let input: Value =
        serde_json::from_str(events[2]["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(input["message"], "a \"quoted\"\nline");
    assert_eq!(events[4]["delta"]["stop_reason"], "tool_use");

    let text = json!({"stream": true, "messages": [{"role": "user", "content": "other"}]});
    let response = exchange(&endpoint, &post("authorization: Bearer s3cret\r\n", &text));
    let events = events_of(&response);
    assert_eq!(events[2]["delta"]["text"], "Done.");
    assert_eq!(events[4]["delta"]["stop_reason"], "end_turn");

    // The usage reported follows the request's size (about four bytes a token), so
    // Claude Code's own compaction keeps a long-lived sender's history bounded.
    let long =
        json!({"stream": true, "messages": [{"role": "user", "content": "y".repeat(400_000)}]});
    let response = exchange(&endpoint, &post("x-api-key: s3cret\r\n", &long));
    let reported = events_of(&response)[0]["message"]["usage"]["input_tokens"]
        .as_u64()
        .unwrap();
    assert!(
        (100_000..110_000).contains(&reported),
        "{reported} tokens for 400 kB"
    );
}

#[test]
fn bad_and_oversized_requests_get_an_error_and_nothing_is_read_past_the_limits() {
    let endpoint = endpoint();
    let huge_head = format!("GET / HTTP/1.1\r\nx-pad: {}\r\n\r\n", "a".repeat(70_000));
    assert!(exchange(&endpoint, huge_head.as_bytes()).starts_with("HTTP/1.1 400"));
    let huge_body =
        "POST /v1/messages HTTP/1.1\r\nx-api-key: s3cret\r\ncontent-length: 40000000\r\n\r\n{";
    assert!(exchange(&endpoint, huge_body.as_bytes()).starts_with("HTTP/1.1 400"));
    let not_json =
        "POST /v1/messages HTTP/1.1\r\nx-api-key: s3cret\r\ncontent-length: 3\r\n\r\nabc";
    assert!(exchange(&endpoint, not_json.as_bytes()).starts_with("HTTP/1.1 400"));
    let unknown = "GET /v1/files HTTP/1.1\r\nx-api-key: s3cret\r\n\r\n";
    assert!(exchange(&endpoint, unknown.as_bytes()).starts_with("HTTP/1.1 404"));
    // Still serving.
    let body = json!({"stream": false, "messages": [{"role": "user", "content": "call"}]});
    let response = exchange(&endpoint, &post("x-api-key: s3cret\r\n", &body));
    let message: Value = serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(message["content"][0]["name"], "SendMessage");
}

/// Whether the server closed `stream` (or reset it), without waiting.
fn closed_by_server(mut stream: &TcpStream) -> bool {
    stream.set_nonblocking(true).unwrap();
    !matches!(stream.read(&mut [0; 64]), Err(err) if err.kind() == ErrorKind::WouldBlock)
}

#[test]
fn a_flood_of_idle_connections_does_not_keep_the_real_client_out() {
    let endpoint = endpoint();
    // Half send nothing, half the start of a head that never ends.
    let idle: Vec<TcpStream> = (0..600)
        .map(|i| {
            let mut stream = connect(&endpoint);
            if i % 2 == 1 {
                stream
                    .write_all(b"POST /v1/messages HTTP/1.1\r\nx-api-")
                    .unwrap();
            }
            stream
        })
        .collect();

    let body = json!({"stream": false, "messages": [{"role": "user", "content": "call"}]});
    let response = exchange(&endpoint, &post("x-api-key: s3cret\r\n", &body));
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let message: Value = serde_json::from_str(response.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(message["content"][0]["name"], "SendMessage");

    // The endpoint kept at most 64 of them, shutting the oldest down.
    let give_up = Instant::now() + Duration::from_secs(10);
    let open = loop {
        let open = idle.iter().filter(|s| !closed_by_server(s)).count();
        if open <= 64 || Instant::now() > give_up {
            break open;
        }
        thread::sleep(Duration::from_millis(50));
    };
    assert!(open <= 64, "{open} of 600 idle connections kept");
    assert!(closed_by_server(&idle[0]), "the oldest is shut down");
}

#[test]
fn a_request_without_the_key_is_refused_before_its_body_is_read() {
    let endpoint = endpoint();
    let mut stream = connect(&endpoint);
    // Bounds on the test's own waits, well within the endpoint's 10 s head deadline: an
    // endpoint that waited for the body until then would fail here.
    let bound = Some(Duration::from_secs(5));
    stream.set_read_timeout(bound).unwrap();
    stream.set_write_timeout(bound).unwrap();
    stream
        .write_all(
            b"POST /v1/messages HTTP/1.1\r\nx-api-key: wrong\r\ncontent-length: 31457280\r\n\r\n",
        )
        .unwrap();

    // The answer comes with none of the 30 MiB sent, then the end of the connection.
    let mut response = Vec::new();
    let end = stream.read_to_end(&mut response);
    let response = String::from_utf8(response).unwrap();
    assert!(response.starts_with("HTTP/1.1 401"), "{response}");
    assert!(end.is_ok(), "the connection stays open: {end:?}");

    // Nothing reads the body: sending it fails, where a server draining it would take it.
    let chunk = vec![b' '; 1 << 20];
    let sent = (0..30).try_for_each(|_| stream.write_all(&chunk));
    let err = sent.expect_err("the server took a 30 MiB body after refusing its head");
    assert!(
        matches!(
            err.kind(),
            ErrorKind::BrokenPipe | ErrorKind::ConnectionReset
        ),
        "{err}"
    );
}

#[test]
fn a_head_sent_a_byte_at_a_time_is_cut_off() {
    let endpoint = endpoint();
    let mut stream = connect(&endpoint);
    // Each byte comes well within any per-read timeout; the head never ends.
    stream
        .set_read_timeout(Some(Duration::from_millis(250)))
        .unwrap();
    let head = b"GET / HTTP/1.1\r\nx-api-key: s3cret\r\nx-pad: ";
    let give_up = Instant::now() + Duration::from_secs(30);
    let mut sent = 0;
    let cut_off = loop {
        if Instant::now() > give_up {
            break false;
        }
        let byte = head.get(sent).copied().unwrap_or(b'a');
        if stream.write_all(&[byte]).is_err() {
            break true;
        }
        sent += 1;
        match stream.read(&mut [0; 256]) {
            Ok(0) => break true,
            Ok(_) => panic!("an answer to a head that never ended"),
            Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break true,
        }
    };
    assert!(cut_off, "still connected after 30 s and {sent} bytes");
}
