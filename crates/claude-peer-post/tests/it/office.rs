//! The deliverer on real processes and files: live child processes registered as
//! sessions, the real gate, and a relay program that writes down what it was handed.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use claude_peer_deliver::{CommandRelay, Courier};
use claude_peer_post::{
    Address, Attempt, Message, NewMessage, Pass, PostOffice, Relays, SenderProcess, State, Step,
    Store,
};
use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Sleeper, proc_start, shell_script};
use serde_json::json;

/// A Claude home with sessions, a store, and a relay that appends `<name>: <text>` to a
/// file for each message it is handed.
struct World {
    sleepers: Vec<Sleeper>,
    temp: TempHome,
}

fn now_ms() -> u64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    u64::try_from(since.as_millis()).unwrap()
}

impl World {
    fn new(policy: &str) -> Self {
        let temp = TempHome::new().unwrap();
        fs::set_permissions(temp.root(), fs::Permissions::from_mode(0o700)).unwrap();
        let settings = json!({ "crossSessionInbound": policy });
        fs::write(temp.claude().user_settings(), settings.to_string()).unwrap();
        Self {
            sleepers: Vec::new(),
            temp,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.temp.root().join(name)
    }

    /// A live session `id` named `name` working in `cwd` (made under the home).
    fn session(&mut self, id: &str, name: &str, cwd: &str) -> u32 {
        let sleeper = Sleeper::spawn().unwrap();
        let pid = sleeper.pid();
        self.sleepers.push(sleeper);
        let cwd = self.path(cwd);
        fs::create_dir_all(&cwd).unwrap();
        let socket = self.temp.socket(pid).unwrap();
        let record = json!({
            "pid": pid, "sessionId": id, "cwd": cwd, "startedAt": 1_764_460_800_000_u64,
            "procStart": proc_start(pid).unwrap(), "version": "2.1.332", "peerProtocol": 1,
            "kind": "interactive", "entrypoint": "cli", "messagingSocketPath": socket,
            "name": name, "nameSource": "derived", "status": "idle",
        });
        self.temp.write_record(pid, record.to_string()).unwrap();
        pid
    }

    /// A post office over a store in the home, whose relay (given the message's sender
    /// name as `$1`) runs `body` after it wrote down what it was handed.
    fn office(&self, body: &str) -> PostOffice<Relays<CommandRelay>> {
        let handed = self.path("handed");
        let script = shell_script(
            self.path("relay"),
            &format!(
                "printf '%s: %s\\n' \"$CLAUDE_PEERS_TARGET_NAME\" \"$(cat)\" >> '{}'\n{body}",
                handed.display()
            ),
        )
        .unwrap();
        let store = Store::open(&self.path("state/post.db")).unwrap();
        let courier = || Courier::os().with_managed_settings(self.path("managed-settings.json"));
        let home = self.temp.claude().clone();
        let relays = Relays::new(courier(), home.clone(), move |from: &str| {
            CommandRelay::new(&script).arg(from)
        });
        PostOffice::new(store, courier(), home, relays)
    }

    /// What the relay was handed, a line a message.
    fn handed(&self) -> Vec<String> {
        fs::read_to_string(self.path("handed"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

const SENT: &str = "echo '{\"sent\":true}'";

fn post(office: &mut PostOffice<Relays<CommandRelay>>, to: Address, text: &str) -> String {
    let new = NewMessage {
        from: "build-bot".to_owned(),
        key: None,
        to,
        text: text.to_owned(),
        expires_at_ms: now_ms() + 60_000,
        in_reply_to: None,
    };
    office.store().post(&new, now_ms()).unwrap().message.id
}

fn get(office: &mut PostOffice<Relays<CommandRelay>>, id: &str) -> Message {
    office.store().get(id).unwrap().unwrap()
}

fn name(value: &str) -> Address {
    Address::Name(value.to_owned())
}

#[test]
fn a_message_to_a_name_waits_for_a_session_of_that_name_then_goes_once() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    let id = post(&mut office, name("reviewer"), "the build is green");
    let pass = office.pass().unwrap();
    assert_eq!(
        pass,
        Pass {
            waiting: 1,
            ..Pass::default()
        }
    );
    let waiting = get(&mut office, &id);
    assert_eq!(waiting.state, State::Waiting);
    let reason = waiting.reason.unwrap();
    assert!(
        reason.starts_with("not_live") && reason.contains("reviewer"),
        "{reason}"
    );
    assert!(world.handed().is_empty());

    world.session("8668bde0-50ff-4b1e-a7dc-8a4dcbefad57", "reviewer", "repo");
    assert_eq!(office.pass().unwrap().delivered, 1);
    assert_eq!(
        office.pass().unwrap(),
        Pass::default(),
        "nothing is sent twice"
    );
    assert_eq!(world.handed(), ["reviewer: the build is green"]);
    let delivered = get(&mut office, &id);
    assert_eq!(delivered.state, State::Delivered);
    assert_eq!(
        delivered.session_id.as_deref(),
        Some("8668bde0-50ff-4b1e-a7dc-8a4dcbefad57")
    );
    let states: Vec<State> = delivered.timeline.iter().map(|c| c.state).collect();
    assert_eq!(
        states,
        [
            State::Waiting,
            State::Waiting,
            State::Sending,
            State::Delivered
        ]
    );
}

#[test]
fn messages_to_one_address_go_in_order_and_a_waiting_address_holds_back_no_other() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-ada", "ada", "a");
    for text in ["one", "two", "three"] {
        post(&mut office, name("ada"), text);
    }
    let nobody = post(&mut office, name("nobody"), "lost?");
    post(&mut office, name("ada"), "four");
    let pass = office.pass().unwrap();
    assert_eq!((pass.delivered, pass.waiting), (4, 1));
    assert_eq!(
        world.handed(),
        ["ada: one", "ada: two", "ada: three", "ada: four"]
    );
    assert_eq!(get(&mut office, &nobody).state, State::Waiting);
}

#[test]
fn a_refusing_receiver_is_final_and_never_tried_again() {
    let mut world = World::new("refuse");
    let mut office = world.office(SENT);
    world.session("s-r", "reviewer", "r");
    let id = post(&mut office, name("reviewer"), "hi");
    assert_eq!(office.pass().unwrap().refused, 1);
    let refused = get(&mut office, &id);
    assert_eq!((refused.state, refused.attempts), (State::Refused, 0));
    assert!(
        refused
            .reason
            .unwrap()
            .contains("crossSessionInbound is `refuse`")
    );
    assert_eq!(office.pass().unwrap(), Pass::default());
    assert!(world.handed().is_empty(), "the relay never ran");
}

#[test]
fn a_failed_attempt_waits_its_backoff_and_a_name_two_sessions_hold_waits_saying_so() {
    let mut world = World::new("accept");
    let mut office = world.office("echo '{\"sent\":false,\"detail\":\"socket refused\"}'");
    world.session("s-1", "ops", "o");
    let id = post(&mut office, name("ops"), "restart");
    let later = post(&mut office, name("ops"), "and then this");
    assert_eq!(office.pass().unwrap().waiting, 2);
    let failed = get(&mut office, &id);
    assert_eq!((failed.state, failed.attempts), (State::Waiting, 1));
    assert!(
        failed
            .reason
            .as_deref()
            .unwrap()
            .contains("delivery_failed")
    );
    assert!(
        failed.not_before_ms >= now_ms() + 1000,
        "about 2 s from now"
    );
    // Within the backoff nothing is tried, and the later message keeps its turn.
    office.pass().unwrap();
    assert_eq!(world.handed().len(), 1);
    assert_eq!(get(&mut office, &later).attempts, 0);

    world.session("s-2", "review", "r1");
    world.session("s-3", "review", "r2");
    let twice = post(&mut office, name("review"), "which one?");
    office.pass().unwrap();
    let reason = get(&mut office, &twice).reason.unwrap();
    assert!(
        reason.starts_with("identity_mismatch")
            && reason.contains("2 live sessions are named `review`"),
        "{reason}"
    );
}

#[test]
fn a_cwd_address_takes_the_one_session_working_in_that_directory() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-top", "top", "work");
    world.session("s-below", "below", "work/sub");
    let dir = world.path("work").to_str().unwrap().to_owned();
    post(&mut office, Address::Cwd(dir.clone()), "to work");
    assert_eq!(office.pass().unwrap().delivered, 1);
    assert_eq!(world.handed(), ["top: to work"], "not the one below it");
    world.session("s-other", "other", "work");
    let id = post(&mut office, Address::Cwd(dir), "to whom?");
    office.pass().unwrap();
    let reason = get(&mut office, &id).reason.unwrap();
    assert!(reason.contains("2 live sessions work in"), "{reason}");
}

#[test]
fn an_expired_message_is_not_delivered_when_its_session_starts_later() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    let new = NewMessage {
        from: "build-bot".to_owned(),
        key: None,
        to: name("late"),
        text: "too late".to_owned(),
        expires_at_ms: now_ms() + 300,
        in_reply_to: None,
    };
    let id = office.store().post(&new, now_ms()).unwrap().message.id;
    std::thread::sleep(Duration::from_millis(400));
    world.session("s-late", "late", "l");
    assert_eq!(office.pass().unwrap().expired, 1);
    assert_eq!(get(&mut office, &id).state, State::Expired);
    office.pass().unwrap();
    assert!(world.handed().is_empty());
}

#[test]
fn what_a_stopped_office_left_sending_is_unknown_and_never_sent_by_itself() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-r", "reviewer", "r");
    let id = post(&mut office, name("reviewer"), "maybe sent");
    office
        .store()
        .step(&id, &Step::Send(Attempt::to("s")), now_ms())
        .unwrap();
    let settled = office.recover().unwrap();
    assert_eq!(settled.iter().map(|m| &m.id).collect::<Vec<_>>(), [&id]);
    assert_eq!(get(&mut office, &id).state, State::Unknown);
    office.pass().unwrap();
    assert!(world.handed().is_empty());
    office.store().step(&id, &Step::Retry, now_ms()).unwrap();
    assert_eq!(office.pass().unwrap().delivered, 1);
    assert_eq!(world.handed(), ["reviewer: maybe sent"]);
}

