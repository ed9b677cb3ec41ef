//! Resolution on fakes: every refusal, and the one success.

use std::path::PathBuf;

use claude_peer_probe::{FileKind, SocketDir, SocketStatus};
use claude_peer_registry::Pid;
use claude_peer_resolve::{Addressability, Discovery, Error, RefusalKind};
use claude_peer_testkit::fake::{self, FakeFile, FakeProcessTable, FakeRegistryFs, UID};
use claude_peer_testkit::fixtures::REAL_PID_DOMAIN;

const A: &str = "75c834bc-f549-4085-a152-f9973dc50b30";
const B: &str = "8668bde0-50ff-4b1e-a7dc-8a4dcbefad57";

fn pid(raw: u32) -> Pid {
    Pid::new(raw).unwrap()
}

fn record(pid: u32, session: &str, name: &str, extra: &str) -> FakeFile {
    FakeFile::regular(
        UID,
        format!(
            r#"{{"pid":{pid},"sessionId":"{session}","procStart":"{pid}00","pidDomain":"{REAL_PID_DOMAIN}","name":"{name}","messagingSocketPath":"/run/cc-socks/{pid}.sock"{extra}}}"#
        ),
    )
}

fn socket(fs: &mut FakeRegistryFs, pid: u32, kind: FileKind, owner: u32) {
    fs.sockets.insert(
        PathBuf::from(format!("/run/cc-socks/{pid}.sock")),
        SocketStatus::Present {
            kind,
            owner,
            dir: Some(SocketDir {
                owner: UID,
                shared: false,
            }),
        },
    );
}

/// Live processes 3839 and 9959 with start tokens `383900` and `995900`.
fn processes() -> FakeProcessTable {
    FakeProcessTable::new(UID, Some(REAL_PID_DOMAIN))
        .with_live(pid(3839), "383900")
        .with_live(pid(9959), "995900")
}

fn refusal(
    result: Result<claude_peer_resolve::AddressableSession, Error>,
) -> (RefusalKind, String) {
    match result {
        Ok(session) => panic!("expected a refusal, resolved {:?}", session.pid),
        Err(err) => {
            let refusal = err.refusal().expect("a refusal, not an IO error").clone();
            (refusal.kind, refusal.message)
        }
    }
}

#[test]
fn a_live_uniquely_named_session_with_its_own_socket_resolves() {
    let mut fs = FakeRegistryFs::owned_by(UID)
        .with_file("3839.json", record(3839, A, "ccproj-06", ""))
        .with_file("9959.json", record(9959, B, "reviewer", ""));
    socket(&mut fs, 9959, FileKind::Socket, UID);
    let discovery = Discovery::new(processes(), fs);
    let session = discovery.resolve_live_session(&fake::home(), B).unwrap();
    assert_eq!(session.pid, pid(9959));
    let by_name = discovery
        .resolve_live_session(&fake::home(), "reviewer")
        .unwrap();
    assert_eq!(by_name.pid, pid(9959));
}

