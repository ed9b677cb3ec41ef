//! `watch`: events whenever the live set or a live session's fields change.
//!
//! inotify on the registry directory (on the home while the directory does not exist)
//! wakes the loop when a record is written; a pidfd per live session wakes it when the
//! process exits, since a crash leaves its record behind and writes nothing. A slow
//! periodic rescan catches the rest (a pid reused without any write). Where inotify is
//! unavailable, or with `--poll`, the registry is polled. This command never creates
//! or writes anything in the Claude home.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use claude_peer_registry::{ClaudeHome, Pid, Record};
use claude_peer_resolve::{Discovery, Scope, Session};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::inotify;
use serde::Serialize;

use crate::commands::{Fail, Os, scan};
use crate::output::{Exit, Output};
use crate::view::{SessionJson, now_ms, status_text};

/// How often to rescan with nothing else to wake us: catches pid reuse without writes.
const RESCAN_EVERY: Duration = Duration::from_secs(2);
/// How often to rescan when polling is all there is.
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(200);

#[derive(Debug, Serialize)]
struct Event<'a> {
    event: &'static str,
    session: SessionJson<'a>,
}

pub(crate) fn run(home: &ClaudeHome, force_poll: bool, out: &Output) -> Result<Exit, Fail> {
    let discovery = Discovery::os();
    let mut notify = if force_poll { None } else { Notify::new() };
    let mut known: BTreeMap<u32, Session> = BTreeMap::new();
    let mut pidfds: BTreeMap<u32, OwnedFd> = BTreeMap::new();
    loop {
        if let Some(notify) = &mut notify {
            notify.watch(home);
        }
        let live = live_now(&discovery, home, out)?;
        emit_changes(&mut known, live, out)?;
        pidfds.retain(|pid, _| known.contains_key(pid));
        for pid in known.keys() {
            if !pidfds.contains_key(pid)
                && let Some(fd) = pidfd(*pid)
            {
                pidfds.insert(*pid, fd);
            }
        }
        let timeout = if notify.is_some() {
            RESCAN_EVERY
        } else {
            POLL_EVERY
        };
        if wait(notify.as_ref(), &pidfds, timeout)? == Wake::StdoutClosed {
            return Ok(Exit::Success);
        }
    }
}

fn live_now(
    discovery: &Os,
    home: &ClaudeHome,
    out: &Output,
) -> Result<BTreeMap<u32, Session>, Fail> {
    Ok(scan(discovery, home, Scope::Live, out)?
        .sessions
        .into_iter()
        .filter_map(|s| Some((s.pid?.get(), s)))
        .collect())
}

/// Prints `vanished`, then `appeared` and `changed` events, in pid order.
fn emit_changes(
    known: &mut BTreeMap<u32, Session>,
    live: BTreeMap<u32, Session>,
    out: &Output,
) -> io::Result<()> {
    let vanished: Vec<u32> = known
        .keys()
        .filter(|pid| !live.contains_key(pid))
        .copied()
        .collect();
    for pid in vanished {
        if let Some(session) = known.remove(&pid) {
            print(out, "vanished", &session)?;
        }
    }
    for (pid, session) in live {
        let event = match known.get(&pid) {
            None => "appeared",
            Some(before) if SessionJson::value(before) != SessionJson::value(&session) => "changed",
            Some(_) => continue,
        };
        print(out, event, &session)?;
        known.insert(pid, session);
    }
    Ok(())
}

fn print(out: &Output, event: &'static str, session: &Session) -> io::Result<()> {
    if out.json {
        return out.json(&Event {
            event,
            session: SessionJson::new(session),
        });
    }
    let record = session.record.as_ref();
    let word = match event {
        "appeared" => out.style.paint("32", "appeared"),
        "vanished" => out.style.paint("31", "vanished"),
        _ => out.style.paint("33", "changed "),
    };
    out.text(&format!(
        "{word} {} pid {} {} {}\n",
        record.and_then(Record::display_name).unwrap_or("-"),
        session.pid.map_or(0, Pid::get),
        status_text(record, now_ms()),
        record.and_then(|r| r.cwd.as_deref()).unwrap_or("-"),
    ))
}

/// inotify on the registry directory, or on the home until the directory appears.
#[derive(Debug)]
struct Notify {
    fd: OwnedFd,
}

impl Notify {
    fn new() -> Option<Self> {
        let fd =
            inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
        Some(Self { fd })
    }

    /// (Re)establishes the watches; adding a watch that exists is a no-op. The home is
    /// watched too, so that a registry created (or re-created) later is picked up.
    fn watch(&mut self, home: &ClaudeHome) {
        let registry = inotify::WatchFlags::CREATE
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MODIFY
            | inotify::WatchFlags::CLOSE_WRITE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::ATTRIB
            | inotify::WatchFlags::DELETE_SELF
            | inotify::WatchFlags::MOVE_SELF
            | inotify::WatchFlags::DONT_FOLLOW;
        let parent = inotify::WatchFlags::CREATE
            | inotify::WatchFlags::MOVED_TO
            | inotify::WatchFlags::DELETE
            | inotify::WatchFlags::MOVED_FROM
            | inotify::WatchFlags::ONLYDIR;
        let _ = inotify::add_watch(&self.fd, home.root(), parent);
        let _ = inotify::add_watch(&self.fd, home.sessions_dir(), registry);
    }

    /// Reads and discards pending events: any of them means "scan again".
    fn drain(&self) {
        let mut buffer = [0_u8; 4096];
        while matches!(rustix::io::read(&self.fd, &mut buffer), Ok(n) if n > 0) {}
    }
}

/// A pidfd that becomes readable when the process exits; `None` where unsupported.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()
}

#[derive(Debug, PartialEq, Eq)]
enum Wake {
    Rescan,
    StdoutClosed,
}

/// Sleeps until a registry event, a process exit, stdout closing or `timeout`.
fn wait(
    notify: Option<&Notify>,
    pidfds: &BTreeMap<u32, OwnedFd>,
    timeout: Duration,
) -> io::Result<Wake> {
    let stdout = io::stdout();
    let stdout = stdout.as_fd();
    let mut fds = Vec::with_capacity(pidfds.len() + 2);
    // Events 0 on stdout: poll reports only errors and hang-ups, i.e. the reader left.
    fds.push(PollFd::from_borrowed_fd(stdout, PollFlags::empty()));
    if let Some(notify) = notify {
        fds.push(PollFd::new(&notify.fd, PollFlags::IN));
    }
    for fd in pidfds.values() {
        fds.push(PollFd::new(fd, PollFlags::IN));
    }
    let timeout = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(err) => return Err(err.into()),
    }
    if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) {
        return Ok(Wake::StdoutClosed);
    }
    if let Some(notify) = notify {
        notify.drain();
    }
    Ok(Wake::Rescan)
}
