//! The post office on its socket: a real server thread, real clients, the protocol's
//! lines as written, one post office per runtime directory.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use claude_peer_deliver::{CommandRelay, Courier};
use claude_peer_post::protocol::Request;
use claude_peer_post::{Client, PostOffice, Relays, SOCKET_FILE, Server, Store};
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, proc_start, shell_script};
use serde_json::{Value, json};

/// A home with one live session working in `<home>/work`, and a post office serving it
/// on a thread, its relay writing down what it was handed.
struct Running {
    temp: TempHome,
    _session: Sleeper,
    runtime: PathBuf,
    server: Option<std::thread::JoinHandle<Result<(), claude_peer_post::Error>>>,
    stopper: claude_peer_post::Stopper,
}

impl Running {
    fn start() -> Self {
        Self::start_with("")
    }

    /// A post office whose relay runs `then` after it wrote down what it was handed.
    fn start_with(then: &str) -> Self {
        let mut temp = TempHome::new().unwrap();
        std::fs::set_permissions(temp.root(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let settings = json!({ "crossSessionInbound": "accept" });
        std::fs::write(temp.claude().user_settings(), settings.to_string()).unwrap();
        let session = Sleeper::spawn().unwrap();
        let pid = session.pid();
        let cwd = temp.root().join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        let socket = temp.socket(pid).unwrap();
        let record = json!({
            "pid": pid, "sessionId": "s-work", "cwd": cwd, "procStart": proc_start(pid).unwrap(),
            "version": "2.1.332", "peerProtocol": 1, "kind": "interactive", "entrypoint": "cli",
            "messagingSocketPath": socket, "name": "worker", "status": "idle",
        });
        temp.write_record(pid, record.to_string()).unwrap();
        let handed = temp.root().join("handed");
        let relay = shell_script(
            temp.root().join("relay"),
            &format!(
                "cat >> '{}'\necho >> '{}'\n{then}\necho '{{\"sent\":true}}'",
                handed.display(),
                handed.display()
            ),
        )
        .unwrap();
        let runtime = temp.root().join("run");
        let server = Server::bind(&runtime).unwrap();
        let stopper = server.stopper();
        let store = Store::open(&temp.root().join("state/post.db")).unwrap();
        let courier = || Courier::os().with_managed_settings(temp.root().join("managed.json"));
        let home = temp.claude().clone();
        let relays = Relays::new(courier(), home.clone(), move |_: &str| {
            CommandRelay::new(&relay)
        });
        let office = PostOffice::new(store, courier(), home.clone(), relays);
        let server = std::thread::spawn(move || server.run(office, &home, None));
        Self {
            temp,
            _session: session,
            runtime,
            server: Some(server),
            stopper,
        }
    }

    fn work(&self) -> String {
        self.temp.root().join("work").to_str().unwrap().to_owned()
    }

    /// The ids of every message in its store, newest first, read beside the post office.
    fn logged(&self) -> Vec<String> {
        let store = Store::open(&self.temp.root().join("state/post.db")).unwrap();
        let mut ids = Vec::new();
        store
            .log(&claude_peer_post::LogFilter::default(), |logged| {
                ids.push(logged.message.id);
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        ids
    }

    fn handed(&self) -> String {
        std::fs::read_to_string(self.temp.root().join("handed")).unwrap_or_default()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stopper.stop();
        if let Some(server) = self.server.take() {
            server.join().unwrap().unwrap();
        }
    }
}

/// Writes `line` to a new connection and reads one answer line back.
fn raw(runtime: &Path, line: &[u8]) -> Value {
    let mut stream = UnixStream::connect(runtime.join(SOCKET_FILE)).unwrap();
    stream.write_all(line).unwrap();
    let mut answer = String::new();
    BufReader::new(stream).read_line(&mut answer).unwrap();
    serde_json::from_str(&answer).unwrap()
}

fn post(to: &str, text: &str) -> Request {
    Request::Post {
        from: "build-bot".to_owned(),
        key: None,
        to_kind: "cwd".to_owned(),
        to: to.to_owned(),
        text: text.to_owned(),
        expire_ms: 60_000,
        in_reply_to: None,
    }
}

#[test]
fn a_posted_message_is_delivered_and_its_record_answers_get_outbox_and_log() {
    let running = Running::start();
    let mut client = Client::connect(&running.runtime).unwrap();
    let posted = client.request(&post(&running.work(), "hello over the socket"), |_| {});
    let id = posted.unwrap().record.unwrap().id;
    let deadline = Instant::now() + Duration::from_secs(20);
    let delivered = loop {
        let record = client
            .request(&Request::Get { id: id.clone() }, |_| {})
            .unwrap()
            .record
            .unwrap();
        if record.state == "delivered" || Instant::now() > deadline {
            break record;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(delivered.state, "delivered", "{delivered:?}");
    assert_eq!(delivered.session_id.as_deref(), Some("s-work"));
    assert_eq!(running.handed(), "hello over the socket\n");
    let mut open = Vec::new();
    client.request(&Request::Outbox, |r| open.push(r)).unwrap();
    assert!(open.is_empty());
    assert_eq!(running.logged(), [id]);
    let pid = client.request(&Request::Ping, |_| {}).unwrap().pid;
    assert_eq!(pid, Some(std::process::id()));
}

#[test]
fn bad_lines_are_answered_by_name_and_what_fails_changes_nothing() {
    let running = Running::start();
    let bad = raw(&running.runtime, b"{\"op\":\"post\"\n");
    assert_eq!(
        (bad["ok"].clone(), bad["error"].clone()),
        (json!(false), json!("bad_request"))
    );
    let unknown = raw(&running.runtime, b"{\"op\":\"format_disk\"}\n");
    assert_eq!(unknown["error"], "bad_request");
    let mut long = vec![b' '; claude_peer_post::protocol::MAX_REQUEST_BYTES + 10];
    long.push(b'\n');
    let too_long = raw(&running.runtime, &long);
    assert_eq!(too_long["error"], "request_too_long");
    let empty = format!(
        "{{\"op\":\"post\",\"from\":\"b\",\"to_kind\":\"cwd\",\"to\":\"{}\",\"text\":\" \",\"expire_ms\":1000}}\n",
        running.work()
    );
    let refused = raw(&running.runtime, empty.as_bytes());
    assert_eq!(refused["error"], "empty_message", "{refused}");
    let nowhere = raw(
        &running.runtime,
        b"{\"op\":\"cancel\",\"id\":\"0000000000000000\"}\n",
    );
    assert_eq!(nowhere["error"], "no_such_message");
    assert!(running.logged().is_empty(), "nothing was stored");
}

#[test]
fn a_second_post_office_in_the_same_runtime_directory_is_refused_naming_the_first() {
    let running = Running::start();
    let err = Server::bind(&running.runtime).unwrap_err();
    assert_eq!(err.as_str(), "post_office_running");
    assert!(
        err.to_string().contains(&format!(
            "a post office runs already as pid {}",
            std::process::id()
        )),
        "{err}"
    );
    // The first still answers: the second took nothing over.
    let mut client = Client::connect(&running.runtime).unwrap();
    assert!(client.request(&Request::Ping, |_| {}).is_ok());
}

#[test]
fn requests_are_answered_while_a_send_is_under_way() {
    let marks = tempfile::tempdir().unwrap();
    let (started, go) = (marks.path().join("started"), marks.path().join("go"));
    let running = Running::start_with(&format!(
        "touch '{}'; while [ ! -e '{}' ]; do sleep 0.05; done",
        started.display(),
        go.display()
    ));
    let mut client = Client::connect(&running.runtime).unwrap();
    let first = client
        .request(&post(&running.work(), "slow one"), |_| {})
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !started.exists() {
        assert!(Instant::now() < deadline, "the relay never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The relay is held: a post and a list are answered all the same.
    let (answered, answers) = std::sync::mpsc::channel();
    let runtime = running.runtime.clone();
    let to = running.work();
    std::thread::spawn(move || {
        let mut client = Client::connect(&runtime).unwrap();
        let second = client.request(&post(&to, "next one"), |_| {}).unwrap();
        let mut open = Vec::new();
        client
            .request(&Request::Outbox, |r| open.push(r.state))
            .unwrap();
        let _ = answered.send((second.record.unwrap().state, open));
    });
    let (second, open) = answers
        .recv_timeout(Duration::from_secs(10))
        .expect("answered while the send is under way");
    assert_eq!(second, "waiting");
    assert_eq!(open, ["sending", "waiting"]);
    std::fs::write(&go, b"").unwrap();
    let id = first.record.unwrap().id;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = client
            .request(&Request::Get { id: id.clone() }, |_| {})
            .unwrap()
            .record
            .unwrap()
            .state;
        if state == "delivered" {
            break;
        }
        assert!(Instant::now() < deadline, "never delivered: {state}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_client_of_another_uid_is_refused_by_the_sockets_peer_credentials() {
    assert!(
        rustix::process::geteuid().is_root(),
        "this test connects as another user (uid 65534, on one thread of its own): run it as root"
    );
    let running = Running::start();
    // Open the way to the socket, which the post office itself never does: the peer
    // check is the wall behind the runtime directory's.
    let socket = running.runtime.join(SOCKET_FILE);
    for (path, mode) in [
        (running.temp.root().to_owned(), 0o711),
        (running.runtime.clone(), 0o711),
        (socket.clone(), 0o666),
    ] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
    let answer = std::thread::spawn(move || {
        // This thread only: the raw call changes one thread's credentials.
        rustix::thread::set_thread_uid(rustix::process::Uid::from_raw(65534)).unwrap();
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream.write_all(b"{\"op\":\"outbox\"}\n").unwrap();
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).unwrap();
        line
    })
    .join()
    .unwrap();
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["error"], "not_your_post_office", "{answer}");
}

#[test]
fn a_second_post_office_on_the_same_store_through_another_runtime_directory_is_refused() {
    let running = Running::start();
    // The first answers: it holds the store's lock.
    let mut client = Client::connect(&running.runtime).unwrap();
    assert!(
        client
            .request(&Request::Ping, |_| {})
            .unwrap()
            .pid
            .is_some()
    );
    let other = running.temp.root().join("other-run");
    let server = Server::bind(&other).unwrap();
    let store = Store::open(&running.temp.root().join("state/post.db")).unwrap();
    let courier = || Courier::os().with_managed_settings(running.temp.root().join("managed.json"));
    let home = running.temp.claude().clone();
    let relays = Relays::new(courier(), home.clone(), |_: &str| {
        CommandRelay::new("/bin/false")
    });
    let office = PostOffice::new(store, courier(), home.clone(), relays);
    let err = server.run(office, &home, None).unwrap_err();
    assert_eq!(err.as_str(), "post_office_running", "{err}");
    assert!(err.to_string().contains("post.db.lock"), "{err}");
    assert!(
        err.to_string().contains(&std::process::id().to_string()),
        "{err}"
    );
}
