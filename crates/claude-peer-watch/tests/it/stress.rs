//! Live sessions whose records are rewritten in place in a tight loop, sessions
//! starting and ending meanwhile: scans, resolutions and the watch never flicker.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{Discovery, Scope};
use claude_peer_watch::{Event, Watcher};

use crate::support::{Home, PATIENCE, Sleeper, live_set};

/// How long sessions are rewritten, started and ended.
const RUN_FOR: Duration = Duration::from_secs(4);
/// Sessions running at any time.
const SESSIONS: usize = 6;
/// One session ends and another starts this often.
const TURNOVER: Duration = Duration::from_millis(250);

/// A session: pid and session id.
type Key = (u32, String);

/// How a writer rewrites its record, truncating it in place each time.
#[derive(Debug, Clone, Copy)]
enum Writes {
    /// One `write` of the whole record.
    Single,
    /// The two halves in two `write`s, back to back.
    Split,
    /// A stall of up to 2 ms between the truncate and the write (a loaded machine),
    /// then a pause of 8 ms: a record that is torn most of the time could not be read
    /// by anyone, Claude Code included.
    Stalling,
}

/// A live session whose record a thread keeps rewriting.
struct Running {
    key: Key,
    child: Sleeper,
    stop: Arc<AtomicBool>,
    writer: JoinHandle<()>,
}

/// Rewrites `path` with `bodies` in turn until `stop`, counting the rewrites.
fn rewrite(path: &Path, bodies: &[String; 2], how: Writes, stop: &AtomicBool, count: &AtomicUsize) {
    let mut n = 0_usize;
    while !stop.load(Ordering::Relaxed) {
        let body = bodies[n % 2].as_bytes();
        n += 1;
        // In place, as Claude Code does: open with O_TRUNC, write, close.
        let Ok(mut file) = fs::OpenOptions::new().write(true).truncate(true).open(path) else {
            return;
        };
        match how {
            Writes::Single => file.write_all(body).unwrap(),
            Writes::Split => {
                let (first, second) = body.split_at(body.len() / 2);
                file.write_all(first).unwrap();
                file.write_all(second).unwrap();
            }
            Writes::Stalling => {
                thread::sleep(Duration::from_micros(((n * 397) % 2000) as u64));
                file.write_all(body).unwrap();
            }
        }
        drop(file);
        count.fetch_add(1, Ordering::Relaxed);
        let pause = if matches!(how, Writes::Stalling) {
            8000
        } else {
            200
        };
        thread::sleep(Duration::from_micros(pause));
    }
}

struct Registry {
    home: Home,
    /// Sessions established (record written, process running) and not ending: the
    /// ones every scan, resolution and the watch must see live.
    stable: Arc<Mutex<BTreeMap<u32, String>>>,
    rewrites: Arc<AtomicUsize>,
    started: usize,
}

impl Registry {
    fn start(&mut self) -> Running {
        let child = Sleeper::spawn();
        let pid = child.pid();
        let id = format!("stress-{}", self.started);
        let how = [Writes::Single, Writes::Split, Writes::Stalling][self.started % 3];
        self.started += 1;
        let bodies = [
            self.home.body(pid, &id, "idle"),
            self.home.body(pid, &id, "busy"),
        ];
        fs::write(self.home.file(pid), &bodies[0]).unwrap();
        self.stable.lock().unwrap().insert(pid, id.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let (path, flag, count) = (self.home.file(pid), stop.clone(), self.rewrites.clone());
        let writer = thread::spawn(move || rewrite(&path, &bodies, how, &flag, &count));
        Running {
            key: (pid, id),
            child,
            stop,
            writer,
        }
    }

    /// Ends a session: cleanly (its record removed, then the process exits) or by a
    /// crash (the process is killed, its record stays behind).
    fn end(&self, mut session: Running, crash: bool) -> Key {
        self.stable.lock().unwrap().remove(&session.key.0);
        session.stop.store(true, Ordering::Relaxed);
        session.writer.join().unwrap();
        if !crash {
            fs::remove_file(self.home.file(session.key.0)).unwrap();
        }
        session.child.crash();
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
        let scan = discovery.scan(home, Scope::Live).unwrap();
        let after = stable.lock().unwrap().clone();
        scans += 1;
        let listed: BTreeSet<Key> = live_set(scan.sessions.iter()).into_iter().collect();
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
        let key = (
            session.pid.unwrap().get(),
            session.record.as_ref().unwrap().session_id.clone(),
        );
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
        let fresh = live_set(discovery.scan(home, Scope::Live).unwrap().sessions.iter());
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
        home: Home::new(),
        stable: Arc::new(Mutex::new(BTreeMap::new())),
        rewrites: Arc::new(AtomicUsize::new(0)),
        started: 0,
    };
    let mut running: Vec<Running> = (0..SESSIONS).map(|_| registry.start()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready) = std::sync::mpsc::channel();
    let watch = {
        let (home, stable, stop) = (
            registry.home.claude.clone(),
            registry.stable.clone(),
            stop.clone(),
        );
        thread::spawn(move || watcher(&home, &stable, &stop, &ready_tx))
    };
    ready.recv().unwrap();
    let scan = {
        let (home, stable, stop) = (
            registry.home.claude.clone(),
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
    for session in &running {
        session.stop.store(true, Ordering::Relaxed);
    }
    let (scan_failures, scans, resolves) = {
        stop.store(true, Ordering::Relaxed);
        scan.join().unwrap()
    };
    let (events, watch_failures, view) = watch.join().unwrap();
    let mut live: Vec<Key> = running.iter().map(|r| r.key.clone()).collect();
    live.sort();
    for session in running {
        session.writer.join().unwrap();
    }

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
        registry.rewrites.load(Ordering::Relaxed),
        ended.len(),
        events.len()
    );
}