#[test]
fn each_message_goes_through_a_relay_for_its_own_sender_name() {
    let mut world = World::new("accept");
    let from = world.path("from");
    let mut office = world.office(&format!("echo \"$1\" >> '{}'\n{SENT}", from.display()));
    world.session("s-r", "reviewer", "r");
    for sender in ["build-bot", "deploy-bot"] {
        let new = NewMessage {
            from: sender.to_owned(),
            key: None,
            to: name("reviewer"),
            text: format!("from {sender}"),
            expires_at_ms: now_ms() + 60_000,
            in_reply_to: None,
        };
        office.store().post(&new, now_ms()).unwrap();
    }
    assert_eq!(office.pass().unwrap().delivered, 2);
    assert_eq!(fs::read_to_string(from).unwrap(), "build-bot\ndeploy-bot\n");
}

#[test]
fn a_relay_that_fails_after_it_could_have_sent_leaves_the_message_unknown_never_resent() {
    let mut world = World::new("accept");
    let mut office = world.office("sleep 0.1; exit 1");
    world.session("s-1", "ops", "o");
    let id = post(&mut office, name("ops"), "maybe sent");
    office.pass().unwrap();
    let unknown = get(&mut office, &id);
    assert_eq!((unknown.state, unknown.attempts), (State::Unknown, 1));
    assert!(unknown.reason.unwrap().contains("exited with status 1"));
    office.pass().unwrap();
    assert_eq!(
        world.handed().len(),
        1,
        "handed over once, never again by itself"
    );
}

