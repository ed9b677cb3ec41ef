//! `claude-peers serve` with real Claude Code: a message posted before its receiver
//! starts is delivered once it starts, once; one post office per user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use claude_peer_post::protocol::{Record, Request};
use claude_peer_post::{Client, SOCKET_FILE};
use serde_json::json;

use crate::receiver::{Receiver, claude, prepare_home, wait_for};

/// A running `claude-peers serve` over `home`, its store and runtime directory private
/// to the test; killed when dropped.
struct Serve {
    child: Child,
    runtime: PathBuf,
}

/// A private directory (0700) for a test's state.
fn private() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

fn serve_command(home: &Path, state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_claude-peers"));
    command
        .arg("--home")
        .arg(home)
        .args(["serve", "--from", "harness", "--idle-exit", "0", "--claude"])
        .arg(claude())
        .arg("--managed-settings")
        .arg(state.join("none.json"))
        .arg("--store")
        .arg(state.join("state/post.db"))
        .arg("--runtime-dir")
        .arg(state.join("run"))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_CACHE_HOME", state.join("cache"));
    command
}

impl Serve {
    fn start(home: &Path, state: &Path) -> Self {
        let child = serve_command(home, state)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let runtime = state.join("run");
        let answers = wait_for(Duration::from_secs(20), || {
            let mut client = Client::connect(&runtime).ok()?;
            client.request(&Request::Ping, |_| {}).ok()?.pid
        });
        assert_eq!(answers, Some(child.id()), "the post office answers ping");
        Self { child, runtime }
    }

    fn ask(&self, request: &Request) -> Option<Record> {
        let mut client = Client::connect(&self.runtime).unwrap();
        client.request(request, |_| {}).unwrap().record
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_message_posted_to_a_directory_before_its_session_starts_is_read_there_once() {
    let home = Arc::new(private());
    prepare_home(
        home.path(),
        &["project"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let state = private();
    let serve = Serve::start(home.path(), state.path());
    let cwd = home.path().join("project").to_str().unwrap().to_owned();
    let text = "queued before you started: the build is green";
    let posted = serve
        .ask(&Request::Post {
            from: "harness".to_owned(),
            key: Some("build-7".to_owned()),
            to_kind: "cwd".to_owned(),
            to: cwd.clone(),
            text: text.to_owned(),
            expire_ms: 300_000,
        })
        .unwrap();
    assert_eq!(posted.state, "waiting");

    let receiver = Receiver::start_in(&home, "project", &[]);
    let get = Request::Get {
        id: posted.id.clone(),
    };
    let delivered = wait_for(Duration::from_secs(60), || {
        serve.ask(&get).filter(|r| r.state == "delivered")
    })
    .unwrap_or_else(|| panic!("not delivered: {:?}", serve.ask(&get)));
    assert_eq!(
        delivered.session_id.as_deref(),
        Some(receiver.session_id.as_str())
    );
    assert!(delivered.msg_id.is_some(), "{delivered:?}");
    let read = wait_for(Duration::from_secs(30), || {
        (receiver.times_read(text) > 0).then_some(())
    });
    assert!(read.is_some(), "the receiver's Claude was given it");
    // The same key again is the same message: nothing is sent twice.
    let again = serve
        .ask(&Request::Post {
            from: "harness".to_owned(),
            key: Some("build-7".to_owned()),
            to_kind: "cwd".to_owned(),
            to: cwd,
            text: text.to_owned(),
            expire_ms: 300_000,
        })
        .unwrap();
    assert_eq!(
        (again.id.as_str(), again.state.as_str()),
        (posted.id.as_str(), "delivered")
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(receiver.times_read(text), 1, "exactly once");
}

#[test]
fn a_second_serve_is_refused_naming_the_first_and_a_killed_ones_place_is_taken_over() {
    let home = private();
    let state = private();
    let mut first = Serve::start(home.path(), state.path());
    let second = serve_command(home.path(), state.path()).output().unwrap();
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains(&format!(
            "a post office runs already as pid {}",
            first.child.id()
        )),
        "{stderr}"
    );
    // Killed: its lock is released with it, its socket stays behind and is replaced.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(state.path().join("run").join(SOCKET_FILE).exists());
    let third = Serve::start(home.path(), state.path());
    assert_ne!(third.child.id(), first.child.id());
}
