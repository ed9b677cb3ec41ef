//! Other machines over a real OpenSSH server on a loopback port: real receivers on the
//! "remote" (its own home, Claude home, XDG and runtime directories) listed with their
//! host, shown and sent to; hostile names, messages and hosts that run nothing; a host
//! that is down; `watch` across an sshd restart; `doctor --host`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use claude_peer_testkit::lines::Lines;
use claude_peer_testkit::sshd::{Machines, Programs};
use serde_json::{Value, json};

use crate::receiver::{Receiver, claude, parsed, prepare_home};
use crate::serve_send::private;

/// A remote Claude home whose receivers accept messages.
fn remote_home() -> Arc<tempfile::TempDir> {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["project"],
        &json!({"crossSessionInbound": "accept"}),
    );
    home
}

fn machines(hosts: &[(&str, &Path)]) -> Machines {
    Machines::start(
        hosts,
        &Programs {
            claude_peers: Some(PathBuf::from(env!("CARGO_BIN_EXE_claude-peers"))),
            claude: claude(),
        },
    )
    .unwrap()
}

/// `claude-peers ARGS` here, for `home`, reaching the hosts through `ssh`.
fn peers(ssh: &Path, home: &Path, state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(home)
        .args(args)
        .env("CLAUDE_PEERS_SSH", ssh)
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"))
        .env("XDG_STATE_HOME", state.join("state"))
        .env("XDG_CONFIG_HOME", state.join("config"))
        .stdin(Stdio::null());
    command
}

/// `claude-peers ARGS` run, its exit code, JSON and stderr.
type Run<'a> = dyn Fn(&[&str]) -> (i32, Value, String) + 'a;

fn json_of(command: &mut Command) -> (i32, Value, String) {
    parsed(&command.output().unwrap())
}

fn session_of<'a>(list: &'a Value, session_id: &str) -> &'a Value {
    list.as_array()
        .and_then(|all| all.iter().find(|s| s["session_id"] == session_id))
        .unwrap_or_else(|| panic!("no session {session_id} in {list}"))
}

