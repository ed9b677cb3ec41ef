//! The window between deciding and sending: what changes there stops the hand-over, and
//! the relay is then never started.

use claude_peer_deliver::{Inbound, Recipient};
use claude_peer_testkit::process::proc_start;
use serde_json::json;

use crate::support::{World, refusal};

#[test]
fn prepare_shows_the_target_and_policy_without_relaying_anything() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("window-0", "window");
    let (relay, marker) = world.marker_relay();
    let courier = world.courier();

    let prepared = courier.prepare(world.home(), &live.id, "hello").unwrap();

    assert_eq!(prepared.inbound(), Inbound::Automatic);
    let target = prepared.recipient();
    assert_eq!(
        target,
        Recipient {
            name: Some(live.name.clone()),
            session_id: live.id.clone(),
            pid: prepared.session().pid,
            socket: live.socket.clone(),
            cwd: live.cwd.clone(),
            proc_start: Some(proc_start(live.pid).unwrap()),
            home: world.home().root().to_path_buf(),
        }
    );
    assert!(!marker.exists(), "preparing relays nothing");
    prepared.hand_over(&relay).unwrap();
    assert!(marker.exists(), "the hand-over runs the relay");
}

#[test]
fn the_target_dying_between_prepare_and_hand_over_is_not_live_and_the_relay_never_starts() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("window-1", "dying");
    let (relay, marker) = world.marker_relay();
    let courier = world.courier();

    let prepared = courier.prepare(world.home(), &live.id, "hello").unwrap();
    world.kill(&live);
    let err = prepared.hand_over(&relay).unwrap_err();

    let (kind, message) = refusal(&err);
    assert_eq!(kind, "not_live");
    assert!(message.contains(&live.pid.to_string()), "{message}");
    assert!(!marker.exists(), "the relay was never started");
}

#[test]
fn a_clear_between_prepare_and_hand_over_is_not_live_and_the_relay_never_starts() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let mut live = world.session("window-2", "clearing");
    let (relay, marker) = world.marker_relay();
    let courier = world.courier();

    let prepared = courier.prepare(world.home(), &live.id, "hello").unwrap();
    live.record["sessionId"] = json!("window-2-after-clear");
    world.write_record(&live);
    let err = prepared.hand_over(&relay).unwrap_err();

    let (kind, message) = refusal(&err);
    assert_eq!(kind, "not_live");
    assert!(
        message.contains("window-2-after-clear"),
        "the refusal says what the pid runs now: {message}"
    );
    assert!(!marker.exists(), "the relay was never started");
}

#[test]
fn a_record_taken_over_by_another_start_token_between_prepare_and_hand_over_is_not_live() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let mut live = world.session("window-3", "recycled");
    let (relay, marker) = world.marker_relay();
    let courier = world.courier();

    let prepared = courier.prepare(world.home(), &live.id, "hello").unwrap();
    live.record["procStart"] = json!("1");
    world.write_record(&live);
    let err = prepared.hand_over(&relay).unwrap_err();

    assert_eq!(refusal(&err).0, "not_live");
    assert!(!marker.exists(), "the relay was never started");
}

#[test]
fn a_rename_between_prepare_and_hand_over_is_an_identity_mismatch() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let mut live = world.session("window-4", "before");
    let (relay, marker) = world.marker_relay();
    let courier = world.courier();

    let prepared = courier.prepare(world.home(), &live.id, "hello").unwrap();
    live.record["name"] = json!("after");
    world.write_record(&live);
    let err = prepared.hand_over(&relay).unwrap_err();

    assert_eq!(refusal(&err).0, "identity_mismatch");
    assert!(!marker.exists(), "the relay was never started");
}

#[test]
fn a_policy_turned_to_refuse_by_a_cd_between_prepare_and_hand_over_is_refused() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let mut live = world.session("window-5", "wanderer");
    let (relay, marker) = world.marker_relay();
    let courier = world.courier();
    let strict = world.path("strict-project");
    std::fs::create_dir_all(strict.join(".claude")).unwrap();
    std::fs::write(
        strict.join(".claude/settings.json"),
        r#"{"crossSessionInbound":"refuse"}"#,
    )
    .unwrap();

    let prepared = courier.prepare(world.home(), &live.id, "hello").unwrap();
    live.record["cwd"] = json!(strict.to_str().unwrap());
    world.write_record(&live);
    let err = prepared.hand_over(&relay).unwrap_err();

    assert_eq!(refusal(&err).0, "inbound_refused");
    assert!(!marker.exists(), "the relay was never started");
}