#[test]
fn a_cleared_session_id_is_not_live_and_the_message_names_the_new_one() {
    let fs = FakeRegistryFs::owned_by(UID).with_file(
        "9959.json",
        record(
            9959,
            "85b58db7-new",
            "critic",
            &format!(r#","formerNames":[{{"name":"reviewer","sessionId":"{B}"}}]"#),
        ),
    );
    let (kind, message) =
        refusal(Discovery::new(processes(), fs).resolve_live_session(&fake::home(), B));
    assert_eq!(kind, RefusalKind::NotLive);
    assert!(
        message.contains("85b58db7-new") && message.contains("9959"),
        "{message}"
    );
}

#[test]
fn a_crashed_or_recycled_session_is_not_live_and_says_why() {
    let fs = FakeRegistryFs::owned_by(UID)
        .with_file("4000.json", record(4000, A, "crashed", ""))
        .with_file(
            "3839.json",
            FakeFile::regular(
                UID,
                format!(r#"{{"pid":3839,"sessionId":"{B}","procStart":"1"}}"#),
            ),
        );
    let discovery = Discovery::new(processes(), fs);
    let (kind, message) = refusal(discovery.resolve_live_session(&fake::home(), A));
    assert_eq!(kind, RefusalKind::NotLive);
    assert!(message.contains("gone"), "{message}");
    let (kind, message) = refusal(discovery.resolve_live_session(&fake::home(), B));
    assert_eq!(kind, RefusalKind::NotLive);
    assert!(message.contains("recycled"), "{message}");
    let (kind, _) = refusal(discovery.resolve_live_session(&fake::home(), "never-seen"));
    assert_eq!(kind, RefusalKind::NotLive);
}

#[test]
fn a_name_shared_by_two_live_sessions_refuses_instead_of_guessing() {
    let mut fs = FakeRegistryFs::owned_by(UID)
        .with_file(
            "3839.json",
            record(3839, A, "ccproj-06", r#","nameSource":"derived""#),
        )
        .with_file(
            "9959.json",
            record(9959, B, "ccproj-06", r#","nameSource":"derived""#),
        );
    socket(&mut fs, 3839, FileKind::Socket, UID);
    socket(&mut fs, 9959, FileKind::Socket, UID);
    let discovery = Discovery::new(processes(), fs);
    let (kind, message) = refusal(discovery.resolve_live_session(&fake::home(), A));
    assert_eq!(kind, RefusalKind::IdentityMismatch);
    assert!(
        message.contains("9959"),
        "names the other holder: {message}"
    );
    let (kind, message) = refusal(discovery.resolve_live_session(&fake::home(), "ccproj-06"));
    assert_eq!(kind, RefusalKind::IdentityMismatch);
    assert!(
        message.contains("3839") && message.contains("9959"),
        "lists every holder: {message}"
    );
    let (kind, _) = refusal(discovery.resolve_live_session(&fake::home(), "nobody"));
    assert_eq!(kind, RefusalKind::NotLive);
}

#[test]
fn a_live_session_that_cannot_be_messaged_is_not_addressable_with_the_reason() {
    type Case<'a> = (&'a str, Option<(FileKind, u32)>, &'a str, &'a str);
    let cases: [Case<'_>; 6] = [
        ("", None, "does not exist", "socket_missing"),
        (
            "",
            Some((FileKind::Socket, UID + 1)),
            "belongs to uid",
            "socket_not_owned",
        ),
        (
            "",
            Some((FileKind::Regular, UID)),
            "not a socket",
            "not_a_socket",
        ),
        (
            r#","spare":true"#,
            Some((FileKind::Socket, UID)),
            "spare",
            "spare",
        ),
        (
            r#","parkedJobId":"job-7""#,
            Some((FileKind::Socket, UID)),
            "parked",
            "parked",
        ),
        ("NO_SOCKET", None, "names no messaging socket", "no_socket"),
    ];
    for (extra, sock, expected, name) in cases {
        let file = if extra == "NO_SOCKET" {
            FakeFile::regular(
                UID,
                format!(r#"{{"pid":9959,"sessionId":"{B}","procStart":"995900"}}"#),
            )
        } else {
            record(9959, B, "reviewer", extra)
        };
        let mut fs = FakeRegistryFs::owned_by(UID).with_file("9959.json", file);
        if let Some((kind, owner)) = sock {
            socket(&mut fs, 9959, kind, owner);
        }
        let discovery = Discovery::new(processes(), fs);
        let (kind, message) = refusal(discovery.resolve_live_session(&fake::home(), B));
        assert_eq!(kind, RefusalKind::NotAddressable, "{expected}");
        assert!(message.contains(expected), "{expected}: {message}");
        // The reason is typed: a stable name, and the words the refusal quotes.
        let live = discovery.live(&fake::home()).unwrap().entries;
        let Addressability::NotAddressable(why) = &live[0].addressability else {
            panic!("{expected}: addressable");
        };
        assert_eq!(why.as_str(), name);
        assert!(message.ends_with(&format!(": {why}")), "{message}");
    }
}

#[test]
fn a_socket_in_a_directory_not_this_users_alone_is_not_addressable() {
    let cases = [
        (None, "is no directory"),
        (
            Some(SocketDir {
                owner: UID + 1,
                shared: false,
            }),
            "belongs to uid",
        ),
        (
            Some(SocketDir {
                owner: UID,
                shared: true,
            }),
            "may be written by others",
        ),
    ];
    for (dir, expected) in cases {
        let mut fs =
            FakeRegistryFs::owned_by(UID).with_file("9959.json", record(9959, B, "reviewer", ""));
        fs.sockets.insert(
            PathBuf::from("/run/cc-socks/9959.sock"),
            SocketStatus::Present {
                kind: FileKind::Socket,
                owner: UID,
                dir,
            },
        );
        let discovery = Discovery::new(processes(), fs);
        let (kind, message) = refusal(discovery.resolve_live_session(&fake::home(), B));
        assert_eq!(kind, RefusalKind::NotAddressable, "{expected}");
        assert!(message.contains(expected), "{expected}: {message}");
        let live = discovery.live(&fake::home()).unwrap().entries;
        let Addressability::NotAddressable(why) = &live[0].addressability else {
            panic!("{expected}: addressable");
        };
        assert_eq!(why.as_str(), "socket_dir_unsafe");
    }
}
