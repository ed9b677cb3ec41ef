//! `top` in a real terminal over real interactive Claude Code sessions: rows come and go
//! with the sessions, one waiting on its user is listed first, and a message typed in
//! the dashboard reaches a session and its receipt comes back to the row.

use std::fs;
use std::sync::Arc;

use claude_peer_endpoint::Reply;
use serde_json::{Value, json};

use crate::receiver::{REPLYING_ARGS, Receiver, last_user_message, prepare_home, replying_script};
use crate::top::{Terminal, row};

/// What the messaged session answers.
const REPLY: &str = "a reply for the dashboard";

/// The session's name as its record gives it.
fn name_of(receiver: &Receiver) -> String {
    let record = receiver
        .home
        .path()
        .join("sessions")
        .join(format!("{}.json", receiver.pid));
    let record: Value = serde_json::from_slice(&fs::read(record).unwrap()).unwrap();
    record["name"].as_str().unwrap().to_owned()
}

/// A receiver whose model, asked to `run it`, calls Bash: with permissions asked for,
/// the session then waits on its user.
fn asking(home: &Arc<tempfile::TempDir>, cwd: &str) -> Receiver {
    let script = Arc::new(|request: &Value| {
        let last = last_user_message(request);
        if last.contains("run it") && !last.contains("tool_result") {
            Reply::ToolUse {
                id: "toolu_wait".to_owned(),
                name: "Bash".to_owned(),
                input: json!({"command": "touch made-by-the-test", "description": "make a file"}),
            }
        } else {
            Reply::Text("Noted.".to_owned())
        }
    });
    Receiver::launch(home, cwd, &["--permission-mode", "default"], &[], script)
}