#[test]
fn remote_sessions_are_listed_shown_and_sent_to_and_nothing_hostile_runs() {
    let remote = remote_home();
    let there = Receiver::start_in(&remote, "project", &[]);
    let here = Receiver::start(Some("accept"), &[]);
    let mut machines = machines(&[("r1", remote.path())]);
    let ssh = machines.ssh();
    let state = private();
    let marker = state.path().join("ran");
    let run = |args: &[&str]| json_of(&mut peers(&ssh, here.home.path(), state.path(), args));

    let (code, list, stderr) = run(&["--json", "--host", "r1", "--host", "local", "list"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(session_of(&list, &there.session_id)["host"], "r1");
    assert_eq!(session_of(&list, &here.session_id)["host"], "local");
    let words = peers(
        &ssh,
        here.home.path(),
        state.path(),
        &["--host", "r1", "--host", "local", "list"],
    )
    .output()
    .unwrap();
    let words = String::from_utf8(words.stdout).unwrap();
    let row = |host: &str, pid: u32| {
        words
            .lines()
            .any(|l| l.starts_with(host) && l.contains(&pid.to_string()))
    };
    assert!(
        words.starts_with("HOST") && row("r1", there.pid) && row("local", here.pid),
        "{words}"
    );
    let (_, alone, _) = run(&["--json", "list"]);
    assert_eq!(
        session_of(&alone, &here.session_id)["host"],
        Value::Null,
        "no --host: as ever"
    );

    let name = session_of(&list, &there.session_id)["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, shown, stderr) = run(&["--json", "--host", "r1", "show", &format!("r1:{name}")]);
    assert_eq!(
        (code, &shown["session_id"], &shown["host"]),
        (0, &json!(there.session_id), &json!("r1")),
        "{stderr}"
    );

    sent_byte_for_byte(&ssh, here.home.path(), state.path(), &there, &marker);
    // The remote's own history holds it, as its send recorded it.
    let (code, log, stderr) = run(&["--json", "--host", "r1", "log", "--limit", "1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        (&log[0]["session_id"], &log[0]["host"], &log[0]["receipt"]),
        (&json!(there.session_id), &json!("r1"), &json!("read")),
        "{log}"
    );
    assert!(
        log[0]["text"].as_str().unwrap().contains("$(touch"),
        "{log}"
    );
    let touch = marker.display();

    // A name or a host that a shell would run: nothing runs.
    let hostile = format!("; touch {touch}");
    let (code, refused, _) = run(&["--json", "--host", "r1", "show", &format!("r1:{hostile}")]);
    assert_eq!(
        (code, &refused["error"], &refused["host"]),
        (1, &json!("not_found"), &json!("r1"))
    );
    let proxy = format!("--host=-oProxyCommand=touch {touch}");
    let (code, refused, _) = run(&["--json", &proxy, "list"]);
    assert_eq!((code, &refused["error"]), (2, &json!("bad_host")));
    assert!(!marker.exists(), "something ran");

    doctor_over_ssh(&run);

    // The host down: named, exit 1, this machine's sessions still listed.
    machines.host("r1").unwrap().stop();
    let (code, list, stderr) = run(&["--json", "--host", "r1", "--host", "local", "list"]);
    assert_eq!(code, 1, "{list}");
    assert!(stderr.contains("r1 is unreachable"), "{stderr}");
    assert_eq!(session_of(&list, &here.session_id)["host"], "local");
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .all(|s| s["host"] == "local")
    );
}

#[test]
fn watch_across_hosts_tells_appeared_and_vanished_and_survives_an_sshd_restart() {
    let remote = remote_home();
    let mut machines = machines(&[("r1", remote.path())]);
    let ssh = machines.ssh();
    let local = private();
    let state = private();
    std::fs::create_dir_all(local.path().join("sessions")).unwrap();
    let mut child = peers(
        &ssh,
        local.path(),
        state.path(),
        &["--json", "--host", "r1", "watch"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    let lines = Lines::stdout(&mut child).unwrap();
    let next = |what: &str| {
        lines
            .next_json(Duration::from_secs(60))
            .unwrap_or_else(|err| panic!("no {what}: {err}"))
    };

    let first = Receiver::start_in(&remote, "project", &[]);
    let appeared = next("appeared");
    assert_eq!(
        (&appeared["event"], &appeared["session"]["host"]),
        (&json!("appeared"), &json!("r1"))
    );
    assert_eq!(appeared["session"]["session_id"], first.session_id);
    while let Ok(event) = lines.next_json(Duration::from_secs(2)) {
        assert_eq!(event["event"], "changed", "only its first changes: {event}");
    }

    // Down: told; meanwhile one session ends and another starts; back: both told.
    machines.host("r1").unwrap().stop();
    let down = next("unreachable");
    assert_eq!(
        (&down["event"], &down["host"]),
        (&json!("unreachable"), &json!("r1")),
        "{down}"
    );
    let first_id = first.session_id.clone();
    drop(first);
    let second = Receiver::start_in(&remote, "project", &[]);
    machines.host("r1").unwrap().serve().unwrap();
    let mut told = Vec::new();
    while told.len() < 3 {
        let event = next("the resync");
        if event["event"] != "changed" {
            told.push((
                event["event"].as_str().unwrap().to_owned(),
                event["session"]["session_id"].as_str().map(str::to_owned),
            ));
        }
    }
    assert_eq!(told[0], ("reachable".to_owned(), None));
    assert!(
        told.contains(&("vanished".to_owned(), Some(first_id))),
        "{told:?}"
    );
    assert!(
        told.contains(&("appeared".to_owned(), Some(second.session_id.clone()))),
        "{told:?}"
    );

    let second_id = second.session_id.clone();
    drop(second);
    let vanished = loop {
        let event = next("vanished");
        if event["event"] == "vanished" {
            break event;
        }
    };
    assert_eq!(
        (
            &vanished["session"]["session_id"],
            &vanished["session"]["host"]
        ),
        (&json!(second_id), &json!("r1"))
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// Quotes, $(…), backticks and newlines: byte for byte on the other side, nothing run.
fn sent_byte_for_byte(ssh: &Path, here: &Path, state: &Path, there: &Receiver, marker: &Path) {
    let touch = marker.display();
    let message = format!("it's \"done\" $(touch {touch}) `touch {touch}`\n; touch {touch} \\ end");
    let mut command = peers(
        ssh,
        here,
        state,
        &[
            "--json",
            "--host",
            "r1",
            "send",
            &format!("r1:{}", there.session_id),
        ],
    );
    let (code, sent, stderr) = {
        use std::io::Write;
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(message.as_bytes())
            .unwrap();
        parsed(&child.wait_with_output().unwrap())
    };
    assert_eq!(
        (code, &sent["receipt"], &sent["host"]),
        (0, &json!("read"), &json!("r1")),
        "{stderr}"
    );
    assert_eq!(
        (&sent["session"]["session_id"], &sent["session"]["host"]),
        (&json!(there.session_id), &json!("r1"))
    );
    assert_eq!(
        there.times_read(&message),
        1,
        "exactly the message, read once: {}",
        there.screen()
    );
}

/// No claude-peers there: doctor says so by name; with it, the remote's checks pass.
fn doctor_over_ssh(run: &Run<'_>) {
    let (code, doctor, _) = run(&[
        "--json",
        "--host",
        "r1",
        "--remote-bin",
        "/nonexistent/claude-peers",
        "doctor",
    ]);
    let missing = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "remote claude-peers")
        .unwrap();
    assert_eq!((code, &missing["ok"]), (1, &json!(false)), "{doctor}");
    assert!(
        missing["detail"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/claude-peers"),
        "{missing}"
    );
    let (code, doctor, _) = run(&["--json", "--host", "r1", "doctor"]);
    assert_eq!((code, &doctor["ok"]), (0, &json!(true)), "{doctor}");
    assert!(
        doctor["checks"].as_array().unwrap().len() > 2
            && doctor["checks"]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c["host"] == "r1"),
        "{doctor}"
    );
}

#[test]
fn the_hosts_file_names_every_host_and_a_remote_of_another_protocol_is_refused_by_name() {
    let remote = private();
    std::fs::create_dir_all(remote.path().join("sessions")).unwrap();
    let machines = machines(&[("r1", remote.path())]);
    let ssh = machines.ssh();
    let (local, state) = (private(), private());
    let run = |args: &[&str]| json_of(&mut peers(&ssh, local.path(), state.path(), args));

    let hosts = state.path().join("config/claude-peers/hosts");
    std::fs::create_dir_all(hosts.parent().unwrap()).unwrap();
    std::fs::write(&hosts, "# the machines\nr1  # the remote\nlocal\n").unwrap();
    let (code, list, stderr) = run(&["--json", "--hosts", "doctor"]);
    let asked: std::collections::BTreeSet<&str> = list["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["host"].as_str())
        .collect();
    assert_eq!(asked, ["local", "r1"].into(), "{code} {list} {stderr}");
    std::fs::write(&hosts, "r1\n-oProxyCommand=x\n").unwrap();
    let (code, refused, _) = run(&["--json", "--hosts", "list"]);
    assert_eq!((code, &refused["error"]), (2, &json!("hosts_file_invalid")));
    assert!(
        refused["message"].as_str().unwrap().contains("line 2"),
        "{refused}"
    );

    // A claude-peers too old to know the handshake, and one of another protocol.
    let real = env!("CARGO_BIN_EXE_claude-peers");
    for (name, script, says) in [
        (
            "old",
            "echo \"error: unexpected argument '--peer-protocol' found\" >&2; exit 2".to_owned(),
            "predates the remote protocol",
        ),
        (
            "other",
            format!("shift 2; exec {real} --peer-protocol 99 \"$@\""),
            "speaks remote protocol 1, the one asking speaks 99",
        ),
    ] {
        let bin = state.path().join(name);
        std::fs::write(&bin, format!("#!/bin/sh\n{script}\n")).unwrap();
        std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let bin = bin.to_str().unwrap();
        let (code, refused, _) = run(&["--json", "--host", "r1", "--remote-bin", bin, "show", "x"]);
        assert_eq!(
            (code, &refused["error"]),
            (1, &json!("remote_incompatible")),
            "{name}"
        );
        assert!(
            refused["message"].as_str().unwrap().contains(says),
            "{name}: {refused}"
        );
    }
}

#[test]
fn top_shows_each_sessions_host_and_messages_a_remote_one_in_place() {
    let remote = remote_home();
    let there = Receiver::start_in(&remote, "project", &[]);
    let here = Receiver::start(Some("accept"), &[]);
    let machines = machines(&[("r1", remote.path())]);
    let state = private();
    let names = |receiver: &Receiver| {
        let record: Value = serde_json::from_slice(
            &std::fs::read(
                receiver
                    .home
                    .path()
                    .join(format!("sessions/{}.json", receiver.pid)),
            )
            .unwrap(),
        )
        .unwrap();
        record["name"].as_str().unwrap().to_owned()
    };
    let (there_name, here_name) = (names(&there), names(&here));
    let terminal = crate::top::Terminal::shell(200, 40, &[]);
    terminal.line(&format!(
        "CLAUDE_PEERS_SSH={ssh} XDG_CACHE_HOME={state}/cache XDG_STATE_HOME={state}/state \
         XDG_CONFIG_HOME={state}/config {bin} --home {home} --host r1 --host local top \
         --claude {claude} --managed-settings {state}/none.json",
        ssh = machines.ssh().display(),
        state = state.path().display(),
        bin = env!("CARGO_BIN_EXE_claude-peers"),
        home = here.home.path().display(),
        claude = claude().display(),
    ));
    let on = |screen: &str, name: &str, host: &str| {
        crate::top::row(screen, name)
            .is_some_and(|(_, line)| line.split_whitespace().nth(1) == Some(host))
    };
    let screen = terminal.wait("both sessions, each with its host", |s| {
        s.contains("HOST") && on(s, &there_name, "r1") && on(s, &here_name, "local")
    });
    // The remote one selected (the first or the last of the two rows), messaged in place.
    let (remote_row, local_row) = (
        crate::top::row(&screen, &there_name).unwrap().0,
        crate::top::row(&screen, &here_name).unwrap().0,
    );
    terminal.text(if remote_row < local_row { "g" } else { "G" });
    terminal.text("m");
    terminal.wait("the message line", |s| {
        s.contains(&format!("message to {there_name}"))
    });
    terminal.text("to the other machine");
    terminal.keys(&["Enter"]);
    terminal.wait("the remote receipt on its row", |s| {
        crate::top::row(s, &there_name)
            .is_some_and(|(_, line)| line.split_whitespace().any(|w| w == "read"))
    });
    assert_eq!(there.times_read("to the other machine"), 1);
    assert_eq!(here.times_read("to the other machine"), 0);
    terminal.text("q");
    terminal.wait_for_shell();
}
