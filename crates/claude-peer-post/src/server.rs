//! The post office on its socket: one thread owns the store and the deliverer; a thread
//! for each client and one following the registry feed it requests and wake-ups.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_registry::ClaudeHome;
use claude_peer_watch::Watcher;

use crate::lock::Lock;
use crate::protocol::{self, Answer, MAX_REQUEST_BYTES, Record, Request, SentRecord};
use crate::{Address, Carrier, Error, Heard, NewMessage, PostOffice, SentNow, Step, Store};

/// The socket's file name in the runtime directory.
pub const SOCKET_FILE: &str = "post.sock";

/// How long a post office with nothing waiting and no client stays, unless told.
pub const DEFAULT_IDLE_EXIT: Duration = Duration::from_secs(600);

/// Records an answer may have in flight to a slow client before the owner waits for it.
const ANSWER_BACKLOG: usize = 64;

/// What the request thread is fed.
#[derive(Debug)]
enum Input {
    Request(Request, SyncSender<Answer>),
    Stop,
}

/// Stops a running [`Server`] from another thread (a signal handler's).
#[derive(Debug, Clone)]
pub struct Stopper(Sender<Input>);

impl Stopper {
    /// Makes [`Server::run`] return once its current step is done.
    pub fn stop(&self) {
        let _ = self.0.send(Input::Stop);
    }
}

/// A post office bound to its socket, holding the lock that makes it the user's only one.
#[derive(Debug)]
pub struct Server {
    lock: Lock,
    listener: UnixListener,
    socket: SocketFile,
    inputs: (Sender<Input>, Receiver<Input>),
}

/// The bound socket's file, removed when the server ends (a killed one's is replaced by
/// the next).
#[derive(Debug)]
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Server {
    /// Takes the lock in the private directory `dir` (made so when missing), then binds
    /// `post.sock` there (0600), replacing one a killed post office left: only the lock's
    /// holder ever binds it.
    pub fn bind(dir: &Path) -> Result<Self, Error> {
        let dir = claude_peer_sender::private_dir(dir).map_err(|source| Error::Dir {
            path: dir.to_owned(),
            source,
        })?;
        let lock = Lock::take(&dir)?;
        let socket = dir.join(SOCKET_FILE);
        let io = |source| Error::Io {
            path: socket.clone(),
            source,
        };
        match std::fs::remove_file(&socket) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => return Err(io(err)),
            _ => {}
        }
        let listener = UnixListener::bind(&socket).map_err(io)?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
        Ok(Self {
            lock,
            listener,
            socket: SocketFile(socket),
            inputs: mpsc::channel(),
        })
    }

    /// Its socket.
    #[must_use]
    pub fn socket(&self) -> &Path {
        &self.socket.0
    }

    /// What stops it.
    #[must_use]
    pub fn stopper(&self) -> Stopper {
        Stopper(self.inputs.0.clone())
    }

    /// Serves until stopped, or until `idle_exit` has passed with nothing waiting and no
    /// client, holding a lock beside the store as well (`post.db.lock`): a second post office
    /// on the same store, through another runtime directory, is [`Error::Running`]. Requests are answered here, on a connection to the store of their own;
    /// the deliverer runs on a thread of its own, so a send under way never keeps a
    /// request waiting. It passes over the waiting messages whenever the registry of
    /// `home` changes, a message is posted, or a backoff or expiry is due; when stopped,
    /// an attempt under way is finished and recorded first.
    pub fn run<C: Carrier + 'static>(
        self,
        mut office: PostOffice<C>,
        home: &ClaudeHome,
        idle_exit: Option<Duration>,
    ) -> Result<(), Error> {
        // The lock and the socket's file last until this returns.
        let Self {
            lock: _lock,
            listener,
            socket: _socket,
            inputs: (to, inputs),
        } = self;
        // One post office per store too: two runtime directories (a login without
        // XDG_RUNTIME_DIR beside one with it) must not both deliver from one store.
        let store_path = office.store().path().to_owned();
        let mut lock_path = store_path.clone().into_os_string();
        lock_path.push(".lock");
        let _store_lock = Lock::take_file(Path::new(&lock_path))?;
        office.recover()?;
        let mut store = Store::open(&store_path)?;
        let office_home = office.home().root().display().to_string();
        let (wake, wakes) = mpsc::channel();
        let heard = wake.clone();
        office.listen(Arc::new(move |event| {
            let _ = heard.send(Wake::Heard(Box::new(event)));
        }));
        let clients = Arc::new(AtomicUsize::new(0));
        accept(listener, to, Arc::clone(&clients))?;
        follow(home.clone(), wake.clone())?;
        let deliverer = thread::Builder::new()
            .name("post-deliver".to_owned())
            .spawn(move || deliver(office, &wakes))
            .map_err(Error::Thread)?;
        let mut quiet_since = Instant::now();
        loop {
            match inputs.recv_timeout(Duration::from_secs(1)) {
                Ok(Input::Request(request, reply)) => {
                    match answer(&mut store, &office_home, request, &reply) {
                        Asked::Answered { ready: false } => {}
                        Asked::Answered { ready: true } => {
                            let _ = wake.send(Wake::Now);
                        }
                        Asked::SendNow(id) => {
                            let _ = wake.send(Wake::SendNow(id, reply));
                        }
                    }
                }
                Ok(Input::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => {}
            }
            if deliverer.is_finished() {
                break;
            }
            let busy = clients.load(Ordering::Acquire) > 0 || store.has_open()?;
            if busy {
                quiet_since = Instant::now();
            } else if idle_exit.is_some_and(|idle| quiet_since.elapsed() >= idle) {
                break;
            }
        }
        let _ = wake.send(Wake::Stop);
        deliverer.join().unwrap_or_else(|_| {
            Err(Error::Thread(std::io::Error::other(
                "the deliverer panicked",
            )))
        })
    }
}