#[test]
fn top_follows_real_sessions_lists_the_waiting_first_and_messages_one_with_its_receipt() {
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["alpha", "beta", "gamma"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let cache = tempfile::tempdir().unwrap();
    let idle = Receiver::launch(
        &home,
        "alpha",
        &REPLYING_ARGS,
        &[],
        replying_script(REPLY.to_owned()),
    );
    let idle_name = name_of(&idle);
    let terminal = Terminal::shell(200, 40, &[]);
    terminal.top(home.path(), cache.path(), "");
    terminal.wait("the idle session", |s| s.contains(&idle_name));

    // A session that starts appears; one waiting on its user goes above the idle one.
    let waiting = asking(&home, "beta");
    let waiting_name = name_of(&waiting);
    terminal.wait("the new session", |s| s.contains(&waiting_name));
    waiting.keys("run it");
    waiting.keys("Enter");
    let screen = crate::receiver::wait_for(std::time::Duration::from_secs(30), || {
        let s = terminal.screen();
        row(&s, &waiting_name)
            .is_some_and(|(_, line)| line.contains("waiting"))
            .then_some(s)
    })
    .unwrap_or_else(|| {
        panic!(
            "the session never showed as waiting:\n{}\nits own screen:\n{}",
            terminal.screen(),
            waiting.screen()
        )
    });
    assert!(
        row(&screen, &waiting_name).unwrap().0 < row(&screen, &idle_name).unwrap().0,
        "waiting first:\n{screen}"
    );
    assert!(screen.contains("1 waiting"), "{screen}");

    // `/` filters; Enter on the one row left shows its details.
    terminal.text(&format!("/{idle_name}"));
    terminal.keys(&["Enter"]);
    terminal.wait("only the idle session", |s| {
        s.contains(&idle_name) && !s.contains(&waiting_name)
    });
    terminal.keys(&["Enter"]);
    // A capture can catch a frame half drawn: wait for its last field.
    let details = terminal.wait("the details", |s| {
        s.contains(&idle.session_id) && row(s, "socket").is_some()
    });
    for field in ["session id", "pid", "cwd", "addressable"] {
        assert!(details.contains(field), "{field}:\n{details}");
    }
    // Each Escape waited for: two at once read as one key (Alt-Escape).
    terminal.keys(&["Escape"]);
    terminal.wait("the table", |s| row(s, "NAME").is_some());

    // `m` sends through the sender; the receipt reaches the row.
    terminal.text("m");
    terminal.wait("the message line", |s| s.contains("message to"));
    terminal.text("hello from the dashboard");
    terminal.keys(&["Enter"]);
    terminal.wait(&format!("the receipt on the row of {idle_name:?}"), |s| {
        row(s, &idle_name).is_some_and(|(_, line)| line.split_whitespace().any(|w| w == "read"))
    });
    assert_eq!(idle.times_read("hello from the dashboard"), 1);
    // Its reply comes back; the details show it, and the last prompt the session got:
    // ours, in its envelope.
    terminal.wait("news of the reply", |s| s.contains("reply from"));
    terminal.keys(&["Enter"]);
    let details = terminal.wait("the last prompt", |s| {
        row(s, "last prompt").is_some_and(|(_, l)| l.contains("hello from the"))
    });
    assert!(
        details.contains(REPLY),
        "the reply in the details:\n{details}"
    );
    terminal.keys(&["Escape"]);
    terminal.wait("the table", |s| row(s, "NAME").is_some());
    terminal.keys(&["Escape"]);
    terminal.wait("no filter", |s| !s.contains("filter:"));

    // Resized to 80x24 and back, it goes on.
    terminal.resize(80, 24);
    terminal.wait("both rows at 80x24", |s| {
        s.contains(&idle_name) && s.contains(&waiting_name)
    });
    terminal.resize(200, 40);

    // A session that ends vanishes.
    let gamma = Receiver::start_in(&home, "gamma", &[]);
    let gamma_name = name_of(&gamma);
    terminal.wait("the third session", |s| s.contains(&gamma_name));
    drop(gamma);
    terminal.wait("the third session gone", |s| !s.contains(&gamma_name));
    terminal.text("q");
    terminal.wait("the shell", |s| !s.contains("claude-peers top"));
    terminal.wait_for_shell();

    conversation_after_a_restart(&terminal, &home, cache.path(), &idle_name, &waiting_name);
}

/// `top` started again: its details show the conversation from the history.
fn conversation_after_a_restart(
    terminal: &Terminal,
    home: &Arc<tempfile::TempDir>,
    cache: &std::path::Path,
    idle_name: &str,
    waiting_name: &str,
) {
    terminal.top(home.path(), cache, "");
    terminal.text(&format!("/{idle_name}"));
    terminal.keys(&["Enter"]);
    terminal.wait("only the idle session", |s| {
        s.contains(idle_name) && !s.contains(waiting_name)
    });
    terminal.keys(&["Enter"]);
    let details = terminal.wait("the conversation", |s| s.contains(REPLY));
    assert!(
        details.contains("-> hello from the dashboard  (read)"),
        "what was sent, and what became of it:\n{details}"
    );
    terminal.keys(&["Escape"]);
    terminal.wait("the table", |s| row(s, "NAME").is_some());
    terminal.keys(&["Escape"]);
    terminal.wait("no filter", |s| !s.contains("filter:"));
    terminal.text("q");
    terminal.wait("the shell", |s| !s.contains("claude-peers top"));
}

#[test]
fn quitting_top_cancels_the_messages_still_waiting_and_says_how_many() {
    use std::os::unix::fs::PermissionsExt;
    let home = Arc::new(tempfile::tempdir().unwrap());
    prepare_home(
        home.path(),
        &["alpha"],
        &json!({"crossSessionInbound": "accept"}),
    );
    let receiver = Receiver::start_in(&home, "alpha", &[]);
    let name = name_of(&receiver);
    let cache = tempfile::tempdir().unwrap();
    // A Claude Code that takes 6 s to start: the first message is being sent all that
    // while, the others wait their turn.
    let slow = cache.path().join("slow-claude");
    fs::write(
        &slow,
        format!(
            "#!/bin/sh\nsleep 6\nexec {} \"$@\"\n",
            crate::receiver::claude().display()
        ),
    )
    .unwrap();
    fs::set_permissions(&slow, fs::Permissions::from_mode(0o755)).unwrap();
    let terminal = Terminal::shell(200, 40, &[]);
    terminal.line(&format!(
        "XDG_CACHE_HOME={cache} XDG_STATE_HOME={cache}/state {bin} --home {home} top --claude {slow} \
         --managed-settings {cache}/no-managed-settings.json 2> {cache}/top.err",
        cache = cache.path().display(),
        bin = env!("CARGO_BIN_EXE_claude-peers"),
        home = home.path().display(),
        slow = slow.display(),
    ));
    terminal.wait("the session", |s| s.contains(&name));
    for n in 0..=3 {
        terminal.text("m");
        terminal.wait("the message line", |s| s.contains("message to"));
        terminal.text(&format!("typed {n}"));
        terminal.keys(&["Enter"]);
        terminal.wait("the table again", |s| !s.contains("message to"));
    }
    terminal.text("q");
    terminal.wait_for_shell();
    let said = fs::read_to_string(cache.path().join("top.err")).unwrap();
    assert!(
        said.contains("3 messages typed and not yet sent were cancelled"),
        "{said:?}"
    );
    // The one under way went whole; longer than the sender's start, none of the others.
    assert_eq!(receiver.times_read("typed 0"), 1, "{}", receiver.screen());
    std::thread::sleep(std::time::Duration::from_secs(3));
    for n in 1..=3 {
        assert_eq!(receiver.times_read(&format!("typed {n}")), 0, "{n}");
    }
}
