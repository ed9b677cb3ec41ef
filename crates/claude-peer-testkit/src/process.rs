//! Real processes and threads for OS tests: `sleep` children standing in for Claude Code
//! sessions, zombies, reaped pids and parked threads, all ended however a test ends;
//! start tokens read from `/proc` independently of the probe; stand-in programs; and a
//! bound on calls that must not hang.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use rustix::process::{WaitId, WaitIdOptions};

/// A `sleep 600` child standing in for a Claude Code process; killed and reaped when
/// dropped, pass or fail.
#[derive(Debug)]
pub struct Sleeper {
    pid: u32,
    /// `None` once reaped.
    child: Option<Child>,
}

impl Sleeper {
    /// Spawns `sleep 600`, its standard streams null.
    pub fn spawn() -> io::Result<Self> {
        let child = Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(Self {
            pid: child.id(),
            child: Some(child),
        })
    }

    /// Its pid, also after it was reaped.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Kills and reaps it now, leaving any record of it behind as a crash would: its pid
    /// answers `ESRCH` afterwards (until the kernel reuses it). Once reaped, does nothing.
    pub fn crash(&mut self) -> io::Result<()> {
        if let Some(child) = &mut self.child {
            child.kill()?;
            child.wait()?;
            self.child = None;
        }
        Ok(())
    }

    /// Kills it and waits for its exit without reaping it: its pid stays a zombie until
    /// [`crash`](Self::crash) or the drop reaps it.
    pub fn kill_unreaped(&mut self) -> io::Result<()> {
        if let Some(child) = &mut self.child {
            child.kill()?;
            wait_exited_unreaped(self.pid)?;
        }
        Ok(())
    }

    /// Sends the kill without waiting, so many can die at once before they are reaped.
    fn start_kill(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.crash();
    }
}

/// Many [`Sleeper`]s, all killed before any is reaped when dropped (also on panic).
#[derive(Debug)]
pub struct Children(Vec<Sleeper>);

impl Children {
    /// Spawns `n` children.
    pub fn spawn(n: usize) -> io::Result<Self> {
        (0..n)
            .map(|_| Sleeper::spawn())
            .collect::<io::Result<_>>()
            .map(Self)
    }

    /// Their pids.
    #[must_use]
    pub fn pids(&self) -> Vec<u32> {
        self.0.iter().map(Sleeper::pid).collect()
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for child in &mut self.0 {
            child.start_kill();
        }
        // Dropping each reaps it.
    }
}

/// A child that has exited and is not reaped: a zombie until dropped.
#[derive(Debug)]
pub struct Zombie(Child);

impl Zombie {
    /// Runs `true` and waits for its exit without reaping it.
    pub fn spawn() -> io::Result<Self> {
        let zombie = Self(Command::new("true").stdin(Stdio::null()).spawn()?);
        wait_exited_unreaped(zombie.pid())?;
        Ok(zombie)
    }

    /// Its pid.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Zombie {
    fn drop(&mut self) {
        let _ = self.0.wait();
    }
}

/// The pid of a child that has run `true` and been reaped: it answers `ESRCH` until the
/// kernel reuses it.
pub fn reaped_pid() -> io::Result<u32> {
    let mut child = Command::new("true").stdin(Stdio::null()).spawn()?;
    child.wait()?;
    Ok(child.id())
}

/// Blocks until the child `pid` has exited, leaving it unreaped (`waitid` with `WNOWAIT`).
fn wait_exited_unreaped(pid: u32) -> io::Result<()> {
    let pid = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| io::Error::other(format!("{pid} is not a pid")))?;
    rustix::process::waitid(
        WaitId::Pid(pid),
        WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
    )?;
    Ok(())
}

/// A thread of this process, parked until dropped: its id names no process, yet
/// answers `kill(2)` and has a stat file.
#[derive(Debug)]
pub struct ParkedThread {
    tid: u32,
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ParkedThread {
    /// Starts the thread and learns its id.
    pub fn spawn() -> io::Result<Self> {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let thread = thread::spawn(move || {
            let tid = rustix::thread::gettid().as_raw_nonzero().get();
            if tid_tx.send(tid.cast_unsigned()).is_ok() {
                let _ = stop_rx.recv();
            }
        });
        let mut parked = Self {
            tid: 0,
            stop: Some(stop),
            thread: Some(thread),
        };
        parked.tid = tid_rx
            .recv()
            .map_err(|_| io::Error::other("the parked thread ended before saying its id"))?;
        Ok(parked)
    }

    /// Its thread id.
    #[must_use]
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Field 22 of `/proc/self/task/<tid>/stat`: its start token.
    pub fn proc_start(&self) -> io::Result<String> {
        start_token_in(&PathBuf::from(format!("/proc/self/task/{}/stat", self.tid)))
    }
}

impl Drop for ParkedThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`, counted after the last `)`: the start
/// token Claude Code records as `procStart`.
pub fn proc_start(pid: u32) -> io::Result<String> {
    start_token_in(&PathBuf::from(format!("/proc/{pid}/stat")))
}

/// Field 22 of the stat file at `path`, counted after the last `)` (the command name
/// before it may hold anything, even bytes that are not UTF-8).
fn start_token_in(path: &Path) -> io::Result<String> {
    let stat = fs::read(path)?;
    stat.iter()
        .rposition(|&b| b == b')')
        .and_then(|close| std::str::from_utf8(&stat[close + 1..]).ok())
        .and_then(|rest| rest.split_ascii_whitespace().nth(22 - 3))
        .map(str::to_owned)
        .ok_or_else(|| io::Error::other(format!("no starttime in {}", path.display())))
}

/// Writes an executable `#!/bin/sh` script running `body` at `path` (a stand-in relay
/// or `claude`); returns `path`.
pub fn shell_script(path: PathBuf, body: &str) -> io::Result<PathBuf> {
    fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// Runs `f` on a thread of its own and gives its result if it comes within `limit`: a
/// call that regresses into blocking fails its test instead of hanging the run. The
/// bound is a hang guard, not a timing claim; a call that never returns is left behind.
pub fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || tx.send(f()));
    rx.recv_timeout(limit).ok()
}
