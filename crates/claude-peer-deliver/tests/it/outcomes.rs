//! Every outcome of a delivery, with real sessions, settings and relay programs.

use std::fs;

use claude_peer_deliver::{CommandRelay, Error, Inbound, MAX_MESSAGE_BYTES};
use serde_json::json;

use crate::support::{World, quoted};

/// A relay that saves its stdin and environment, then confirms with a detail.
fn recording_relay(world: &World) -> CommandRelay {
    let script = world.script(
        "recording-relay",
        &format!(
            r#"cat > {message}
printf '%s\n' "$CLAUDE_PEERS_TARGET_SESSION_ID" "$CLAUDE_PEERS_TARGET_NAME" "$CLAUDE_PEERS_TARGET_PID" "$CLAUDE_PEERS_TARGET_SOCKET" "$CLAUDE_PEERS_TARGET_CWD" > {env}
echo 'sending...'
echo '{{"sent":true,"detail":"ok"}}'"#,
            message = quoted(&world.path("message")),
            env = quoted(&world.path("env")),
        ),
    );
    CommandRelay::new(script)
}

#[test]
fn an_accepting_session_gets_the_exact_message_automatically_with_its_address_in_the_environment() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("6f0c54d2-1f7e-4c55-9a43-0d7a3c1c2b10", "alpha-3f");
    let message = "first line\nsecond: é ✓ $HOME `id` 'quoted' \"double\"\n\n  trailing spaces  ";

    let delivered = world
        .courier()
        .deliver(world.home(), &live.id, message, &recording_relay(&world))
        .expect("an accepting live session is delivered to");

    assert_eq!(delivered.inbound, Inbound::Automatic);
    assert_eq!(delivered.inbound.as_str(), "automatic");
    assert_eq!(
        delivered.detail.as_deref(),
        Some("ok"),
        "the relay's detail is reported"
    );
    assert_eq!(delivered.session.pid.get(), live.pid);
    assert_eq!(
        fs::read(world.path("message")).unwrap(),
        message.as_bytes(),
        "the relay read exactly the message on its stdin"
    );
    assert_eq!(
        fs::read_to_string(world.path("env")).unwrap(),
        format!(
            "{}\n{}\n{}\n{}\n{}\n",
            live.id,
            live.name,
            live.pid,
            live.socket.display(),
            live.cwd.display()
        ),
        "the target's session id, name, pid, socket and cwd are in the environment"
    );
}

#[test]
fn a_holding_session_is_relayed_to_and_the_message_may_wait_for_approval() {
    let mut world = World::new();
    world.user_policy(Some("hold"));
    let live = world.session("hold-1", "holder");
    let (relay, marker) = world.marker_relay();

    let delivered = world
        .courier()
        .deliver(world.home(), &live.id, "hello", &relay)
        .unwrap();

    assert_eq!(delivered.inbound, Inbound::MayHold);
    assert_eq!(delivered.inbound.as_str(), "may_hold");
    assert_eq!(delivered.detail, None);
    assert!(marker.exists(), "the relay ran");
}

#[test]
fn an_unset_policy_is_claudes_default_so_the_message_may_wait() {
    let mut world = World::new();
    let live = world.session("unset-1", "unset");
    let (relay, _) = world.marker_relay();

    let without_file = world
        .courier()
        .deliver(world.home(), &live.id, "hello", &relay)
        .unwrap();
    world.user_policy(None);
    let without_key = world
        .courier()
        .deliver(world.home(), &live.id, "hello", &relay)
        .unwrap();

    assert_eq!(without_file.inbound, Inbound::MayHold, "no settings file");
    assert_eq!(
        without_key.inbound,
        Inbound::MayHold,
        "a settings file without the key"
    );
    assert_eq!(
        without_key.policy.decided_by, None,
        "nothing decided: Claude's default"
    );
}

#[test]
fn a_refusing_session_is_refused_as_inbound_refused_and_the_relay_never_starts() {
    let mut world = World::new();
    world.user_policy(Some("refuse"));
    let live = world.session("refuse-1", "refuser");
    let (kind, message) = world.refused(&live.id);

    assert_eq!(kind, "inbound_refused");
    assert!(message.contains("refuse"), "{message}");
    assert!(
        message.contains(&world.home().user_settings().display().to_string()),
        "the refusal names the file that refuses: {message}"
    );
    assert!(
        world.standing(&live.id),
        "refuse stands: trying again cannot help"
    );
}