/// A sender a killed post office left behind: a process leading its own group, as a
/// warm sender does, reaped when it ends (as init reaps an orphan): its pid and what
/// ended it.
fn orphan_sender() -> (u32, std::thread::JoinHandle<Option<i32>>) {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let mut child = std::process::Command::new("sleep")
        .arg("600")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id();
    (
        pid,
        std::thread::spawn(move || child.wait().unwrap().signal()),
    )
}

const ORPHAN: &str = "uds:/tmp/claude-peers-test/orphan.sock";

/// The transcript of `session_id` (working in `cwd` under the home), with `lines`.
fn transcript(world: &World, session_id: &str, lines: &[String]) -> PathBuf {
    let dir = world.temp.claude().root().join("projects/-project");
    fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{session_id}.jsonl"));
    let mut text = lines.join("\n");
    text.push('\n');
    fs::write(&path, text).unwrap();
    path
}

fn queued_line(from: &str, text: &str) -> String {
    let content = format!(
        "<cross-session-message from=\"{from}\" from-name=\"build-bot\" from-mode=\"prompting\">\n{text}\n</cross-session-message>"
    );
    json!({"type": "queue-operation", "operation": "enqueue", "content": content}).to_string()
}

fn read_line(from: &str, msg_id: &str) -> String {
    json!({"type": "user", "isMeta": true, "origin": {"kind": "peer", "msg_id": msg_id, "from": from}})
        .to_string()
}

