//! Properties on fakes: for random registries and process tables, the scan agrees
//! with the decision table, the live-only scan is the full scan filtered to live, and
//! its live entries are exactly the `LiveSession`s.

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::Duration;

use claude_peer_probe::FileKind;
use claude_peer_registry::{
    Contents, EntryName, Liveness, Pid, ProcessFacts, Record, Rejection, Signal,
    classify_entry_name, judge,
};
use claude_peer_resolve::{Discovery, Entry, LiveSession, Rereads, Scope};
use claude_peer_testkit::fake::{self, FakeFile, FakeProcessTable, FakeRegistryFs, UID};
use claude_peer_testkit::strategy;
use proptest::collection::vec;
use proptest::prelude::*;

const OURS: &str = "linux:ours:pid:[1]";
/// Few pids, so that names, records and processes collide often.
const PIDS: [u32; 4] = [2, 3, 40, 500];

#[derive(Debug, Clone)]
struct GenEntry {
    name: String,
    file: FakeFile,
}

fn body(pid: u32) -> impl Strategy<Value = Vec<u8>> {
    let domain = proptest::option::of(prop_oneof![Just(OURS), Just("linux:theirs:pid:[9]")]);
    let record = ("[a-f0-9]{1,8}", strategy::start_token(), domain).prop_map(
        move |(session, token, domain)| {
            let mut body = serde_json::json!({ "pid": pid, "sessionId": session });
            if let Some(token) = token {
                body["procStart"] = token.into();
            }
            if let Some(domain) = domain {
                body["pidDomain"] = domain.into();
            }
            body.to_string().into_bytes()
        },
    );
    prop_oneof![
        4 => record,
        1 => Just(Vec::new()),
        1 => Just(br#"{"sessionId":"torn"#.to_vec()),
        1 => Just(br#"{"cwd":"/no/session/id"}"#.to_vec()),
        1 => Just(format!(r#"{{"pid":{},"sessionId":"s"}}"#, pid + 1).into_bytes()),
    ]
}

fn entry() -> impl Strategy<Value = GenEntry> {
    let name = prop_oneof![
        6 => proptest::sample::select(&PIDS[..]).prop_map(|p| format!("{p}.json")),
        1 => Just("007.json".to_owned()),
        1 => Just("1.json".to_owned()),
        1 => Just("2.0123abcd.key".to_owned()),
    ];
    let kind = prop_oneof![
        8 => Just(FileKind::Regular),
        1 => Just(FileKind::Fifo),
        1 => Just(FileKind::Symlink),
    ];
    let owner = prop_oneof![9 => Just(UID), 1 => Just(UID + 1)];
    (
        name,
        kind,
        owner,
        body(2),
        proptest::option::of(body(2)),
        proptest::option::of(strategy::time()),
    )
        .prop_map(|(name, kind, owner, first, second, modified)| {
            // Re-target bodies at the entry's own pid, so most agree with the file name.
            let pid = name.split('.').next().unwrap_or("2");
            let retarget = |b: Vec<u8>| {
                String::from_utf8(b)
                    .unwrap()
                    .replacen(r#""pid":2,"#, &format!(r#""pid":{pid},"#), 1)
                    .into_bytes()
            };
            let mut reads = vec![retarget(first)];
            reads.extend(second.map(retarget));
            GenEntry {
                name,
                file: FakeFile {
                    kind,
                    owner,
                    modified,
                    reads,
                },
            }
        })
}

/// A record file of `pid`, any kind and owner, read whole, torn or wrong.
fn file_of(pid: u32) -> impl Strategy<Value = FakeFile> {
    let kind = prop_oneof![
        8 => Just(FileKind::Regular),
        1 => Just(FileKind::Fifo),
        1 => Just(FileKind::Symlink),
    ];
    let owner = prop_oneof![9 => Just(UID), 1 => Just(UID + 1)];
    let modified = proptest::option::of(strategy::time());
    (
        kind,
        owner,
        body(pid),
        proptest::option::of(body(pid)),
        modified,
    )
        .prop_map(|(kind, owner, first, second, modified)| {
            let mut reads = vec![first];
            reads.extend(second);
            FakeFile {
                kind,
                owner,
                modified,
                reads,
            }
        })
}

/// Hundreds of records of distinct pids, most of them of processes of any facts: more
/// than one batch, each judged on several threads where there are cores for them.
fn many() -> impl Strategy<Value = (Vec<GenEntry>, HashMap<u32, ProcessFacts>)> {
    (260_u32..1400).prop_flat_map(|records| {
        let each: Vec<_> = (10..10 + records)
            .map(|pid| {
                let facts = proptest::option::weighted(0.8, strategy::process_facts());
                (file_of(pid), facts).prop_map(move |(file, facts)| (pid, file, facts))
            })
            .collect();
        each.prop_map(|each| {
            let mut table = HashMap::new();
            let entries = each
                .into_iter()
                .map(|(pid, file, facts)| {
                    table.extend(facts.map(|facts| (pid, facts)));
                    GenEntry {
                        name: format!("{pid}.json"),
                        file,
                    }
                })
                .collect();
            (entries, table)
        })
    })
}

fn table() -> impl Strategy<Value = HashMap<u32, ProcessFacts>> {
    proptest::collection::hash_map(
        proptest::sample::select(&PIDS[..]),
        strategy::process_facts(),
        0..4,
    )
}

fn build(
    entries: &[GenEntry],
    table: &HashMap<u32, ProcessFacts>,
) -> Discovery<FakeProcessTable, FakeRegistryFs> {
    let mut processes = FakeProcessTable::new(UID, Some(OURS));
    for (pid, facts) in table {
        processes
            .processes
            .insert(Pid::new(*pid).unwrap(), facts.clone());
    }
    let mut fs = FakeRegistryFs::owned_by(UID);
    for entry in entries {
        fs = fs.with_file(&entry.name, entry.file.clone());
    }
    Discovery::new(processes, fs)
        .with_rereads(Rereads::new(Duration::ZERO, Duration::from_micros(1)))
}

/// The verdict the decision table gives one entry, worked out from the generated parts.
fn expected(entry: &GenEntry, table: &HashMap<u32, ProcessFacts>) -> Option<Liveness> {
    let pid = match classify_entry_name(entry.name.as_ref()) {
        EntryName::NotARecord => return None,
        EntryName::Rejected(_) => return Some(Liveness::Invalid),
        EntryName::Record(pid) => pid,
    };
    if entry.file.kind != FileKind::Regular || entry.file.owner != UID {
        return Some(Liveness::Invalid);
    }
    let facts = table
        .get(&pid.get())
        .cloned()
        .unwrap_or_else(ProcessFacts::gone);
    let first = Record::parse(pid, &entry.file.reads[0]);
    // Read again only what would be unreadable: a live pid's torn record, not one its
    // previous owner left or one no session can be at (a thread id).
    let mid_rewrite = |rejection: &Rejection| {
        let torn = Contents::Torn {
            rejection,
            modified: entry.file.modified,
        };
        rejection.is_torn()
            && facts.signal == Signal::Alive
            && judge(torn, &facts, Some(OURS)).liveness == Liveness::Unreadable
    };
    let parsed = match (&first, entry.file.reads.get(1)) {
        (Err(r), Some(second)) if mid_rewrite(r) => Record::parse(pid, second),
        _ => first,
    };
    let facts = if facts.signal == Signal::Alive {
        facts
    } else {
        ProcessFacts::with_signal(facts.signal)
    };
    let contents = match &parsed {
        Ok(record) => Contents::Parsed(record),
        Err(rejection) if rejection.is_torn() => Contents::Torn {
            rejection,
            modified: entry.file.modified,
        },
        Err(rejection) => Contents::Rejected(rejection),
    };
    Some(judge(contents, &facts, Some(OURS)).liveness)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_verdict_of_a_full_scan_follows_the_decision_table(
        entries in vec(entry(), 0..8),
        table in table(),
    ) {
        // A directory holds each name once: the last generated entry of a name wins.
        let mut by_name: HashMap<String, GenEntry> = HashMap::new();
        for e in entries { by_name.insert(e.name.clone(), e); }
        let entries: Vec<GenEntry> = by_name.into_values().collect();
        let scan = build(&entries, &table).scan(&fake::home(), Scope::All).unwrap();
        let mut expected_by_name: Vec<(OsString, Liveness)> = entries
            .iter()
            .filter_map(|e| expected(e, &table).map(|l| (OsString::from(&e.name), l)))
            .collect();
        expected_by_name.sort();
        let mut got: Vec<(OsString, Liveness)> = scan
            .entries
            .iter()
            .map(|s| (s.file.file_name().unwrap().to_owned(), s.verdict.liveness))
            .collect();
        got.sort();
        prop_assert_eq!(got, expected_by_name);
        let pids: Vec<_> = scan.entries.iter().map(|s| s.pid).collect();
        let mut sorted = pids.clone();
        sorted.sort_by_key(|p| (p.is_none(), *p));
        prop_assert_eq!(pids, sorted, "sorted by pid, nameless last");
    }

    #[test]
    fn the_live_scan_is_the_full_scan_filtered_to_live_and_reads_no_file_of_a_dead_pid(
        entries in vec(entry(), 0..8),
        table in table(),
    ) {
        let full = build(&entries, &table).scan(&fake::home(), Scope::All).unwrap();
        let discovery = build(&entries, &table);
        let live = discovery.scan(&fake::home(), Scope::Live).unwrap();
        let filtered: Vec<_> = full.entries.into_iter().filter(claude_peer_resolve::Entry::is_live).collect();
        prop_assert_eq!(&live.entries, &filtered);
        for read in discovery.fs().reads() {
            let EntryName::Record(pid) = classify_entry_name(&read) else { panic!("read a non-record {read:?}") };
            let signal = table.get(&pid.get()).map_or(Signal::NoSuchProcess, |f| f.signal);
            prop_assert_eq!(signal, Signal::Alive, "read {:?} although its pid is not alive", read);
        }
    }
    #[test]
    fn every_live_entry_and_no_other_is_a_live_session_and_converts_back_unchanged(
        entries in vec(entry(), 0..8),
        table in table(),
    ) {
        let full = build(&entries, &table).scan(&fake::home(), Scope::All).unwrap();
        let live: Vec<Entry> = full.entries.iter().filter(|s| s.is_live()).cloned().collect();
        for session in full.entries {
            let was_live = session.is_live();
            match LiveSession::try_from(session.clone()) {
                Ok(converted) => {
                    prop_assert!(was_live, "{:?}", session);
                    prop_assert_eq!(Entry::from(converted), session);
                }
                Err(back) => {
                    prop_assert!(!was_live, "{:?}", session);
                    prop_assert_eq!(back, session);
                }
            }
        }
        let listed: Vec<Entry> =
            build(&entries, &table).live(&fake::home()).unwrap().entries.into_iter().map(Entry::from).collect();
        prop_assert_eq!(listed, live);
    }

    #[test]
    fn entries_hand_over_each_judged_entry_before_reading_the_next_and_add_up_to_the_scan(
        entries in vec(entry(), 0..8),
        table in table(),
    ) {
        let scan = build(&entries, &table).scan(&fake::home(), Scope::All).unwrap();
        let discovery = build(&entries, &table);
        let stream = discovery.entries(&fake::home(), Scope::All).unwrap();
        prop_assert_eq!(stream.warnings(), &scan.warnings[..]);
        prop_assert!(discovery.fs().reads().is_empty(), "nothing is read before it is asked for");
        let mut streamed: Vec<claude_peer_resolve::Entry> = Vec::new();
        for session in stream {
            streamed.push(session);
            for read in discovery.fs().reads() {
                prop_assert!(
                    streamed.iter().any(|s| s.file.file_name() == Some(&read)),
                    "{:?} was read before its entry was handed over", read
                );
            }
        }
        prop_assert_eq!(streamed, scan.entries);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn a_registry_judged_in_batches_across_threads_gives_each_record_its_own_verdict_in_pid_order(
        (entries, table) in many(),
    ) {
        let full = build(&entries, &table).scan(&fake::home(), Scope::All).unwrap();
        let expected: Vec<(OsString, Liveness)> = entries
            .iter()
            .filter_map(|e| expected(e, &table).map(|l| (OsString::from(&e.name), l)))
            .collect();
        let got: Vec<(OsString, Liveness)> = full
            .entries
            .iter()
            .map(|s| (s.file.file_name().unwrap().to_owned(), s.verdict.liveness))
            .collect();
        // Generated in pid order, so the scan's order is the generated one.
        prop_assert_eq!(got, expected);
        let live = build(&entries, &table).scan(&fake::home(), Scope::Live).unwrap();
        let filtered: Vec<_> = full.entries.into_iter().filter(Entry::is_live).collect();
        prop_assert_eq!(live.entries, filtered);
    }
}

#[test]
fn a_torn_record_that_is_whole_on_the_second_read_is_live() {
    let whole = br#"{"pid":40,"sessionId":"s","procStart":"100"}"#.to_vec();
    let reads = vec![Vec::new(), whole];
    assert_eq!(
        scan_torn(reads, None),
        (Some(Liveness::Live), None, 2),
        "read exactly twice"
    );
}

/// A live pid's record at `40.json` whose successive reads are `reads`, scanned with
/// three rereads (waits of 1, 2 and 4 µs); `age` is how long before the process
/// started the file was last modified.
fn scan_torn(
    reads: Vec<Vec<u8>>,
    age: Option<Duration>,
) -> (Option<Liveness>, Option<String>, usize) {
    let now = std::time::SystemTime::now();
    let entries = [GenEntry {
        name: "40.json".into(),
        file: FakeFile {
            kind: FileKind::Regular,
            owner: UID,
            modified: age.map(|age| now - age),
            reads,
        },
    }];
    let mut table = HashMap::new();
    let mut facts = ProcessFacts::with_signal(Signal::Alive);
    facts.start_token = Some("100".into());
    facts.started_at = Some(now);
    table.insert(40, facts);
    let discovery = build(&entries, &table).with_rereads(Rereads::new(
        Duration::from_micros(1),
        Duration::from_micros(7),
    ));
    let scan = discovery.scan(&fake::home(), Scope::All).unwrap();
    let verdict = scan.entries.first().map(|s| s.verdict.clone());
    (
        verdict.as_ref().map(|v| v.liveness),
        verdict.and_then(|v| v.reason),
        discovery.fs().reads().len(),
    )
}

#[test]
fn a_record_torn_on_every_read_but_the_last_of_the_budget_is_live() {
    let whole = br#"{"pid":40,"sessionId":"s","procStart":"100"}"#.to_vec();
    let half = br#"{"pid":40,"sessi"#.to_vec();
    let reads = vec![Vec::new(), half.clone(), half, whole];
    assert_eq!(scan_torn(reads, None), (Some(Liveness::Live), None, 4));
}

#[test]
fn a_record_torn_for_the_whole_budget_is_unreadable_with_its_reason() {
    let whole = br#"{"pid":40,"sessionId":"s","procStart":"100"}"#.to_vec();
    let reads = vec![Vec::new(), Vec::new(), Vec::new(), Vec::new(), whole];
    let (liveness, reason, reads) = scan_torn(reads, None);
    assert_eq!(
        (liveness, reads),
        (Some(Liveness::Unreadable), 4),
        "one read and three rereads, then the verdict"
    );
    assert!(
        reason.unwrap().contains("empty"),
        "the reason names the rejection"
    );
}

#[test]
fn a_torn_file_its_pids_previous_owner_left_is_not_read_again() {
    let an_hour = Some(Duration::from_secs(3600));
    let (liveness, _, reads) = scan_torn(vec![Vec::new()], an_hour);
    assert_eq!(liveness, Some(Liveness::Gone));
    assert_eq!(reads, 1, "a leftover is never waited for");
}
