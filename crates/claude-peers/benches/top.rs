//! `top` in a pseudo-terminal of this benchmark's own, its output read as it is written.
//!
//! 1. start → first full screen with 1,000 live sessions: from spawning `top` to the
//!    last word of its first frame's bottom line, 10 runs; `list --json` on the same
//!    registry beside it. Target: 200 ms.
//! 2. registry change → row on screen, with 100 live sessions: one session's record is
//!    rewritten in place with a new name, 200 times, each timed until the name is on
//!    the terminal. The name alternates between twelve `A`s and twelve `B`s, so each
//!    change rewrites every cell of it (ratatui writes only the cells that change) and
//!    its row stays first. Target: p99 within 50 ms.
//! 3. session start → row, session end → row gone, with 100 live sessions: a new
//!    session's record is written (its process already running) and timed until its
//!    name is on the terminal, then its process killed and timed until the row that was
//!    first before it is drawn first again; 50 of each. Target (the "within 1 s"):
//!    p99 well within it.
//! 4. idle CPU over 30 s with 100 live sessions and nothing changing (from
//!    `/proc/<pid>/schedstat`), `watch` on the same registry at the same time beside
//!    it. Target: at most 1% of one core.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_testkit::process::{Children, Sleeper, proc_start};
use claude_peer_testkit::registry::{Machine, Registry};
use rustix::pty::{OpenptFlags, grantpt, openpt, ptsname, unlockpt};
use rustix::termios::{Winsize, tcsetwinsize};

const STARTS: usize = 10;
const CHANGES: usize = 200;
const COMINGS: usize = 50;
const IDLE_FOR: Duration = Duration::from_secs(30);
/// The last word of the bottom line: a frame is whole once it is written. (Blank cells
/// of a fresh screen are skipped, so the words before it arrive apart.)
const FRAME_END: &[u8] = b"help";

/// `top` running in a pseudo-terminal; what it writes arrives on a channel, timed.
struct Top {
    child: Child,
    chunks: Receiver<(Instant, Vec<u8>)>,
    /// Everything written so far.
    seen: Vec<u8>,
}

impl Top {
    fn start(home: &Path) -> (Self, Instant) {
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).unwrap();
        grantpt(&master).unwrap();
        unlockpt(&master).unwrap();
        let size = Winsize {
            ws_row: 50,
            ws_col: 200,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        tcsetwinsize(&master, size).unwrap();
        let slave_path = ptsname(&master, Vec::new()).unwrap();
        let slave = OpenOptions::new()
            .read(true)
            .write(true)
            .open(slave_path.to_str().unwrap())
            .unwrap();
        let mut master = File::from(master);
        let (to, chunks) = mpsc::channel();
        thread::spawn(move || {
            let mut buf = vec![0; 64 * 1024];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 || to.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        });
        let started = Instant::now();
        let child = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(home)
            .arg("top")
            .env("TERM", "xterm-256color")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        drop(slave);
        let top = Self {
            child,
            chunks,
            seen: Vec::new(),
        };
        (top, started)
    }

    /// Waits until `text` has been written since `from` (an offset into all output);
    /// when the write that completed it arrived, and the offset after it.
    fn wait_for(&mut self, text: &[u8], from: usize) -> (Instant, usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let start = from.min(self.seen.len());
        if let Some(at) = find(&self.seen[start..], text) {
            // Already there: now is an upper bound of when it came.
            return (Instant::now(), start + at + text.len());
        }
        loop {
            let Ok((at, chunk)) = self
                .chunks
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            else {
                let tail = &self.seen[self.seen.len().saturating_sub(2000)..];
                panic!(
                    "top never wrote {:?}; its last output: {:?}",
                    String::from_utf8_lossy(text),
                    String::from_utf8_lossy(tail)
                );
            };
            let before = self.seen.len();
            self.seen.extend_from_slice(&chunk);
            let look = before.saturating_sub(text.len()).max(start);
            if let Some(pos) = find(&self.seen[look..], text) {
                return (at, look + pos + text.len());
            }
        }
    }

    /// Takes in whatever was written meanwhile (so the terminal never fills up).
    fn drain(&mut self) -> usize {
        while let Ok((_, chunk)) = self.chunks.try_recv() {
            self.seen.extend_from_slice(&chunk);
        }
        self.seen.len()
    }
}