/// Claims `id` as a killed post office would have: its sender `orphan`, the receiver's
/// transcript `len` bytes long then.
fn claim_as_killed(office: &mut PostOffice<Relays<CommandRelay>>, id: &str, orphan: u32, len: u64) {
    claim_from(office, id, orphan, Some(ORPHAN), len);
}

/// The same, the sender's address as known then.
fn claim_from(
    office: &mut PostOffice<Relays<CommandRelay>>,
    id: &str,
    orphan: u32,
    address: Option<&str>,
    len: u64,
) {
    let attempt = Attempt {
        session_id: "s-r".to_owned(),
        sender: Some(SenderProcess {
            pid: orphan,
            start_token: proc_start(orphan).unwrap(),
            address: address.map(str::to_owned),
        }),
        transcript_len: Some(len),
    };
    office
        .store()
        .step(id, &Step::Send(attempt), now_ms())
        .unwrap();
}

#[test]
fn a_killed_offices_attempt_found_in_the_transcript_is_delivered_and_its_sender_stopped() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-r", "reviewer", "project");
    let text = "deploy when green";
    // The same text from the same sender, before the attempt began, is another message.
    let before = transcript(&world, "s-r", &[queued_line(ORPHAN, text)]);
    let len = fs::metadata(&before).unwrap().len();
    let id = post(&mut office, name("reviewer"), text);
    let (orphan, ended) = orphan_sender();
    claim_as_killed(&mut office, &id, orphan, len);
    transcript(
        &world,
        "s-r",
        &[
            queued_line(ORPHAN, text),
            queued_line(ORPHAN, text),
            read_line(ORPHAN, "m-7"),
        ],
    );

    let settled = office.recover().unwrap();
    assert_eq!(settled.len(), 1);
    let message = get(&mut office, &id);
    assert_eq!(message.state, State::Delivered, "{message:?}");
    assert_eq!(message.msg_id.as_deref(), Some("m-7"));
    let receipt = message.receipt.unwrap();
    assert_eq!(receipt.outcome, claude_peer_deliver::Outcome::Read);
    assert_eq!(
        ended.join().unwrap(),
        Some(9),
        "the orphan sender was stopped"
    );
    office.pass().unwrap();
    assert!(world.handed().is_empty(), "never sent again");
}

#[test]
fn a_killed_offices_attempt_not_in_the_transcript_is_sent_again_once() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-r", "reviewer", "project");
    let text = "ping";
    let before = transcript(&world, "s-r", &[queued_line(ORPHAN, text)]);
    let len = fs::metadata(&before).unwrap().len();
    let id = post(&mut office, name("reviewer"), text);
    let (orphan, ended) = orphan_sender();
    claim_as_killed(&mut office, &id, orphan, len);
    // Another sender's message with the same text is not ours.
    transcript(
        &world,
        "s-r",
        &[
            queued_line(ORPHAN, text),
            queued_line("uds:/tmp/other.sock", text),
        ],
    );

    office.recover().unwrap();
    let message = get(&mut office, &id);
    assert_eq!(message.state, State::Waiting, "{message:?}");
    assert_eq!(ended.join().unwrap(), Some(9));
    assert_eq!(office.pass().unwrap().delivered, 1);
    assert_eq!(world.handed(), ["reviewer: ping"]);
    assert_eq!(get(&mut office, &id).attempts, 2);
}