/// What wakes the deliverer.
enum Wake {
    /// Something may be ready to go: the registry changed, a message was posted.
    Now,
    /// A sender heard something after a send: a later receipt, to record.
    Heard(Box<Heard>),
    /// A message posted by `send`, to send at once; its answer goes to the client.
    SendNow(String, SyncSender<Answer>),
    Stop,
}

/// The deliverer's loop: a pass at once, then whenever woken or a backoff or expiry is
/// due; what senders hear is recorded as it comes, and senders without work stopped.
fn deliver<C: Carrier>(mut office: PostOffice<C>, wakes: &Receiver<Wake>) -> Result<(), Error> {
    let mut due = Some(Instant::now());
    let mut tidy = None;
    let mut prune = Instant::now();
    loop {
        if prune <= Instant::now() {
            office.prune()?;
            prune = Instant::now() + PRUNE_EVERY;
        }
        let next = [due, tidy, Some(prune)].into_iter().flatten().min();
        let wait = next.map_or(Duration::from_secs(3600), |at| {
            at.saturating_duration_since(Instant::now())
        });
        let first = match wakes.recv_timeout(wait) {
            Ok(wake) => Some(wake),
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
            Err(RecvTimeoutError::Timeout) => None,
        };
        // A burst of wake-ups is one pass.
        for wake in first
            .into_iter()
            .chain(std::iter::from_fn(|| wakes.try_recv().ok()))
        {
            match wake {
                Wake::Now => due = Some(Instant::now()),
                Wake::Heard(heard) => office.hear(&heard)?,
                Wake::SendNow(id, reply) => {
                    office.send_now(
                        id,
                        Box::new(move |sent| drop(reply.send(sent_answer(sent)))),
                    );
                    due = Some(Instant::now());
                }
                Wake::Stop => return Ok(()),
            }
        }
        let now = Instant::now();
        if due.is_some_and(|at| at <= now) {
            due = match office.pass() {
                Ok(_) => next_due(&mut office)?,
                // The registry could not be read: try again in a second.
                Err(Error::Registry(_)) => Some(Instant::now() + Duration::from_secs(1)),
                Err(err) => return Err(err),
            };
            tidy = office.tidy();
        } else if tidy.is_some_and(|at| at <= now) {
            tidy = office.tidy();
        }
    }
}

