//! The engine on fakes: after every step of a random history of registry writes,
//! process exits and pid reuse, its view equals a fresh scan's live set.

use std::collections::BTreeMap;
use std::time::Duration;

use claude_peer_probe::Notice;
use claude_peer_registry::{Pid, ProcessState};
use claude_peer_resolve::{Discovery, LiveSession};
use claude_peer_testkit::fake::{
    self, FakeFile, FakeNotifier, FakeProcessTable, FakeRegistryFs, Shared, UID,
};
use claude_peer_watch::{Event, Timing, Watcher};
use proptest::prelude::*;

const DOMAIN: &str = "linux:fake:pid:[1]";
/// The pids the histories play with.
const PIDS: std::ops::Range<u32> = 100..106;

type Fakes = (
    Shared<FakeProcessTable>,
    Shared<FakeRegistryFs>,
    Shared<FakeNotifier>,
);
type FakeWatcher = Watcher<Shared<FakeProcessTable>, Shared<FakeRegistryFs>, Shared<FakeNotifier>>;

fn pid(raw: u32) -> Pid {
    Pid::new(raw).unwrap()
}

fn name(pid: Pid) -> String {
    format!("{pid}.json")
}

fn record(pid: Pid, token: Option<&str>, status: &str, n: u32) -> Vec<u8> {
    let start = token.map_or_else(String::new, |t| format!(r#","procStart":"{t}""#));
    format!(r#"{{"pid":{pid},"sessionId":"s-{pid}-{n}","status":"{status}"{start}}}"#).into_bytes()
}

fn fakes() -> Fakes {
    (
        Shared::new(FakeProcessTable::new(UID, Some(DOMAIN))),
        Shared::new(FakeRegistryFs::owned_by(UID)),
        Shared::new(FakeNotifier::default()),
    )
}

fn watch(fakes: &Fakes, timing: Timing) -> FakeWatcher {
    let discovery = Discovery::new(fakes.0.clone(), fakes.1.clone());
    Watcher::new(discovery, fakes.2.clone(), fake::home(), timing).unwrap()
}

/// Only what a test triggers: nothing settles late, no timer fires on its own.
const QUIET: Timing = Timing {
    settle: Duration::ZERO,
    rescan_every: Duration::from_secs(3600),
    poll_every: Duration::from_secs(3600),
};

fn drain(watcher: &mut FakeWatcher) -> Vec<Event> {
    std::iter::from_fn(|| watcher.next_event(Duration::ZERO).unwrap()).collect()
}

fn view(watcher: &FakeWatcher) -> Vec<LiveSession> {
    watcher.sessions().cloned().collect()
}

fn fresh_scan(fakes: &Fakes) -> Vec<LiveSession> {
    Discovery::new(fakes.0.clone(), fakes.1.clone())
        .live(&fake::home())
        .unwrap()
        .entries
}

/// One thing happening to the registry or the process table, and what the OS says.
#[derive(Debug, Clone)]
enum Step {
    /// A new process takes the pid and writes its record.
    Start(u32),
    /// The record is rewritten in place with a new status (and a new session id when
    /// `true`, as `/clear` does).
    Rewrite(u32, bool),
    /// Rewritten twice in a row: the first close's read catches the second truncate.
    TornRewrite(u32),
    /// The process exits (a zombie when `true`); its record stays behind.
    Exit(u32, bool),
    /// The process exits and an unrelated one takes its pid, writing nothing.
    Reuse(u32),
    /// The record is removed.
    Remove(u32),
    /// The record is replaced by something that is not a record.
    Junk(u32),
    /// The record is rewritten while the event queue overflows.
    Overflow(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        PIDS.prop_map(Step::Start),
        (PIDS, any::<bool>()).prop_map(|(p, c)| Step::Rewrite(p, c)),
        PIDS.prop_map(Step::TornRewrite),
        (PIDS, any::<bool>()).prop_map(|(p, z)| Step::Exit(p, z)),
        PIDS.prop_map(Step::Reuse),
        PIDS.prop_map(Step::Remove),
        PIDS.prop_map(Step::Junk),
        PIDS.prop_map(Step::Overflow),
    ]
}

/// Plays a history on the fakes, telling the notifier what a real OS would.
struct World {
    fakes: Fakes,
    /// Start tokens handed out so far.
    tokens: u32,
    /// Writes so far: statuses alternate with them.
    writes: u32,
    /// The session id number each pid's records carry.
    ids: BTreeMap<Pid, u32>,
}

impl World {
    /// The start token a record written for `pid` now names: its process's, or one no
    /// process has. (Records without one, of old versions, are live on `kill(pid, 0)`
    /// alone; only the slow rescan sees their pid reused, tested on its own below.)
    fn token_of(&self, pid: Pid) -> String {
        let token = self
            .fakes
            .0
            .get()
            .processes
            .get(&pid)
            .and_then(|f| f.start_token.clone());
        token.unwrap_or_else(|| "t0".to_owned())
    }

    /// The record `pid`'s next write holds, with a new session id when `new_id`.
    fn next_record(&mut self, pid: Pid, status: Option<&str>, new_id: bool) -> Vec<u8> {
        self.writes += 1;
        let writes = self.writes;
        let id = self.ids.entry(pid).or_insert(writes);
        if new_id {
            *id = writes;
        }
        let id = *id;
        let status = status.unwrap_or(if writes.is_multiple_of(2) {
            "busy"
        } else {
            "idle"
        });
        record(pid, Some(&self.token_of(pid)), status, id)
    }

    fn write(&mut self, pid: Pid, reads: Vec<Vec<u8>>, notices: &[Notice]) {
        let file = FakeFile {
            reads,
            ..FakeFile::regular(UID, Vec::new())
        };
        self.fakes.1.get().put(&name(pid), file);
        for notice in notices {
            self.fakes.2.get().notify(notice.clone());
        }
    }

    /// A new live process, with a start token never used before, takes `pid`.
    fn new_process(&mut self, pid: Pid) {
        self.tokens += 1;
        let mut table = self.fakes.0.get();
        let taken = std::mem::replace(&mut *table, FakeProcessTable::new(UID, Some(DOMAIN)));
        *table = taken.with_live(pid, &format!("t{}", self.tokens));
    }

    fn play(&mut self, step: &Step) {
        let written = |p: Pid| Notice::Written(name(p).into());
        match *step {
            Step::Start(p) => {
                let p = pid(p);
                self.fakes.2.get().exit(p);
                self.new_process(p);
                let bytes = self.next_record(p, None, true);
                self.write(p, vec![bytes], &[written(p)]);
            }
            Step::Rewrite(p, new_id) => {
                let p = pid(p);
                let bytes = self.next_record(p, None, new_id);
                self.write(p, vec![bytes], &[written(p)]);
            }
            Step::TornRewrite(p) => {
                let p = pid(p);
                let whole = self.next_record(p, None, false);
                let torn = whole[..whole.len() / 2].to_vec();
                let modifying = Notice::Writing(name(p).into());
                self.write(p, vec![torn, whole], &[modifying, written(p), written(p)]);
            }
            Step::Exit(p, zombie) => {
                let p = pid(p);
                {
                    let mut table = self.fakes.0.get();
                    if zombie && let Some(facts) = table.processes.get_mut(&p) {
                        facts.state = Some(ProcessState::Zombie);
                    } else {
                        table.processes.remove(&p);
                    }
                }
                self.fakes.2.get().exit(p);
            }
            Step::Reuse(p) => {
                let p = pid(p);
                self.fakes.2.get().exit(p);
                self.new_process(p);
            }
            Step::Remove(p) => {
                let p = pid(p);
                self.fakes.1.get().remove(&name(p));
                self.fakes.2.get().notify(Notice::Removed(name(p).into()));
            }
            Step::Junk(p) => {
                let p = pid(p);
                self.write(p, vec![b"[]".to_vec()], &[written(p)]);
            }
            Step::Overflow(p) => {
                let p = pid(p);
                let bytes = self.next_record(p, Some("waiting"), false);
                self.write(p, vec![bytes], &[Notice::Rescan]);
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn after_every_step_the_view_is_a_fresh_scans_live_set(
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let mut world = World { fakes: fakes(), tokens: 0, writes: 0, ids: BTreeMap::new() };
        let mut watcher = watch(&world.fakes, QUIET);
        let mut known: BTreeMap<Pid, String> = BTreeMap::new();
        for step in &steps {
            world.play(step);
            let events = drain(&mut watcher);
            let fresh = fresh_scan(&world.fakes);
            prop_assert_eq!(&view(&watcher), &fresh, "after {:?}", step);
            for event in &events {
                let session = event.session();
                let p = session.pid;
                let id = session.record.session_id.clone();
                match event {
                    Event::Appeared(_) => {
                        prop_assert!(known.insert(p, id).is_none(), "appeared twice: {:?}", event);
                    }
                    Event::Changed(_) => {
                        prop_assert!(known.insert(p, id).is_some(), "changed unseen: {:?}", event);
                    }
                    Event::Vanished(_) => {
                        prop_assert!(known.remove(&p).is_some(), "vanished unseen: {:?}", event);
                        // Only a new process at the pid may follow its session's end.
                        let restarted = matches!(step, Step::Start(q) if *q == p.get());
                        prop_assert!(
                            restarted || !fresh.iter().any(|s| s.pid == p),
                            "a live session vanished: {:?} after {:?}", event, step
                        );
                    }
                }
            }
            let live: Vec<Pid> = fresh.iter().map(|s| s.pid).collect();
            prop_assert_eq!(known.keys().copied().collect::<Vec<_>>(), live, "events tell the live set");
            for p in PIDS.map(pid) {
                let live = fresh.iter().any(|s| s.pid == p);
                prop_assert_eq!(world.fakes.2.get().watches(p), live, "a pidfd per live session, pid {}", p);
            }
        }
    }
}

/// Pid 100 runs (start token `t1`) and has written its record.
fn start_live(fakes: &Fakes) -> Pid {
    let p = pid(100);
    *fakes.0.get() = FakeProcessTable::new(UID, Some(DOMAIN)).with_live(p, "t1");
    let whole = record(p, Some("t1"), "idle", 1);
    fakes.1.get().put(&name(p), FakeFile::regular(UID, whole));
    p
}

#[test]
fn a_live_session_caught_torn_keeps_its_state_until_its_process_exits() {
    let fakes = fakes();
    let p = start_live(&fakes);
    let mut watcher = watch(&fakes, QUIET);
    assert!(matches!(
        drain(&mut watcher).as_slice(),
        [Event::Appeared(_)]
    ));
    let before = view(&watcher);

    for torn in [Vec::new(), b"{\"pid\":100,\"sess".to_vec()] {
        fakes.1.get().put(&name(p), FakeFile::regular(UID, torn));
        fakes.2.get().notify(Notice::Writing(name(p).into()));
        fakes.2.get().notify(Notice::Written(name(p).into()));
        fakes.2.get().notify(Notice::Rescan);
        assert_eq!(
            drain(&mut watcher),
            [],
            "no vanished, no changed while torn"
        );
        assert_eq!(view(&watcher), before, "its last known state stays");
    }

    fakes.0.get().processes.remove(&p);
    fakes.2.get().exit(p);
    let events = drain(&mut watcher);
    assert!(
        matches!(events.as_slice(), [Event::Vanished(s)] if s == &before[0]),
        "one vanished, with the last known state: {events:?}"
    );
}

#[test]
fn a_leftovers_pid_reused_without_any_write_is_seen_by_the_slow_rescan() {
    let fakes = fakes();
    let p = pid(100);
    // An old version's record: no start token, so any process with the pid is it.
    let old = record(p, None, "idle", 1);
    fakes.1.get().put(&name(p), FakeFile::regular(UID, old));
    let timing = Timing {
        rescan_every: Duration::from_millis(5),
        ..QUIET
    };
    let mut watcher = watch(&fakes, timing);
    assert_eq!(drain(&mut watcher), [], "a leftover is not live");

    *fakes.0.get() = FakeProcessTable::new(UID, Some(DOMAIN)).with_live(p, "t9");
    let event = watcher.next_event(Duration::from_secs(20)).unwrap();
    assert!(matches!(event, Some(Event::Appeared(s)) if s.pid == p));
    assert_eq!(view(&watcher), fresh_scan(&fakes));
}

#[test]
fn without_notices_the_registry_is_polled() {
    let fakes = fakes();
    fakes.2.get().polling = true;
    let timing = Timing {
        poll_every: Duration::from_millis(5),
        ..QUIET
    };
    let mut watcher = watch(&fakes, timing);
    let p = start_live(&fakes);
    let event = watcher.next_event(Duration::from_secs(20)).unwrap();
    assert!(matches!(event, Some(Event::Appeared(s)) if s.pid == p));
}

#[test]
fn a_write_nobody_closes_is_read_once_it_has_settled() {
    let fakes = fakes();
    let timing = Timing {
        settle: Duration::from_millis(5),
        ..QUIET
    };
    let mut watcher = watch(&fakes, timing);
    let p = start_live(&fakes);
    fakes.2.get().notify(Notice::Writing(name(p).into()));
    assert_eq!(
        watcher.next_event(Duration::ZERO).unwrap(),
        None,
        "not read before it settles"
    );
    assert!(fakes.1.get().reads().is_empty(), "nothing read yet");
    let event = watcher.next_event(Duration::from_secs(20)).unwrap();
    assert!(matches!(event, Some(Event::Appeared(s)) if s.pid == p));
}