#[test]
fn a_killed_offices_attempt_whose_transcript_cannot_be_read_is_unknown() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-r", "reviewer", "project");
    let id = post(&mut office, name("reviewer"), "maybe");
    let (orphan, _ended) = orphan_sender();
    claim_as_killed(&mut office, &id, orphan, 0);
    // A link where the transcript belongs is not read.
    let dir = world.temp.claude().root().join("projects/-project");
    fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(world.path("handed"), dir.join("s-r.jsonl")).unwrap();

    office.recover().unwrap();
    let message = get(&mut office, &id);
    assert_eq!(message.state, State::Unknown);
    let reason = message.reason.unwrap();
    assert!(reason.contains("transcript cannot be read"), "{reason}");
    office.pass().unwrap();
    assert!(world.handed().is_empty());
}

#[test]
fn a_killed_offices_first_send_is_found_by_sender_name_and_text_before_its_address_is_known() {
    let mut world = World::new("accept");
    let mut office = world.office(SENT);
    world.session("s-r", "reviewer", "project");
    let text = "first of the day";
    let id = post(&mut office, name("reviewer"), text);
    let (orphan, ended) = orphan_sender();
    claim_from(&mut office, &id, orphan, None, 0);
    let other = "uds:/tmp/claude-peers-test/other.sock";
    let mut lines = vec![
        // Another sender name with the same text is not ours.
        queued_line(other, text).replace("build-bot", "deploy-bot"),
        queued_line(ORPHAN, text),
        read_line(other, "m-other"),
        read_line(ORPHAN, "m-1"),
    ];
    transcript(&world, "s-r", &lines);

    office.recover().unwrap();
    let message = get(&mut office, &id);
    assert_eq!(
        (message.state, message.msg_id.as_deref()),
        (State::Delivered, Some("m-1"))
    );
    assert_eq!(ended.join().unwrap(), Some(9));

    // A held message names no sender name: without our address it cannot be told apart.
    let id = post(&mut office, name("reviewer"), "held one");
    let (orphan, _ended) = orphan_sender();
    let len = fs::metadata(transcript(&world, "s-r", &lines))
        .unwrap()
        .len();
    claim_from(&mut office, &id, orphan, None, len);
    let held = format!(
        "Held peer message — from {other} [verified pid 7] (peer claims name: build-bot); preview: «held one» — not delivered to Claude (1 held)."
    );
    lines.push(json!({"type": "system", "subtype": "informational", "content": held}).to_string());
    transcript(&world, "s-r", &lines);
    office.recover().unwrap();
    assert_eq!(get(&mut office, &id).state, State::Unknown);
}

#[test]
fn a_receivers_rate_limit_is_a_pace_of_2_s_not_a_growing_backoff() {
    let mut world = World::new("accept");
    // Claude Code's words when a receiver's bucket for this sender is empty, and any
    // other failure, by the message's text.
    let handed = world.path("handed");
    let mut office = world.office(&format!(
        "case \"$(tail -n1 '{}')\" in\n\
         *paced*) echo '{{\"sent\":false,\"detail\":\"Too many messages to this session just now: 30 were sent recently and more would be dropped by its rate limit, so this one was not sent.\"}}' ;;\n\
         *) echo '{{\"sent\":false,\"detail\":\"socket refused\"}}' ;;\n\
         esac",
        handed.display()
    ));
    world.session("s-1", "busy", "b");
    world.session("s-2", "broken", "k");
    let paced = post(&mut office, name("busy"), "paced");
    let broken = post(&mut office, name("broken"), "failing");
    for round in 1..=2 {
        let until = [&paced, &broken]
            .iter()
            .map(|id| get(&mut office, id).not_before_ms)
            .max()
            .unwrap();
        std::thread::sleep(Duration::from_millis(until.saturating_sub(now_ms()) + 20));
        office.pass().unwrap();
        for id in [&paced, &broken] {
            assert_eq!(get(&mut office, id).attempts, round, "attempt {round}");
        }
    }
    let now = now_ms();
    let (paced, broken) = (get(&mut office, &paced), get(&mut office, &broken));
    assert!(
        paced
            .reason
            .as_deref()
            .unwrap()
            .contains("Too many messages"),
        "{paced:?}"
    );
    assert!(
        paced.not_before_ms <= now + 2_100,
        "the receiver takes one more every 2 s: {}",
        paced.not_before_ms - now
    );
    assert!(
        broken.not_before_ms >= now + 3_000,
        "a failure's backoff doubles: {}",
        broken.not_before_ms - now
    );
}
