//! `watch`: prints the events of the library's watch engine (`claude-peer-watch`).
//!
//! The command only waits: on the engine's descriptor (or until its next timer), and
//! on stdout, to end with exit 0 once its reader has gone. It never creates or writes
//! anything in the Claude home.

mod hosts;

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::Duration;

use claude_peer_watch::{Event, Watcher};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::error::{Exit, Failure};
use crate::json::{SessionJson, WatchEventJson};
use crate::ops::Context;
use crate::output::Output;
use crate::table::{field, now_ms, status_text};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Poll the registry instead of using inotify (for file systems without it)
    #[arg(long)]
    poll: bool,
    /// After the sessions live at the start, a {"event":"synced"} line (for a watch
    /// across hosts, which compares them with what it knew)
    #[arg(long, hide = true)]
    synced: bool,
}

pub(crate) use hosts::{Running, exec_hosts, follow, stop};

pub(crate) fn exec(ctx: &Context, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let home = ctx.home.clone();
    let mut watcher = if args.poll {
        Watcher::os_polling(home)
    } else {
        Watcher::os(home)
    }?;
    for warning in watcher.warnings() {
        out.warn(&warning.to_string());
    }
    let mut synced = !args.synced;
    loop {
        while let Some(event) = watcher.next_event(Duration::ZERO)? {
            print(out, &event)?;
        }
        if !synced {
            out.json(&serde_json::json!({"event": "synced"}))?;
            synced = true;
        }
        if stdout_closed_while_waiting(Some(watcher.as_fd()), watcher.wake_within())? {
            return Ok(Exit::Success);
        }
    }
}

fn print(out: &Output, event: &Event) -> io::Result<()> {
    let session = event.session();
    if out.is_json() {
        return out.json(&WatchEventJson {
            event: event.as_str(),
            session: SessionJson::live(session),
        });
    }
    let record = &session.record;
    let word = match event {
        Event::Appeared(_) => out.style.paint("32", "appeared"),
        Event::Vanished(_) => out.style.paint("31", "vanished"),
        Event::Changed(_) => out.style.paint("33", "changed "),
    };
    out.styled(&format!(
        "{word} {} pid {} {} {}\n",
        field(record.display_name().unwrap_or("-")),
        session.pid,
        field(&status_text(Some(record), now_ms())),
        field(record.cwd.as_deref().unwrap_or("-")),
    ))
}

/// Waits until `watcher` (when given) has something, `timeout` passes, or stdout's
/// reader has gone (then `true`).
fn stdout_closed_while_waiting(
    watcher: Option<BorrowedFd<'_>>,
    timeout: Duration,
) -> io::Result<bool> {
    let stdout = io::stdout();
    // Events 0 on stdout: poll reports only errors and hang-ups, i.e. the reader left.
    let mut fds = vec![PollFd::from_borrowed_fd(stdout.as_fd(), PollFlags::empty())];
    if let Some(watcher) = watcher {
        fds.push(PollFd::from_borrowed_fd(watcher, PollFlags::IN));
    }
    let timeout = Timespec {
        tv_sec: i64::try_from(timeout.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(timeout.subsec_nanos()),
    };
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(err) => return Err(err.into()),
    }
    Ok(fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP))
}