#[test]
fn a_project_setting_can_refuse_even_when_the_user_accepts() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("project-1", "project");
    fs::create_dir_all(live.cwd.join(".claude")).unwrap();
    fs::write(
        live.cwd.join(".claude/settings.local.json"),
        json!({ "crossSessionInbound": "refuse" }).to_string(),
    )
    .unwrap();
    let (kind, _) = world.refused(&live.id);

    assert_eq!(kind, "inbound_refused");
}

#[test]
fn managed_settings_at_the_injected_path_outrank_the_user() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    fs::write(
        world.managed_settings(),
        json!({ "crossSessionInbound": "refuse" }).to_string(),
    )
    .unwrap();
    let live = world.session("managed-1", "managed");
    let (kind, message) = world.refused(&live.id);

    assert_eq!(kind, "inbound_refused");
    assert!(message.contains("managed"), "{message}");
}

#[test]
fn a_settings_file_that_does_not_parse_refuses_because_the_policy_is_in_doubt() {
    let mut world = World::new();
    fs::write(
        world.home().user_settings(),
        "{ \"crossSessionInbound\": \"accept\", ",
    )
    .unwrap();
    let live = world.session("doubt-1", "doubt");
    let (kind, message) = world.refused(&live.id);

    assert_eq!(kind, "inbound_refused");
    assert!(message.contains("cannot be told"), "{message}");
    assert!(
        !world.standing(&live.id),
        "a policy in doubt may be told later"
    );
}

#[test]
fn an_unknown_session_id_is_not_live() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    world.session("someone-else", "other");
    let (kind, _) = world.refused("no-such-session");

    assert_eq!(kind, "not_live");
}

#[test]
fn a_session_whose_process_has_exited_is_not_live() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("crashed-1", "crashed");
    world.kill(&live);
    let (kind, message) = world.refused(&live.id);

    assert_eq!(kind, "not_live");
    assert!(message.contains(&live.pid.to_string()), "{message}");
}

#[test]
fn a_live_session_without_a_messaging_socket_is_not_addressable() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let mut live = world.session("old-1", "old");
    live.record
        .as_object_mut()
        .unwrap()
        .remove("messagingSocketPath");
    world.write_record(&live);
    let (kind, _) = world.refused(&live.id);

    assert_eq!(kind, "not_addressable");
}

#[test]
fn two_live_sessions_sharing_a_name_refuse_as_identity_mismatch() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let first = world.session("twin-1", "repo-ab");
    let second = world.session("twin-2", "repo-ab");
    let (kind, message) = world.refused(&first.id);

    assert_eq!(kind, "identity_mismatch");
    assert!(
        message.contains(&second.pid.to_string()),
        "the refusal names the other holder: {message}"
    );
}

#[test]
fn a_message_above_64_kib_is_refused_before_anything_else() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("big-1", "big");
    let (relay, marker) = world.marker_relay();
    let message = "x".repeat(MAX_MESSAGE_BYTES + 1);

    let to_live = world
        .courier()
        .deliver(world.home(), &live.id, &message, &relay)
        .unwrap_err();
    let to_nobody = world
        .courier()
        .deliver(world.home(), "no-such-session", &message, &relay)
        .unwrap_err();

    assert!(
        matches!(
            to_live,
            Error::MessageTooLarge {
                len: 65_537,
                limit: 65_536
            }
        ),
        "{to_live:?}"
    );
    assert_eq!(to_live.as_str(), "message_too_large");
    assert!(to_live.to_string().contains("65537"), "{to_live}");
    assert_eq!(
        to_nobody.as_str(),
        "message_too_large",
        "the size is checked before the session is resolved"
    );
    assert!(!marker.exists(), "the relay was never started");
}

#[test]
fn a_message_of_exactly_64_kib_is_relayed_whole() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("edge-1", "edge");
    let message: String = "0123456789abcdef".repeat(MAX_MESSAGE_BYTES / 16);

    world
        .courier()
        .deliver(world.home(), &live.id, &message, &recording_relay(&world))
        .unwrap();

    assert_eq!(fs::read(world.path("message")).unwrap(), message.as_bytes());
}

#[test]
fn an_empty_message_is_refused_and_so_is_one_of_only_whitespace() {
    let mut world = World::new();
    world.user_policy(Some("accept"));
    let live = world.session("empty-1", "empty");
    let (relay, marker) = world.marker_relay();

    for message in ["", " \n\t "] {
        let err = world
            .courier()
            .deliver(world.home(), &live.id, message, &relay)
            .unwrap_err();
        assert!(matches!(err, Error::EmptyMessage), "{message:?}: {err:?}");
        assert_eq!(err.as_str(), "empty_message");
    }
    assert!(!marker.exists(), "the relay was never started");
}