/// When the next pass is due: the earliest backoff or expiry of a waiting message.
fn next_due<C: Carrier>(office: &mut PostOffice<C>) -> Result<Option<Instant>, Error> {
    let now = crate::office::now_ms();
    Ok(office
        .store()
        .next_due_ms(now)?
        .map(|at| Instant::now() + Duration::from_millis(at.saturating_sub(now))))
}

/// How often the history is pruned to its retention (and once at the start).
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// How long a message of `send` may take to go before it expires unsent.
const SEND_NOW_EXPIRY: Duration = Duration::from_secs(600);

/// What became of a request.
enum Asked {
    /// Answered; whether it may have made a message ready to go.
    Answered { ready: bool },
    /// The message of a `send`, posted: the deliverer answers once it went.
    SendNow(String),
}

/// The answer to a `send`, once its message went (or did not).
fn sent_answer(sent: Result<SentNow, Error>) -> Answer {
    match sent {
        Ok(sent) => Answer::Sent {
            ok: true,
            record: Record::from(&sent.message),
            sent: SentRecord::new(&sent.sent),
        },
        Err(err) => failed(&err),
    }
}

/// Answers `request` on `reply`, or posts the message of a `send`.
fn answer(
    store: &mut Store,
    office_home: &str,
    request: Request,
    reply: &SyncSender<Answer>,
) -> Asked {
    let now = crate::office::now_ms();
    let done = |record: Option<Record>| Answer::Done {
        ok: true,
        record,
        pid: None,
        home: None,
    };
    let record = |message: &crate::Message| Some(Record::from(message));
    let mut ready = false;
    let result: Result<Answer, Error> = match request {
        Request::Post {
            from,
            key,
            to_kind,
            to,
            text,
            expire_ms,
            in_reply_to,
        } => protocol::address(&to_kind, to)
            .and_then(|to| {
                let new = NewMessage {
                    from,
                    key,
                    to,
                    text,
                    expires_at_ms: now.saturating_add(expire_ms),
                    in_reply_to,
                };
                ready = true;
                store.post(&new, now)
            })
            .map(|posted| done(record(&posted.message))),
        Request::Get { id } => store
            .get(&id)
            .and_then(|found| found.ok_or(Error::NoSuchMessage(id)))
            .map(|message| done(record(&message))),
        Request::Cancel { id } => store
            .step(&id, &Step::Cancel, now)
            .map(|message| done(record(&message))),
        Request::Retry { id } => {
            ready = true;
            store
                .step(&id, &Step::Retry, now)
                .map(|message| done(record(&message)))
        }
        Request::Outbox => store
            .outbox(|message| stream(reply, &message))
            .map(|()| done(None)),
        Request::Send {
            from,
            to,
            text,
            in_reply_to,
        } => {
            let new = NewMessage {
                from,
                key: None,
                to: Address::SessionId(to),
                text,
                expires_at_ms: now
                    .saturating_add(u64::try_from(SEND_NOW_EXPIRY.as_millis()).unwrap_or(u64::MAX)),
                in_reply_to,
            };
            match store.post(&new, now) {
                Ok(posted) => return Asked::SendNow(posted.message.id),
                Err(err) => Err(err),
            }
        }
        Request::Ping => Ok(Answer::Done {
            ok: true,
            record: None,
            pid: Some(std::process::id()),
            home: Some(office_home.to_owned()),
        }),
    };
    let _ = reply.send(result.unwrap_or_else(|err| failed(&err)));
    Asked::Answered { ready }
}

