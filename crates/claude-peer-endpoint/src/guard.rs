//! What a stranger on this machine can make the endpoint spend: a constant-time key
//! check, bounded waits, and one of a bounded number of connections; never a read of a
//! request body.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::{Shutdown, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The most connections kept that have not shown the key yet. A new one past it shuts
/// the oldest down: a flood of idle connections then only ever displaces itself, as the
/// real client shows its key in its first bytes.
const MAX_WAITING: usize = 64;
/// The most connections kept that showed the key; a new one past it is refused. Claude
/// Code keeps a few; only a holder of the secret can take these.
const MAX_AUTHENTICATED: usize = 16;

/// The per-run secret, kept as its BLAKE3 hash: a key is checked by hashing it and
/// comparing hashes in constant time, so the time taken tells neither where a guess
/// differs nor how long the secret is.
pub(super) struct Secret(blake3::Hash);

impl Secret {
    pub(super) fn new(secret: &str) -> Self {
        Self(blake3::hash(secret.as_bytes()))
    }

    /// Whether `key` is the secret.
    pub(super) fn matches(&self, key: Option<&str>) -> bool {
        // `blake3::Hash`'s `==` compares every byte, in constant time.
        key.is_some_and(|key| blake3::hash(key.as_bytes()) == self.0)
    }
}

/// A connection's reading side whose reads all end by one deadline: each read may wait
/// only for the time left, so a client sending a byte at a time cannot stretch it.
pub(super) struct Timed {
    stream: TcpStream,
    deadline: Instant,
}

impl Timed {
    /// `stream`, its reads ending within `wait` from now.
    pub(super) fn new(stream: TcpStream, wait: Duration) -> Self {
        Self {
            stream,
            deadline: Instant::now() + wait,
        }
    }

    /// Reads from now on end within `wait`.
    pub(super) fn wait(&mut self, wait: Duration) {
        self.deadline = Instant::now() + wait;
    }

    /// The connection, to write responses to.
    pub(super) fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

impl Read for Timed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = time_left(self.deadline, Instant::now())?;
        self.stream.set_read_timeout(Some(left))?;
        self.stream.read(buf)
    }
}

/// The time left at `now` before `deadline`; a `TimedOut` error once none is left (a
/// socket timeout cannot be zero).
fn time_left(deadline: Instant, now: Instant) -> io::Result<Duration> {
    deadline
        .checked_duration_since(now)
        .filter(|left| !left.is_zero())
        .ok_or_else(|| io::Error::new(io::ErrorKind::TimedOut, "the deadline passed"))
}

/// The connections being served, counted against the caps.
#[derive(Default)]
pub(super) struct Connections(Mutex<Pools>);

#[derive(Default)]
struct Pools {
    /// The next connection's id.
    next: u64,
    /// The connections that have not shown the key yet, oldest first, each with a handle
    /// to shut it down.
    waiting: VecDeque<(u64, TcpStream)>,
    /// How many connections showed the key.
    authenticated: usize,
}

impl Connections {
    /// Counts a new connection among those waiting for their key; at the cap, shuts the
    /// oldest of them down first, which ends its thread's read at once.
    pub(super) fn admit(self: &Arc<Self>, stream: &TcpStream) -> io::Result<Slot> {
        let handle = stream.try_clone()?;
        let mut pools = self.lock();
        if pools.waiting.len() >= MAX_WAITING
            && let Some((_, oldest)) = pools.waiting.pop_front()
        {
            let _ = oldest.shutdown(Shutdown::Both);
        }
        let id = pools.next;
        pools.next += 1;
        pools.waiting.push_back((id, handle));
        Ok(Slot {
            id,
            authenticated: false,
            connections: Arc::clone(self),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Pools> {
        // Nothing panics while holding the lock; a poisoned one is still consistent.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connection's place in [`Connections`], given back when dropped.
pub(super) struct Slot {
    id: u64,
    authenticated: bool,
    connections: Arc<Connections>,
}

impl Slot {
    /// Moves the connection, which just showed the key, among the authenticated ones:
    /// false when they are at their cap, or this one was shut down meanwhile.
    pub(super) fn authenticate(&mut self) -> bool {
        if self.authenticated {
            return true;
        }
        let mut pools = self.connections.lock();
        let Some(at) = pools.waiting.iter().position(|(id, _)| *id == self.id) else {
            return false;
        };
        pools.waiting.remove(at);
        if pools.authenticated >= MAX_AUTHENTICATED {
            return false;
        }
        pools.authenticated += 1;
        self.authenticated = true;
        true
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut pools = self.connections.lock();
        if self.authenticated {
            pools.authenticated -= 1;
        } else {
            pools.waiting.retain(|(id, _)| *id != self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};

    use super::*;

    #[test]
    fn only_the_secret_itself_matches() {
        let secret = Secret::new("s3cret-0123456789");
        assert!(secret.matches(Some("s3cret-0123456789")));
        assert!(
            !secret.matches(Some("s3cret-0123456788")),
            "one byte differs"
        );
        assert!(
            !secret.matches(Some("S3cret-0123456789")),
            "first byte differs"
        );
        assert!(!secret.matches(Some("s3cret-012345678")), "shorter");
        assert!(!secret.matches(Some("s3cret-01234567890")), "longer");
        assert!(!secret.matches(Some("")));
        assert!(!secret.matches(None));
        assert!(Secret::new("").matches(Some("")));
    }

    #[test]
    fn the_time_left_runs_out_at_the_deadline() {
        let now = Instant::now();
        let deadline = now + Duration::from_secs(10);
        assert_eq!(time_left(deadline, now).unwrap(), Duration::from_secs(10));
        let later = now + Duration::from_secs(4);
        assert_eq!(time_left(deadline, later).unwrap(), Duration::from_secs(6));
        for past in [deadline, deadline + Duration::from_secs(1)] {
            let err = time_left(deadline, past).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::TimedOut);
        }
    }

    /// A connected pair: the client's end, and the server's.
    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().unwrap().0)
    }

    #[test]
    fn the_oldest_waiting_connection_makes_room_and_authenticated_ones_are_capped() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let connections = Arc::new(Connections::default());
        let mut slots = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..=MAX_WAITING {
            let (client, server) = pair(&listener);
            slots.push(connections.admit(&server).unwrap());
            clients.push((client, server));
        }
        // The first was shut down: its server end reads the end at once.
        let mut buf = [0; 1];
        assert_eq!(clients[0].1.read(&mut buf).unwrap(), 0);
        assert!(!slots[0].authenticate(), "it was shut down");
        assert_eq!(connections.lock().waiting.len(), MAX_WAITING);

        let mut slots: Vec<Option<Slot>> = slots.into_iter().map(Some).collect();
        for slot in slots[1..=MAX_AUTHENTICATED].iter_mut().flatten() {
            assert!(slot.authenticate());
            assert!(slot.authenticate(), "once in, it stays in");
        }
        let next = MAX_AUTHENTICATED + 1;
        assert!(!slots[next].as_mut().unwrap().authenticate(), "at the cap");
        // One closing makes room again (the refused one is closed by its thread).
        slots[1] = None;
        assert!(slots[next + 1].as_mut().unwrap().authenticate());

        drop(slots);
        let pools = connections.lock();
        assert_eq!((pools.waiting.len(), pools.authenticated), (0, 0));
    }
}