impl Drop for Top {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn cpu(pid: u32) -> Duration {
    let stat = fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    Duration::from_nanos(stat.split_whitespace().next().unwrap().parse().unwrap())
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

fn first_screen(machine: &Machine) {
    let children = Children::spawn(1000).unwrap();
    let registry = Registry::generate(machine, 0, &children).unwrap();
    let (mut starts, mut lists) = (Vec::new(), Vec::new());
    for _ in 0..STARTS {
        let (mut top, started) = Top::start(registry.home.root());
        let (drawn, _) = top.wait_for(FRAME_END, 0);
        starts.push(drawn.saturating_duration_since(started));
        // The header's count, on the first row (blanks are skipped, so a move follows).
        assert!(
            find(&top.seen, b"1000\x1b[1;").is_some(),
            "the first screen counts every session"
        );
        drop(top);
        let listed = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .args(["--json", "list", "--home"])
            .arg(registry.home.root())
            .output()
            .unwrap();
        assert!(out.status.success());
        lists.push(listed.elapsed());
    }
    starts.sort_unstable();
    lists.sort_unstable();
    println!(
        "first full screen, 1000 live sessions ({STARTS} runs): top median {} max {}; \
         list --json median {} max {} (target: top within 200 ms)",
        ms(starts[STARTS / 2]),
        ms(starts[STARTS - 1]),
        ms(lists[STARTS / 2]),
        ms(lists[STARTS - 1]),
    );
}

fn change_to_row(machine: &Machine) {
    let children = Children::spawn(100).unwrap();
    let registry = Registry::generate(machine, 0, &children).unwrap();
    let pid = children.pids()[0];
    let token = proc_start(pid).unwrap();
    let file = registry.sessions.join(format!("{pid}.json"));
    let record = |name: &str| {
        serde_json::json!({
            "pid": pid, "sessionId": format!("bench-{pid}"), "cwd": "/tmp/bench",
            "procStart": token, "name": name, "status": "idle",
        })
        .to_string()
    };
    fs::write(&file, record(&"A".repeat(12))).unwrap();
    let (mut top, _) = Top::start(registry.home.root());
    top.wait_for("A".repeat(12).as_bytes(), 0);
    let mut latencies = Vec::with_capacity(CHANGES);
    for n in 0..CHANGES {
        thread::sleep(Duration::from_millis(10));
        let from = top.drain();
        let name = if n % 2 == 0 { "B" } else { "A" }.repeat(12);
        let written = Instant::now();
        // In place, like Claude Code: truncate, then write.
        fs::write(&file, record(&name)).unwrap();
        let (shown, _) = top.wait_for(name.as_bytes(), from);
        latencies.push(shown.saturating_duration_since(written));
    }
    latencies.sort_unstable();
    println!(
        "record rewritten → row on screen, 100 live sessions ({CHANGES} changes): \
         p50 {} p99 {} max {} (target: p99 within 50 ms)",
        ms(percentile(&latencies, 50)),
        ms(percentile(&latencies, 99)),
        ms(latencies[CHANGES - 1]),
    );
}

fn start_and_end_to_row(machine: &Machine) {
    let children = Children::spawn(100).unwrap();
    let registry = Registry::generate(machine, 0, &children).unwrap();
    // Sorted by name, the first of the others; a name of `A`s goes above it.
    let first = format!("ccproj-{}-06", children.pids().iter().min().unwrap());
    let (mut top, _) = Top::start(registry.home.root());
    top.wait_for(FRAME_END, 0);
    let (mut appear, mut vanish) = (Vec::new(), Vec::new());
    for _ in 0..COMINGS {
        let mut session = Sleeper::spawn().unwrap();
        let pid = session.pid();
        let record = serde_json::json!({
            "pid": pid, "sessionId": format!("bench-{pid}"), "cwd": "/tmp/bench",
            "procStart": proc_start(pid).unwrap(), "name": "A".repeat(12), "status": "idle",
        });
        let file = registry.sessions.join(format!("{pid}.json"));
        thread::sleep(Duration::from_millis(10));
        let from = top.drain();
        let written = Instant::now();
        fs::write(&file, record.to_string()).unwrap();
        let (shown, _) = top.wait_for("A".repeat(12).as_bytes(), from);
        appear.push(shown.saturating_duration_since(written));

        thread::sleep(Duration::from_millis(10));
        let from = top.drain();
        let ended = Instant::now();
        session.crash().unwrap();
        let (gone, _) = top.wait_for(first.as_bytes(), from);
        vanish.push(gone.saturating_duration_since(ended));
    }
    appear.sort_unstable();
    vanish.sort_unstable();
    println!(
        "session start → row: p50 {} p99 {}; session end → row gone: p50 {} p99 {} \
         (100 live sessions, {COMINGS} each; target: within 1 s)",
        ms(percentile(&appear, 50)),
        ms(percentile(&appear, 99)),
        ms(percentile(&vanish, 50)),
        ms(percentile(&vanish, 99)),
    );
}

fn idle_cpu(machine: &Machine) {
    let children = Children::spawn(100).unwrap();
    let registry = Registry::generate(machine, 0, &children).unwrap();
    let (mut top, _) = Top::start(registry.home.root());
    top.wait_for(FRAME_END, 0);
    let mut watch = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
        .args(["--json", "watch", "--home"])
        .arg(registry.home.root())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = watch.stdout.take().unwrap();
    thread::spawn(move || std::io::copy(&mut lines, &mut std::io::sink()));
    thread::sleep(Duration::from_secs(1));
    let (top_before, watch_before) = (cpu(top.child.id()), cpu(watch.id()));
    let until = Instant::now() + IDLE_FOR;
    while Instant::now() < until {
        thread::sleep(Duration::from_millis(500));
        top.drain();
    }
    let top_cpu = cpu(top.child.id()).saturating_sub(top_before);
    let watch_cpu = cpu(watch.id()).saturating_sub(watch_before);
    let _ = watch.kill();
    let _ = watch.wait();
    let share = |d: Duration| d.as_secs_f64() / IDLE_FOR.as_secs_f64() * 100.0;
    println!(
        "idle CPU over {} s, 100 live sessions: top {} ({:.3}% of a core), \
         watch {} ({:.3}%) (target: top at most 1%)",
        IDLE_FOR.as_secs(),
        ms(top_cpu),
        share(top_cpu),
        ms(watch_cpu),
        share(watch_cpu),
    );
}

fn main() {
    let machine = Machine::learn();
    first_screen(&machine);
    change_to_row(&machine);
    start_and_end_to_row(&machine);
    idle_cpu(&machine);
}
