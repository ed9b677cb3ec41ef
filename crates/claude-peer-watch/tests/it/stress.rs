//! Live sessions whose records are rewritten in place in a tight loop, sessions
//! starting and ending meanwhile: scans, resolutions and the watch never flicker.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::Discovery;
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::Sleeper;
use claude_peer_testkit::registry::{Rewriter, Writes};
use claude_peer_watch::{Event, Watcher};

use crate::support::{PATIENCE, WatchedHome as _, live_set};

/// How long sessions are rewritten, started and ended.
const RUN_FOR: Duration = Duration::from_secs(4);
/// Sessions running at any time.
const SESSIONS: usize = 6;
/// One session ends and another starts this often.
const TURNOVER: Duration = Duration::from_millis(250);

/// A session: pid and session id.
type Key = (u32, String);

/// A live session whose record a thread keeps rewriting.
struct Running {
    key: Key,
    child: Sleeper,
    writer: Rewriter,
}

/// How the `n`th session's record is rewritten, and the pause after each rewrite: 2 ms
/// (some 2,000 rewrites a second in all), 8 ms for stalling writers (a record torn most
/// of the time could not be read by anyone, Claude Code included).
fn writes(n: usize) -> (Writes, Duration) {
    match n % 3 {
        0 => (Writes::Single, Duration::from_millis(2)),
        1 => (Writes::Split, Duration::from_millis(2)),
        _ => (
            Writes::Stalling(Duration::from_millis(2)),
            Duration::from_millis(8),
        ),
    }
}

struct Registry {
    home: TempHome,
    /// Sessions established (record written, process running) and not ending: the
    /// ones every scan, resolution and the watch must see live.
    stable: Arc<Mutex<BTreeMap<u32, String>>>,
    rewrites: usize,
    started: usize,
}

impl Registry {
    fn start(&mut self) -> Running {
        let child = Sleeper::spawn().unwrap();
        let pid = child.pid();
        let id = format!("stress-{}", self.started);
        let (how, pause) = writes(self.started);
        self.started += 1;
        let bodies = [
            self.home.body(pid, &id, "idle"),
            self.home.body(pid, &id, "busy"),
        ];
        fs::write(self.home.record_path(pid), &bodies[0]).unwrap();
        self.stable.lock().unwrap().insert(pid, id.clone());
        let writer = Rewriter::start(self.home.record_path(pid), bodies, how, pause);
        Running {
            key: (pid, id),
            child,
            writer,
        }
    }

    /// Ends a session: cleanly (its record removed, then the process exits) or by a
    /// crash (the process is killed, its record stays behind).
    fn end(&mut self, mut session: Running, crash: bool) -> Key {
        self.stable.lock().unwrap().remove(&session.key.0);
        self.rewrites += session.writer.stop();
        if !crash {
            fs::remove_file(self.home.record_path(session.key.0)).unwrap();
        }
        session.child.crash().unwrap();
        session.key
    }
}

/// Scans and resolves until `stop`; returns the failures and the counts.
fn scanner(
    home: &ClaudeHome,
    stable: &Mutex<BTreeMap<u32, String>>,
    stop: &AtomicBool,
) -> (Vec<String>, usize, usize) {
    let discovery = Discovery::os();
    let mut failures = Vec::new();
    let (mut scans, mut resolves) = (0, 0);
    while !stop.load(Ordering::Relaxed) {
        let before = stable.lock().unwrap().clone();
        let scan = discovery.live(home).unwrap();
        let after = stable.lock().unwrap().clone();
        scans += 1;
        let listed: BTreeSet<Key> = live_set(scan.entries.iter()).into_iter().collect();
        for key in before.iter().filter(|(p, i)| after.get(p) == Some(i)) {
            let key = (*key.0, key.1.clone());
            if !listed.contains(&key) {
                failures.push(format!("scan {scans} missed live session {key:?}"));
            }
        }
        for (pid, id) in &before {
            let outcome = discovery.resolve_live_session(home, id);
            resolves += 1;
            let still = stable.lock().unwrap().get(pid) == Some(id);
            if still && let Err(err) = outcome {
                failures.push(format!("resolving live session {id} failed: {err}"));
            }
        }
    }
    (failures, scans, resolves)
}

