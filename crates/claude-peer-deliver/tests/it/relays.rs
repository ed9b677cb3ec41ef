//! Real relay programs: what each behaviour of a relay comes to.

use std::fs;
use std::time::Duration;

use claude_peer_deliver::{CommandRelay, Delivered, Error, MAX_MESSAGE_BYTES, STDERR_TAIL_BYTES};
use rustix::io::Errno;
use rustix::process::{Pid, test_kill_process};

use crate::support::{World, quoted, refusal};

/// Delivers `message` through `relay` to an accepting live session of `world`.
fn deliver_with(
    world: &mut World,
    relay: &CommandRelay,
    message: &str,
) -> Result<Delivered, Error> {
    world.user_policy(Some("accept"));
    let live = world.session("relay-target", "target");
    world
        .courier()
        .deliver(world.home(), &live.id, message, relay)
}

/// The words of a `delivery_failed` refusal.
fn failure(result: Result<Delivered, Error>) -> String {
    let err = result.expect_err("the delivery fails");
    let (kind, message) = refusal(&err);
    assert_eq!(kind, "delivery_failed", "{message}");
    message.to_owned()
}

#[test]
fn a_relay_that_prints_garbage_fails_delivery_and_says_what_it_printed() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script(
        "garbage",
        "cat > /dev/null\necho 'sent it, probably'\necho '{\"sent\":' \necho 'oops' >&2",
    ));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(words.contains("printed no {\"sent\":true} line"), "{words}");
    assert!(
        words.contains("sent it, probably"),
        "its stdout is quoted: {words}"
    );
    assert!(words.contains("oops"), "its stderr is quoted: {words}");
}

#[test]
fn a_relay_that_exits_non_zero_fails_with_its_stderr_even_after_confirming() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script(
        "exit-three",
        "cat > /dev/null\necho '{\"sent\":true}'\necho 'the peer went away' >&2\nexit 3",
    ));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(words.contains("exited with status 3"), "{words}");
    assert!(words.contains("the peer went away"), "{words}");
}

#[test]
fn only_the_last_4_kib_of_a_long_stderr_is_kept() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script(
        "long-stderr",
        "cat > /dev/null\necho 'FIRST-WORDS' >&2\nhead -c 100000 /dev/zero | tr '\\0' x >&2\necho 'LAST-WORDS' >&2\nexit 1",
    ));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(words.contains("LAST-WORDS"), "the end of stderr is kept");
    assert!(
        !words.contains("FIRST-WORDS"),
        "the start of a long stderr is not"
    );
    let kept = words.matches('x').count();
    assert!(
        (STDERR_TAIL_BYTES - 20..=STDERR_TAIL_BYTES).contains(&kept),
        "about 4 KiB of stderr is kept, not {kept} bytes"
    );
    assert!(
        words.len() < STDERR_TAIL_BYTES + 512,
        "{} bytes",
        words.len()
    );
}

#[test]
fn a_relay_that_hangs_past_the_timeout_is_killed_and_reaped() {
    let mut world = World::new();
    let pid_file = world.path("relay-pid");
    let relay = CommandRelay::new(world.script(
        "hang",
        &format!(
            "echo $$ > {}\ncat > /dev/null\nsleep 600 &\nwait",
            quoted(&pid_file)
        ),
    ))
    // Long enough for the script to write its pid even on a loaded machine.
    .timeout(Duration::from_secs(2));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(words.contains("did not finish within 2 s"), "{words}");
    assert!(words.contains("killed"), "{words}");
    let pid: i32 = fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        test_kill_process(Pid::from_raw(pid).unwrap()),
        Err(Errno::SRCH),
        "the relay process {pid} was killed and reaped"
    );
}

#[test]
fn a_relay_that_crashes_mid_write_fails_naming_the_signal() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script(
        "crash",
        "cat > /dev/null\nprintf '{\"sent\":'\necho 'about to die' >&2\nkill -9 $$",
    ));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(
        words.contains("crashed: killed by signal SIGKILL"),
        "{words}"
    );
    assert!(words.contains("about to die"), "{words}");
}

#[test]
fn a_relay_that_says_it_did_not_send_fails_with_its_detail() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script(
        "declines",
        "cat > /dev/null\necho '{\"sent\":false,\"detail\":\"peer is busy\"}'",
    ));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(words.contains("did not send: peer is busy"), "{words}");
}

#[test]
fn a_relay_that_floods_its_output_and_reads_no_stdin_does_not_deadlock_on_a_large_message() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script(
        "no-stdin",
        "head -c 300000 /dev/zero | tr '\\0' o\necho\nhead -c 300000 /dev/zero | tr '\\0' e >&2\necho '{\"sent\":true,\"detail\":\"ignored stdin\"}'",
    ));
    let message = "m".repeat(60 * 1024);

    let delivered = deliver_with(&mut world, &relay, &message).unwrap();

    assert_eq!(delivered.detail.as_deref(), Some("ignored stdin"));
}

#[test]
fn a_relay_that_exits_before_reading_its_stdin_is_not_failed_for_the_broken_pipe() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.script("quick", "echo '{\"sent\":true}'"));

    let delivered = deliver_with(&mut world, &relay, &"q".repeat(MAX_MESSAGE_BYTES)).unwrap();

    assert_eq!(delivered.detail, None);
}

#[test]
fn a_relay_program_that_does_not_exist_fails_delivery() {
    let mut world = World::new();
    let relay = CommandRelay::new(world.path("no-such-relay"));

    let words = failure(deliver_with(&mut world, &relay, "hello"));

    assert!(words.contains("cannot start the relay"), "{words}");
    assert!(words.contains("no-such-relay"), "{words}");
}

#[test]
fn the_program_and_its_arguments_are_passed_as_given_without_a_shell() {
    let mut world = World::new();
    let args_file = world.path("args");
    let relay = CommandRelay::new(world.script(
        "args",
        &format!(
            "for a in \"$@\"; do printf '[%s]\\n' \"$a\"; done > {}\ncat > /dev/null\necho '{{\"sent\":true}}'",
            quoted(&args_file)
        ),
    ))
    .args(["two words", "$HOME", "a;b", "*", "", "`id`"]);

    deliver_with(&mut world, &relay, "hello").unwrap();

    assert_eq!(
        fs::read_to_string(&args_file).unwrap(),
        "[two words]\n[$HOME]\n[a;b]\n[*]\n[]\n[`id`]\n"
    );
}

#[test]
fn a_relay_that_may_have_sent_before_failing_is_uncertain_and_one_that_says_it_did_not_is_not() {
    let cases = [
        ("exit 1", true),
        ("kill -9 $$", true),
        ("echo not a confirmation", true),
        (
            "echo '{\"sent\":false,\"detail\":\"the socket refused\"}'",
            false,
        ),
    ];
    for (body, uncertain) in cases {
        let mut world = World::new();
        let relay = CommandRelay::new(world.script("relay", &format!("cat > /dev/null\n{body}")));
        let err = deliver_with(&mut world, &relay, "hello").unwrap_err();
        let refusal = err.refusal().unwrap();
        assert_eq!(refusal.kind.as_str(), "delivery_failed", "{body}");
        assert_eq!(refusal.uncertain, uncertain, "{body}: {}", refusal.message);
    }
}