fn stream(reply: &SyncSender<Answer>, message: &crate::Message) -> std::ops::ControlFlow<()> {
    let answer = Answer::Record {
        record: Record::from(message),
    };
    if reply.send(answer).is_ok() {
        std::ops::ControlFlow::Continue(())
    } else {
        std::ops::ControlFlow::Break(())
    }
}

fn failed(err: &Error) -> Answer {
    Answer::Failed {
        ok: false,
        error: err.as_str().to_owned(),
        message: err.to_string(),
    }
}

/// Accepts clients on a thread of its own, a thread each.
fn accept(
    listener: UnixListener,
    to: Sender<Input>,
    clients: Arc<AtomicUsize>,
) -> Result<(), Error> {
    spawn("post-accept", move || {
        for stream in listener.incoming().flatten() {
            let (to, clients) = (to.clone(), Arc::clone(&clients));
            let _ = thread::Builder::new()
                .name("post-client".to_owned())
                .spawn(move || {
                    clients.fetch_add(1, Ordering::AcqRel);
                    serve_client(stream, &to);
                    clients.fetch_sub(1, Ordering::AcqRel);
                });
        }
    })
}

/// Follows the registry on a thread of its own: each change wakes the deliverer.
fn follow(home: ClaudeHome, to: Sender<Wake>) -> Result<(), Error> {
    let mut watcher = Watcher::os(home).map_err(Error::Watch)?;
    spawn("post-watch", move || {
        while let Ok(next) = watcher.next_event(Duration::from_secs(3600)) {
            if next.is_some() && to.send(Wake::Now).is_err() {
                return;
            }
        }
    })
}

fn spawn(name: &str, work: impl FnOnce() + Send + 'static) -> Result<(), Error> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(work)
        .map(drop)
        .map_err(Error::Thread)
}

/// One client: only this user's (by the socket's peer credentials); a request a line,
/// each line at most [`MAX_REQUEST_BYTES`], each answered in full before the next.
fn serve_client(stream: UnixStream, to: &Sender<Input>) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    let uid = rustix::process::getuid().as_raw();
    let peer = rustix::net::sockopt::socket_peercred(&stream).map(|cred| cred.uid.as_raw());
    if peer.ok() != Some(uid) {
        let refusal = Answer::Failed {
            ok: false,
            error: "not_your_post_office".to_owned(),
            message: format!("this post office serves uid {uid} only"),
        };
        let _ = write_line(&mut out, &refusal);
        return;
    }
    let mut lines = BufReader::new(stream);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(MAX_REQUEST_BYTES).unwrap_or(u64::MAX) + 1;
        match (&mut lines).take(limit).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.last() != Some(&b'\n') {
            let too_long = Answer::Failed {
                ok: false,
                error: "request_too_long".to_owned(),
                message: format!("a request line is at most {MAX_REQUEST_BYTES} bytes"),
            };
            let _ = write_line(&mut out, &too_long);
            return;
        }
        let request = match serde_json::from_slice::<Request>(&line) {
            Ok(request) => request,
            Err(err) => {
                let bad = Answer::Failed {
                    ok: false,
                    error: "bad_request".to_owned(),
                    message: format!("the request is not one this post office takes: {err}"),
                };
                if write_line(&mut out, &bad).is_err() {
                    return;
                }
                continue;
            }
        };
        let (reply, answers) = mpsc::sync_channel(ANSWER_BACKLOG);
        if to.send(Input::Request(request, reply)).is_err() {
            return;
        }
        for answer in answers {
            let last = !matches!(answer, Answer::Record { .. });
            if write_line(&mut out, &answer).is_err() {
                return;
            }
            if last {
                break;
            }
        }
    }
}

fn write_line(out: &mut impl Write, answer: &Answer) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(answer).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line).and_then(|()| out.flush())
}
