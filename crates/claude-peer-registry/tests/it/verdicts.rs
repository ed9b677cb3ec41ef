//! The liveness verdict against its decision table.

use std::path::Path;
use std::time::{Duration, SystemTime};

use claude_peer_registry::{
    Contents, Liveness, Pid, ProcessFacts, ProcessState, Record, Rejection, Signal, Verdict, judge,
};
use claude_peer_testkit::strategy;
use proptest::prelude::*;

const OURS: &str = "linux:3d1219c7c4c5404aaa1f6d2a48adfda4:pid:[4026531836]";

fn record(extra: &str) -> Record {
    let json = format!(r#"{{"sessionId":"s"{extra}}}"#);
    Record::parse(Pid::new(3839).unwrap(), json.as_bytes()).unwrap()
}

fn alive(token: Option<&str>) -> ProcessFacts {
    ProcessFacts {
        signal: Signal::Alive,
        state: Some(ProcessState::Running),
        thread_group_leader: Some(true),
        start_token: token.map(str::to_owned),
        started_at: None,
    }
}

fn liveness(contents: Contents<'_>, facts: &ProcessFacts, ours: Option<&str>) -> &'static str {
    judge(contents, facts, ours).liveness.as_str()
}

#[test]
fn each_row_of_the_decision_table_gives_its_verdict() {
    let with_token = record(r#","procStart":"15417""#);
    let same_domain = record(&format!(r#","procStart":"15417","pidDomain":"{OURS}""#));
    let other_domain = record(r#","procStart":"15417","pidDomain":"linux:other:pid:[1]""#);
    let no_token = record("");
    let windows = record(r#","procStart":"15417","procStartFt":"133000""#);
    let zombie = ProcessFacts {
        state: Some(ProcessState::Zombie),
        ..alive(Some("15417"))
    };
    let dead = ProcessFacts {
        state: Some(ProcessState::Dead),
        ..alive(Some("15417"))
    };
    let thread = ProcessFacts {
        thread_group_leader: Some(false),
        ..alive(Some("15417"))
    };
    let not_permitted = ProcessFacts::with_signal(Signal::NotPermitted);
    let rejected = Rejection::MissingSessionId;

    let table: Vec<(&str, Contents<'_>, ProcessFacts, Option<&str>, &str)> = vec![
        (
            "token matches",
            Contents::Parsed(&with_token),
            alive(Some("15417")),
            Some(OURS),
            "live",
        ),
        (
            "same domain",
            Contents::Parsed(&same_domain),
            alive(Some("15417")),
            Some(OURS),
            "live",
        ),
        (
            "old version, no token",
            Contents::Parsed(&no_token),
            alive(Some("1")),
            Some(OURS),
            "live",
        ),
        (
            "no such process",
            Contents::Parsed(&with_token),
            ProcessFacts::gone(),
            Some(OURS),
            "gone",
        ),
        (
            "zombie",
            Contents::Parsed(&with_token),
            zombie,
            Some(OURS),
            "gone",
        ),
        (
            "dead",
            Contents::Parsed(&with_token),
            dead,
            Some(OURS),
            "gone",
        ),
        (
            "token differs",
            Contents::Parsed(&with_token),
            alive(Some("99")),
            Some(OURS),
            "recycled",
        ),
        (
            "thread id",
            Contents::Parsed(&with_token),
            thread,
            Some(OURS),
            "recycled",
        ),
        (
            "windows token wins",
            Contents::Parsed(&windows),
            alive(Some("15417")),
            Some(OURS),
            "recycled",
        ),
        (
            "other domain",
            Contents::Parsed(&other_domain),
            alive(Some("15417")),
            Some(OURS),
            "foreign",
        ),
        (
            "other domain, pid gone",
            Contents::Parsed(&other_domain),
            ProcessFacts::gone(),
            Some(OURS),
            "foreign",
        ),
        (
            "our domain unknown",
            Contents::Parsed(&same_domain),
            alive(Some("15417")),
            None,
            "unverifiable",
        ),
        (
            "EPERM",
            Contents::Parsed(&with_token),
            not_permitted,
            Some(OURS),
            "unverifiable",
        ),
        (
            "token unreadable",
            Contents::Parsed(&with_token),
            alive(None),
            Some(OURS),
            "unverifiable",
        ),
        (
            "rejected",
            Contents::Rejected(&rejected),
            alive(Some("15417")),
            Some(OURS),
            "invalid",
        ),
        (
            "unread, pid gone",
            Contents::Unread {
                file: Path::new("/home/u/.claude/sessions/42.json"),
                error: "Permission denied (os error 13)",
            },
            ProcessFacts::gone(),
            Some(OURS),
            "unreadable",
        ),
    ];
    for (row, contents, facts, ours, expected) in table {
        let verdict = judge(contents, &facts, ours);
        assert_eq!(verdict.liveness.as_str(), expected, "row `{row}`");
        assert_eq!(
            verdict.reason.is_none(),
            expected == "live",
            "row `{row}`: only live has no reason"
        );
    }
}

#[test]
fn a_file_that_cannot_be_read_is_unreadable_naming_it_whatever_its_pid() {
    let contents = Contents::Unread {
        file: Path::new("/home/u/.claude/sessions/42.json"),
        error: "Permission denied (os error 13)",
    };
    for facts in [ProcessFacts::gone(), alive(Some("15417"))] {
        assert_eq!(
            judge(contents, &facts, Some(OURS)),
            Verdict {
                liveness: Liveness::Unreadable,
                reason: Some(
                    "cannot read `/home/u/.claude/sessions/42.json`: Permission denied (os error 13)"
                        .to_owned()
                ),
            }
        );
    }
}

#[test]
fn a_torn_record_is_the_previous_owners_leftover_only_when_the_process_started_well_after_it() {
    let torn = Rejection::Empty;
    let written = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let started = |after_ms: u64| ProcessFacts {
        started_at: Some(written + Duration::from_millis(after_ms)),
        ..alive(Some("1"))
    };
    let contents = Contents::Torn {
        rejection: &torn,
        modified: Some(written),
    };
    assert_eq!(liveness(contents, &started(2_001), Some(OURS)), "gone");
    assert_eq!(
        liveness(contents, &started(2_000), Some(OURS)),
        "unreadable"
    );
    assert_eq!(liveness(contents, &started(0), Some(OURS)), "unreadable");
    assert_eq!(
        liveness(contents, &alive(Some("1")), Some(OURS)),
        "unreadable",
        "unknown start time"
    );
    let no_mtime = Contents::Torn {
        rejection: &torn,
        modified: None,
    };
    assert_eq!(
        liveness(no_mtime, &started(10_000), Some(OURS)),
        "unreadable"
    );
    assert_eq!(
        liveness(contents, &ProcessFacts::gone(), Some(OURS)),
        "gone"
    );
}

#[test]
fn reasons_name_the_facts_that_decided() {
    let r = record(r#","procStart":"15417""#);
    let verdict = judge(Contents::Parsed(&r), &alive(Some("99")), Some(OURS));
    let reason = verdict.reason.unwrap();
    assert!(
        reason.contains("15417") && reason.contains("99"),
        "{reason}"
    );
}

/// The decision table written as conditions rather than as an ordered walk: a verdict
/// holds exactly when nothing earlier in the table applies and its own condition does.
fn expected(contents: &Contents<'_>, facts: &ProcessFacts, ours: Option<&str>) -> Liveness {
    let rejected = matches!(contents, Contents::Rejected(_));
    let domain = match contents {
        Contents::Parsed(record) => record.pid_domain.as_deref(),
        _ => None,
    };
    let foreign = domain.is_some_and(|theirs| ours.is_some_and(|ours| ours != theirs));
    let domain_unknown = domain.is_some() && ours.is_none();
    let exited = facts.signal == Signal::NoSuchProcess
        || matches!(facts.state, Some(ProcessState::Zombie | ProcessState::Dead));
    let thread = facts.thread_group_leader == Some(false);
    let previous_owners = match contents {
        Contents::Torn {
            modified: Some(m), ..
        } => facts
            .started_at
            .is_some_and(|s| s > *m + Duration::from_secs(2)),
        _ => false,
    };
    let torn = matches!(contents, Contents::Torn { .. });
    let unread = matches!(contents, Contents::Unread { .. });
    let token = match contents {
        Contents::Parsed(record) => record.start_token(),
        _ => None,
    };
    let token_differs = token.is_some_and(|t| facts.start_token.as_deref().is_some_and(|c| c != t));
    let token_unknown = token.is_some() && facts.start_token.is_none();

    if rejected {
        Liveness::Invalid
    } else if unread {
        Liveness::Unreadable
    } else if foreign {
        Liveness::Foreign
    } else if domain_unknown || (facts.signal == Signal::NotPermitted) {
        Liveness::Unverifiable
    } else if exited {
        Liveness::Gone
    } else if thread {
        Liveness::Recycled
    } else if torn && previous_owners {
        Liveness::Gone
    } else if torn {
        Liveness::Unreadable
    } else if token_differs {
        Liveness::Recycled
    } else if token_unknown {
        Liveness::Unverifiable
    } else {
        Liveness::Live
    }
}

fn contents_kind() -> impl Strategy<Value = u8> {
    0..4_u8
}

proptest! {
    #[test]
    fn the_verdict_matches_the_decision_table_for_every_combination_of_facts(
        facts in strategy::process_facts(),
        kind in contents_kind(),
        record_token in strategy::start_token(),
        record_domain in proptest::option::of(prop_oneof![Just(OURS), Just("linux:x:pid:[2]")]),
        ours in proptest::option::of(Just(OURS)),
        modified in proptest::option::of(strategy::time()),
    ) {
        let mut record = record("");
        record.proc_start = record_token;
        record.pid_domain = record_domain.map(str::to_owned);
        let rejection = if kind == 1 { Rejection::PidMismatch { file_pid: 1, body_pid: "2".into() } } else { Rejection::Empty };
        let contents = match kind {
            0 => Contents::Parsed(&record),
            1 => Contents::Rejected(&rejection),
            2 => Contents::Unread { file: Path::new("42.json"), error: "Input/output error (os error 5)" },
            _ => Contents::Torn { rejection: &rejection, modified },
        };
        let verdict = judge(contents, &facts, ours);
        prop_assert_eq!(verdict.liveness, expected(&contents, &facts, ours));
        prop_assert_eq!(verdict.reason.is_some(), verdict.liveness != Liveness::Live);
    }
}
