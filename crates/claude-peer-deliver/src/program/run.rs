//! One run of a relay program: the message fed in, its output drained and its exit
//! awaited in one `poll`, within the timeout.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::io::ioctl_fionbio;
use rustix::process::{Pid as RawPid, PidfdFlags, pidfd_open};

use super::STDERR_TAIL_BYTES;
use super::stdout::Stdout;
use crate::child::ChildGroup;
use claude_peer_probe::stream::Tail;

/// After the relay exits, how long its output pipes may stay open (held by something it
/// left running) before what was read so far is taken as all of it.
const DRAIN_GRACE: Duration = Duration::from_secs(1);

/// How often a stop flag is looked at while the program runs.
const STOP_EVERY: Duration = Duration::from_millis(50);

/// What one run of a relay came to.
pub(super) struct Run {
    /// The exit status, or `None` when it was killed for running past `timeout` or for
    /// the stop flag.
    pub(super) status: Option<ExitStatus>,
    /// Whether it was killed because the stop flag was set.
    pub(super) stopped: bool,
    pub(super) timeout: Duration,
    pub(super) stdin_error: Option<io::Error>,
    pub(super) stderr: Tail,
    pub(super) stdout: Stdout,
}

/// Feeds the message, drains the output and waits for the exit in one `poll` over the
/// child's pidfd and its pipes (non-blocking, so a relay that reads no stdin or fills a
/// pipe cannot stall us), killing the process group at the timeout. After the exit, the
/// pipes get [`DRAIN_GRACE`] to close: something the relay left running may hold them.
pub(super) fn watch(
    group: &mut ChildGroup,
    message: &str,
    timeout: Duration,
    stop: Option<&AtomicBool>,
) -> io::Result<Run> {
    let deadline = Instant::now().checked_add(timeout);
    let pid = RawPid::from_raw(group.id().cast_signed());
    // Without pidfds (old kernels), the exit is looked for every few milliseconds.
    let pidfd = pid.and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let mut stdin = group.child_mut().stdin.take();
    let mut stdout = group.child_mut().stdout.take();
    let mut stderr = group.child_mut().stderr.take();
    for fd in [
        stdin.as_ref().map(AsFd::as_fd),
        stdout.as_ref().map(AsFd::as_fd),
        stderr.as_ref().map(AsFd::as_fd),
    ]
    .into_iter()
    .flatten()
    {
        ioctl_fionbio(fd, true)?;
    }
    let mut input = message.as_bytes();
    let mut run = Run {
        status: None,
        stopped: false,
        timeout,
        stdin_error: None,
        stderr: Tail::new(STDERR_TAIL_BYTES),
        stdout: Stdout::default(),
    };
    let mut ended_at: Option<Instant> = None;
    let mut buf = vec![0; 8192];
    loop {
        if ended_at.is_none()
            && let Some(status) = group.try_wait()?
        {
            run.status = Some(status);
            ended_at = Some(Instant::now());
        }
        let now = Instant::now();
        let until = match ended_at {
            Some(_) if stdout.is_none() && stderr.is_none() => break,
            Some(at) if now >= at + DRAIN_GRACE => break,
            Some(at) => at + DRAIN_GRACE,
            None if deadline.is_some_and(|d| now >= d) => {
                group.kill_and_reap();
                ended_at = Some(now);
                continue;
            }
            None if stop.is_some_and(|stop| stop.load(Ordering::Acquire)) => {
                group.kill_and_reap();
                run.stopped = true;
                ended_at = Some(now);
                continue;
            }
            None => deadline.unwrap_or(now + Duration::from_secs(3600)),
        };
        let wait = if pidfd.is_some() || ended_at.is_some() {
            until - now
        } else {
            (until - now).min(Duration::from_millis(5))
        };
        // A stop flag is looked at every few tens of milliseconds.
        let wait = match stop {
            Some(_) if ended_at.is_none() => wait.min(STOP_EVERY),
            _ => wait,
        };
        // The pidfd only wakes the wait: the next turn reaps the relay.
        let pidfd = pidfd.as_ref().filter(|_| ended_at.is_none());
        let [_, out_ready, err_ready, in_ready] = ready(
            [
                watched(pidfd.map(AsFd::as_fd), PollFlags::IN),
                watched(stdout.as_ref().map(AsFd::as_fd), PollFlags::IN),
                watched(stderr.as_ref().map(AsFd::as_fd), PollFlags::IN),
                watched(stdin.as_ref().map(AsFd::as_fd), PollFlags::OUT),
            ],
            wait,
        )?;
        if out_ready && !read_some(&mut stdout, &mut buf, |chunk| run.stdout.push(chunk)) {
            run.stdout.finish();
        }
        if err_ready {
            read_some(&mut stderr, &mut buf, |chunk| run.stderr.push(chunk));
        }
        if in_ready {
            feed(&mut stdin, &mut input, &mut run.stdin_error);
        }
    }
    Ok(run)
}

/// Writes what `stdin` takes of `input` now; closes it once all is written (closing it
/// tells the relay the message is whole), or the relay stopped reading.
fn feed<P: AsFd>(stdin: &mut Option<P>, input: &mut &[u8], error: &mut Option<io::Error>) {
    let Some(pipe) = stdin else { return };
    match rustix::io::write(&*pipe, input) {
        Ok(n) => *input = &input[n..],
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => {}
        Err(rustix::io::Errno::PIPE) => *input = &[],
        Err(err) => {
            *error = Some(err.into());
            *input = &[];
        }
    }
    if input.is_empty() {
        *stdin = None;
    }
}

/// Polls the fds present in `slots` up to `wait`; which of the slots are ready.
fn ready<const N: usize>(slots: [Option<PollFd<'_>>; N], wait: Duration) -> io::Result<[bool; N]> {
    let present = slots.each_ref().map(Option::is_some);
    let mut fds: Vec<PollFd<'_>> = slots.into_iter().flatten().collect();
    let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
        tv_sec: 3600,
        tv_nsec: 0,
    });
    match poll(&mut fds, Some(&timeout)) {
        Ok(_) | Err(rustix::io::Errno::INTR) => {}
        Err(err) => return Err(err.into()),
    }
    let mut events = fds.iter().map(|fd| !fd.revents().is_empty());
    Ok(present.map(|here| here && events.next().unwrap_or(false)))
}

/// `fd` polled for `flags`, when there is one.
fn watched(fd: Option<BorrowedFd<'_>>, flags: PollFlags) -> Option<PollFd<'_>> {
    fd.map(|fd| PollFd::from_borrowed_fd(fd, flags))
}

/// Reads what `pipe` has now into `sink`; closes it (and says `false`) at its end.
fn read_some<P: AsFd>(pipe: &mut Option<P>, buf: &mut [u8], mut sink: impl FnMut(&[u8])) -> bool {
    let Some(fd) = pipe else { return false };
    match rustix::io::read(&*fd, &mut *buf) {
        Ok(0) => {}
        Ok(n) => {
            sink(&buf[..n]);
            return true;
        }
        Err(rustix::io::Errno::AGAIN | rustix::io::Errno::INTR) => return true,
        Err(_) => {}
    }
    *pipe = None;
    false
}
