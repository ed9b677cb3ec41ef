//! The one target rule on fakes: a session id, or else the name of exactly one live
//! session, resolved against one scan; what `show` displays by the same rule; the cwd
//! selector.

use std::path::PathBuf;

use claude_peer_probe::{FileKind, SocketDir, SocketStatus};
use claude_peer_registry::Pid;
use claude_peer_resolve::{
    Addressability, AddressableSession, Discovery, Error, RefusalKind, Scope, Target,
};
use claude_peer_testkit::fake::{self, FakeFile, FakeProcessTable, FakeRegistryFs, UID};
use claude_peer_testkit::fixtures::REAL_PID_DOMAIN;
use proptest::prelude::*;

fn pid(raw: u32) -> Pid {
    Pid::new(raw).unwrap()
}

/// A record of `pid` for `session`, named `name` when given, with `extra` JSON fields.
fn record(pid: u32, session: &str, name: Option<&str>, extra: &str) -> FakeFile {
    let name = name.map_or_else(String::new, |n| format!(r#","name":"{n}""#));
    FakeFile::regular(
        UID,
        format!(
            r#"{{"pid":{pid},"sessionId":"{session}","procStart":"{pid}00","pidDomain":"{REAL_PID_DOMAIN}","messagingSocketPath":"/run/cc-socks/{pid}.sock"{name}{extra}}}"#
        ),
    )
}

/// A registry of live sessions `(pid, session id, name, extra)`, each with its own
/// socket, every pid running.
fn discovery(
    sessions: &[(u32, &str, Option<&str>, &str)],
) -> Discovery<FakeProcessTable, FakeRegistryFs> {
    let (processes, fs) = registry(sessions);
    Discovery::new(processes, fs)
}

/// The fakes of [`discovery`], to add to.
fn registry(sessions: &[(u32, &str, Option<&str>, &str)]) -> (FakeProcessTable, FakeRegistryFs) {
    let mut processes = FakeProcessTable::new(UID, Some(REAL_PID_DOMAIN));
    let mut fs = FakeRegistryFs::owned_by(UID);
    for &(raw, session, name, extra) in sessions {
        processes = processes.with_live(pid(raw), &format!("{raw}00"));
        fs = fs.with_file(&format!("{raw}.json"), record(raw, session, name, extra));
        fs.sockets.insert(
            PathBuf::from(format!("/run/cc-socks/{raw}.sock")),
            SocketStatus::Present {
                kind: FileKind::Socket,
                owner: UID,
                dir: Some(SocketDir {
                    owner: UID,
                    shared: false,
                }),
            },
        );
    }
    (processes, fs)
}

fn refusal<T: std::fmt::Debug>(result: Result<T, Error>) -> (RefusalKind, String) {
    let err = result.expect_err("a refusal");
    let refusal = err.refusal().expect("a refusal, not an IO error").clone();
    (refusal.kind, refusal.message)
}

fn resolved_pid(result: Result<AddressableSession, Error>) -> u32 {
    result.expect("resolves").pid.get()
}

const A: &str = "75c834bc-f549-4085-a152-f9973dc50b30";
const B: &str = "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57";

#[test]
fn a_target_is_a_session_id_or_else_the_name_of_one_live_session_for_send_and_show_alike() {
    let discovery = discovery(&[
        (3839, A, Some("builder"), ""),
        (9959, B, Some("reviewer"), ""),
    ]);
    let roster = discovery.roster(&fake::home(), Scope::All).unwrap();
    for (given, expected) in [(A, 3839), ("builder", 3839), (B, 9959), ("reviewer", 9959)] {
        assert_eq!(resolved_pid(roster.resolve(given)), expected, "{given}");
        let shown = roster.shown(given).unwrap();
        assert_eq!(
            shown.pid,
            Some(pid(expected)),
            "show means the same: {given}"
        );
    }
    let (kind, message) = refusal(roster.resolve("nobody"));
    assert_eq!(kind, RefusalKind::NotLive);
    assert_eq!(
        message,
        "no live process runs session nobody, and no record names it"
    );
    assert_eq!(refusal(roster.shown("nobody")).0, RefusalKind::NotLive);
}

#[test]
fn text_that_is_one_sessions_id_and_anothers_name_is_refused_not_guessed() {
    // A name is free text: this one is another session's id.
    let discovery = discovery(&[(3839, A, Some("builder"), ""), (9959, B, Some(A), "")]);
    let roster = discovery.roster(&fake::home(), Scope::All).unwrap();
    let (kind, message) = refusal(roster.resolve(A));
    assert_eq!(kind, RefusalKind::IdentityMismatch);
    assert!(
        message.contains("3839") && message.contains("9959"),
        "names both sessions: {message}"
    );
    assert_eq!(
        refusal(roster.shown(A)).0,
        RefusalKind::IdentityMismatch,
        "show follows the same rule"
    );
    // The other session is still reached by its own id.
    assert_eq!(resolved_pid(roster.resolve(B)), 9959);
}

#[test]
fn a_name_held_by_two_live_sessions_refuses_listing_both() {
    let discovery = discovery(&[
        (3839, A, Some("ccproj-06"), ""),
        (9959, B, Some("ccproj-06"), ""),
    ]);
    let roster = discovery.roster(&fake::home(), Scope::Live).unwrap();
    let (kind, message) = refusal(roster.resolve("ccproj-06"));
    assert_eq!(kind, RefusalKind::IdentityMismatch);
    assert_eq!(
        message,
        format!(
            "2 live sessions are named `ccproj-06`: pid 3839 (session {A}), pid 9959 (session {B})"
        )
    );
    assert_eq!(
        refusal(roster.shown("ccproj-06")).0,
        RefusalKind::IdentityMismatch
    );
    // By id each is one session, but its name could reach the other: not sent to.
    let (kind, message) = refusal(roster.resolve(A));
    assert_eq!(kind, RefusalKind::IdentityMismatch);
    assert!(message.contains("is also held by pid 9959"), "{message}");
    // `show` by id displays it all the same: nothing is sent.
    assert_eq!(roster.shown(A).unwrap().pid, Some(pid(3839)));
}

#[test]
fn a_leftover_records_id_is_shown_with_its_verdict_but_refused_for_a_send() {
    // 4000 has no process: its record was left behind.
    let (processes, fs) = registry(&[(9959, B, Some("reviewer"), "")]);
    let fs = fs.with_file("4000.json", record(4000, A, Some("crashed"), ""));
    let discovery = Discovery::new(processes, fs);
    let roster = discovery.roster(&fake::home(), Scope::All).unwrap();
    let shown = roster.shown(A).unwrap();
    assert_eq!(shown.pid, Some(pid(4000)));
    assert!(!shown.is_live());
    let (kind, message) = refusal(roster.resolve(A));
    assert_eq!(kind, RefusalKind::NotLive);
    assert!(
        message.contains("its record for pid 4000 is gone"),
        "{message}"
    );
    // A leftover is found by id only, never by its name.
    assert_eq!(refusal(roster.shown("crashed")).0, RefusalKind::NotLive);
    // A live roster explains it the same way, reading the dead records when needed.
    let live = discovery.roster(&fake::home(), Scope::Live).unwrap();
    assert_eq!(refusal(live.resolve(A)).1, message);
    assert_eq!(live.shown(A).unwrap().pid, Some(pid(4000)));
}

#[test]
fn a_live_session_that_cannot_be_messaged_is_shown_and_its_refusal_says_why() {
    let discovery = discovery(&[(9959, B, Some("parked"), r#","parkedJobId":"job-7""#)]);
    let roster = discovery.roster(&fake::home(), Scope::Live).unwrap();
    for given in [B, "parked"] {
        let (kind, message) = refusal(roster.resolve(given));
        assert_eq!(kind, RefusalKind::NotAddressable, "{given}");
        assert_eq!(
            message,
            format!(
                "session {B} is live but cannot be messaged: parked as background job \"job-7\""
            )
        );
        let shown = roster.shown(given).unwrap();
        let Addressability::NotAddressable(why) = &shown.addressability else {
            panic!("{given} shown as addressable");
        };
        assert_eq!(why.as_str(), "parked");
    }
}

#[test]
fn the_cwd_selector_takes_the_live_sessions_under_a_directory_by_whole_components() {
    let discovery = discovery(&[
        (3839, A, Some("repo"), r#","cwd":"/src/repo""#),
        (4000, "s-sub", Some("sub"), r#","cwd":"/src/repo/crates/x""#),
        (9959, B, Some("other"), r#","cwd":"/src/repo-x""#),
        (9960, "s-none", None, ""),
    ]);
    let roster = discovery.roster(&fake::home(), Scope::Live).unwrap();
    let pids = |target: &Target| -> Vec<u32> {
        roster
            .select(target)
            .unwrap()
            .iter()
            .map(|s| s.pid.get())
            .collect()
    };
    assert_eq!(pids(&Target::Cwd("/src/repo".into())), [3839, 4000]);
    assert_eq!(pids(&Target::Cwd("/elsewhere".into())), Vec::<u32>::new());
    assert_eq!(pids(&Target::AllLive), [3839, 4000, 9959, 9960]);
    assert_eq!(pids(&Target::Session("other".into())), [9959]);
    assert_eq!(
        refusal(roster.select(&Target::Session("nobody".into()))).0,
        RefusalKind::NotLive
    );
}

#[test]
fn many_targets_resolve_against_one_scan_reading_each_record_once() {
    let sessions: Vec<(u32, String, String)> = (0..8)
        .map(|n| (5000 + n, format!("s-{n}"), format!("worker-{n}")))
        .collect();
    let borrowed: Vec<(u32, &str, Option<&str>, &str)> = sessions
        .iter()
        .map(|(p, id, name)| (*p, id.as_str(), Some(name.as_str()), ""))
        .collect();
    let discovery = discovery(&borrowed);
    let roster = discovery.roster(&fake::home(), Scope::Live).unwrap();
    for (raw, id, name) in &sessions {
        assert_eq!(resolved_pid(roster.resolve(id)), *raw);
        assert_eq!(resolved_pid(roster.resolve(name)), *raw);
    }
    let mut reads = discovery.fs().reads();
    reads.sort();
    let expected: Vec<std::ffi::OsString> = sessions
        .iter()
        .map(|(raw, _, _)| format!("{raw}.json").into())
        .collect();
    assert_eq!(reads, expected, "16 targets, one read of each record");
}

/// Live sessions with ids and names drawn from a few words, so that they collide.
fn live_sessions() -> impl Strategy<Value = Vec<(String, Option<String>)>> {
    let word = || proptest::sample::select(vec!["a", "b", "c"]).prop_map(str::to_owned);
    proptest::collection::vec((word(), proptest::option::of(word())), 0..5)
}

proptest! {
    /// Whatever the sessions, a target resolves exactly when one live session has it as
    /// its id or name and no other live session shares that session's name, and then
    /// to that session; `show` displays the same session.
    #[test]
    fn a_target_resolves_to_the_one_session_it_can_mean_or_is_refused(sessions in live_sessions()) {
        let rows: Vec<(u32, &str, Option<&str>, &str)> = sessions
            .iter()
            .enumerate()
            .map(|(n, (id, name))| (100 + u32::try_from(n).unwrap(), id.as_str(), name.as_deref(), ""))
            .collect();
        let discovery = discovery(&rows);
        let roster = discovery.roster(&fake::home(), Scope::All).unwrap();
        for given in ["a", "b", "c", "z"] {
            let meant: Vec<_> = rows
                .iter()
                .filter(|(_, id, name, _)| *id == given || *name == Some(given))
                .collect();
            let expected = match meant.as_slice() {
                [(raw, _, name, _)] => name
                    .is_none_or(|name| rows.iter().filter(|r| r.2 == Some(name)).count() == 1)
                    .then_some(*raw),
                _ => None,
            };
            match (expected, roster.resolve(given)) {
                (Some(raw), Ok(session)) => prop_assert_eq!(session.pid.get(), raw),
                (None, Err(err)) => {
                    let kind = err.refusal().unwrap().kind;
                    let want = if meant.is_empty() {
                        RefusalKind::NotLive
                    } else {
                        RefusalKind::IdentityMismatch
                    };
                    prop_assert_eq!(kind, want, "{}", given);
                }
                (expected, got) => prop_assert!(false, "{given}: expected {expected:?}, got {got:?}"),
            }
            if let [(raw, ..)] = meant.as_slice() {
                prop_assert_eq!(roster.shown(given).unwrap().pid, Some(pid(*raw)));
            }
        }
    }
}
