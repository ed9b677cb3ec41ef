//! Real registries for benchmarks and OS tests: records of real live child processes
//! and of pids that surely do not run, shaped like the ones Claude Code 2.1.332 writes,
//! and writers that rewrite records in place as Claude Code does.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use claude_peer_registry::ClaudeHome;

use crate::home::TempHome;
use crate::process::{Children, proc_start};

/// Facts about this machine that generated records need.
#[derive(Debug, Clone)]
pub struct Machine {
    /// `/proc/sys/kernel/pid_max`: no process has a pid above it.
    pub pid_max: u32,
    /// This machine's pid domain, as Claude Code records it.
    pub pid_domain: Option<String>,
}

impl Machine {
    /// Reads `pid_max`, `/etc/machine-id` and this process's pid namespace.
    #[must_use]
    pub fn learn() -> Self {
        let pid_max = fs::read_to_string("/proc/sys/kernel/pid_max")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            // The kernel's ceiling (PID_MAX_LIMIT) when the knob cannot be read.
            .unwrap_or(4_194_304);
        let pid_domain = (|| {
            let id = fs::read_to_string("/etc/machine-id").ok()?;
            let id = id.trim();
            let ns = fs::read_link("/proc/self/ns/pid").ok()?;
            let ns = ns.to_str()?;
            (!id.is_empty()).then(|| format!("linux:{id}:{ns}"))
        })();
        Self {
            pid_max,
            pid_domain,
        }
    }

    /// The `i`th pid that surely does not run: above `pid_max`, yet a valid record name.
    #[must_use]
    pub fn dead_pid(&self, i: usize) -> u32 {
        self.pid_max
            .saturating_add(1)
            .saturating_add(u32::try_from(i).unwrap_or(u32::MAX))
    }
}

/// A record shaped like the captured 2.1.332 ones (about 600 bytes).
#[must_use]
pub fn record(pid: u32, proc_start: &str, pid_domain: Option<&str>, socks: &Path) -> String {
    let mut json = String::with_capacity(700);
    let _ = write!(
        json,
        r#"{{"pid":{pid},"sessionId":"75c834bc-f549-4085-a152-{pid:012x}","cwd":"/home/ada/projects/ccproj-{pid}","startedAt":1796030547041,"procStart":"{proc_start}","version":"2.1.332","peerProtocol":1,"peerFeatures":["notify_idle","reply_across_default_dirs","artifact_yield"],"kind":"interactive","entrypoint":"cli","#
    );
    if let Some(domain) = pid_domain {
        let _ = write!(json, r#""pidDomain":"{domain}","#);
    }
    let _ = write!(
        json,
        r#""asksForConvertedSkills":null,"tmux":"cc1:@0.%0","messagingSocketPath":"{}/{pid}.sock","name":"ccproj-{pid}-06","nameSource":"derived","nameSince":1796030547041,"status":"idle","updatedAt":1796030546860,"statusUpdatedAt":1796030546860}}"#,
        socks.display()
    );
    json
}

/// A Claude home in a temporary directory holding `dead` records of pids that do not
/// run and one record for each live child, with its true start token.
#[derive(Debug)]
pub struct Registry {
    _root: TempHome,
    /// The home.
    pub home: ClaudeHome,
    /// Its `sessions/` directory.
    pub sessions: PathBuf,
}

impl Registry {
    /// Writes the registry.
    pub fn generate(machine: &Machine, dead: usize, children: &Children) -> io::Result<Self> {
        let root = TempHome::new()?;
        // Never created: a missing socket costs one `lstat`, as a present one does.
        let socks = root.root().join("socks");
        let domain = machine.pid_domain.as_deref();
        for i in 0..dead {
            let pid = machine.dead_pid(i);
            let start = (1_000_000 + i * 37).to_string();
            root.write_record(pid, record(pid, &start, domain, &socks))?;
        }
        for pid in children.pids() {
            root.write_record(pid, record(pid, &proc_start(pid)?, domain, &socks))?;
        }
        Ok(Self {
            home: root.claude().clone(),
            sessions: root.sessions(),
            _root: root,
        })
    }
}

/// How a [`Rewriter`] rewrites a record, in place as Claude Code does (open with
/// `O_TRUNC`, write, close): readers can catch it empty or half written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// One `write` of the whole record.
    Single,
    /// The two halves in two `write`s, back to back.
    Split,
    /// A stall of up to this long between the truncate and the write (a loaded
    /// machine); the stalls spread evenly over that range.
    Stalling(Duration),
}

/// A thread rewriting one record in place, alternating two bodies, until stopped.
#[derive(Debug)]
pub struct Rewriter {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<usize>>,
}

impl Rewriter {
    /// Rewrites `path` (which must exist: a rewrite never creates it) with `bodies` in
    /// turn, as `how` says, pausing about `pause` after each rewrite (spread evenly
    /// between half and one and a half times it: real writes keep no beat a reader
    /// could fall in step with). Stops by itself when the file is removed.
    #[must_use]
    pub fn start(path: PathBuf, bodies: [String; 2], how: Writes, pause: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = thread::spawn(move || {
            let mut n = 0;
            while !flag.load(Ordering::Relaxed) {
                let body = bodies[n % 2].as_bytes();
                if rewrite(&path, body, how, n).is_err() {
                    break;
                }
                n += 1;
                thread::sleep(pause / 2 + pause * spread(n) / 1000);
            }
            n
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops rewriting once the rewrite under way is whole; returns how many were made.
    #[must_use]
    pub fn stop(mut self) -> usize {
        self.stop_now()
    }

    fn stop_now(&mut self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|thread| thread.join().ok())
            .unwrap_or(0)
    }
}

impl Drop for Rewriter {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// The `n`th in-place rewrite of `path`.
fn rewrite(path: &Path, body: &[u8], how: Writes, n: usize) -> io::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)?;
    match how {
        Writes::Single => file.write_all(body),
        Writes::Split => {
            let (first, second) = body.split_at(body.len() / 2);
            file.write_all(first)?;
            file.write_all(second)
        }
        Writes::Stalling(most) => {
            thread::sleep(most * spread(n + 500) / 1000);
            file.write_all(body)
        }
    }
}

/// The `n`th of a sequence spread evenly over 0..1000 (a stride prime to 1000).
fn spread(n: usize) -> u32 {
    u32::try_from((n * 397) % 1000).unwrap_or(0)
}