/// Collects the watch's events until `stop`, noting any `vanished` of a session that
/// was live all along.
fn watcher(
    home: &ClaudeHome,
    stable: &Mutex<BTreeMap<u32, String>>,
    stop: &AtomicBool,
    ready: &std::sync::mpsc::Sender<()>,
) -> (Vec<(&'static str, Key)>, Vec<String>, Vec<Key>) {
    let mut watcher = Watcher::os(home.clone()).unwrap();
    ready.send(()).unwrap();
    let mut events = Vec::new();
    let mut failures = Vec::new();
    let mut take = |event: Event, failures: &mut Vec<String>| {
        let session = event.session();
        let key = (session.pid.get(), session.record.session_id.clone());
        if matches!(event, Event::Vanished(_)) && stable.lock().unwrap().get(&key.0) == Some(&key.1)
        {
            failures.push(format!("vanished while live: {key:?}"));
        }
        events.push((event.as_str(), key));
    };
    while !stop.load(Ordering::Relaxed) {
        if let Some(event) = watcher.next_event(Duration::from_millis(50)).unwrap() {
            take(event, &mut failures);
        }
    }
    // Everything has stopped: wait until the view is a fresh scan's, and quiet.
    let discovery = Discovery::os();
    let since = Instant::now();
    loop {
        while let Some(event) = watcher.next_event(Duration::from_millis(100)).unwrap() {
            take(event, &mut failures);
        }
        let fresh = live_set(discovery.live(home).unwrap().entries.iter());
        let view = live_set(watcher.sessions());
        if view == fresh {
            return (events, failures, view.into_iter().collect());
        }
        if since.elapsed() > PATIENCE {
            failures.push(format!(
                "the watch ends with {view:?}, a fresh scan with {fresh:?}"
            ));
            return (events, failures, view.into_iter().collect());
        }
    }
}

#[test]
fn scans_resolutions_and_the_watch_never_flicker_under_in_place_rewrites() {
    let mut registry = Registry {
        home: TempHome::new().unwrap(),
        stable: Arc::new(Mutex::new(BTreeMap::new())),
        rewrites: 0,
        started: 0,
    };
    let mut running: Vec<Running> = (0..SESSIONS).map(|_| registry.start()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let watch = {
        let (home, stable, stop) = (
            registry.home.claude().clone(),
            registry.stable.clone(),
            stop.clone(),
        );
        thread::spawn(move || watcher(&home, &stable, &stop, &ready_tx))
    };
    ready.recv().unwrap();
    let scan = {
        let (home, stable, stop) = (
            registry.home.claude().clone(),
            registry.stable.clone(),
            stop.clone(),
        );
        thread::spawn(move || scanner(&home, &stable, &stop))
    };

    let mut ended = Vec::new();
    let began = Instant::now();
    while began.elapsed() < RUN_FOR {
        thread::sleep(TURNOVER);
        let oldest = running.remove(0);
        ended.push(registry.end(oldest, ended.len() % 2 == 1));
        running.push(registry.start());
    }
    let mut live = Vec::new();
    let mut children = Vec::new();
    for session in running {
        registry.rewrites += session.writer.stop();
        live.push(session.key);
        children.push(session.child);
    }
    live.sort();
    let (scan_failures, scans, resolves) = {
        stop.store(true, Ordering::Relaxed);
        scan.join().unwrap()
    };
    let (events, watch_failures, view) = watch.join().unwrap();

    assert_eq!(
        scan_failures,
        Vec::<String>::new(),
        "every scan and resolution sees every live session"
    );
    assert_eq!(
        watch_failures,
        Vec::<String>::new(),
        "the watch never reports a live session vanished"
    );
    assert!(
        scans > 10 && resolves > 10,
        "{scans} scans, {resolves} resolutions"
    );
    let count = |kind: &str, key: &Key| {
        events
            .iter()
            .filter(|(k, e)| *k == kind && e == key)
            .count()
    };
    for key in ended.iter().chain(&live) {
        assert_eq!(count("appeared", key), 1, "one appeared for {key:?}");
    }
    for key in &ended {
        assert_eq!(count("vanished", key), 1, "one vanished for ended {key:?}");
    }
    for key in &live {
        assert_eq!(count("vanished", key), 0, "no vanished for live {key:?}");
    }
    assert_eq!(view, live, "the watch ends with the live sessions");
    eprintln!(
        "{} rewrites, {} sessions ended, {scans} scans, {resolves} resolutions, {} events",
        registry.rewrites,
        ended.len(),
        events.len()
    );
}
