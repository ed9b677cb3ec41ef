//! `top` in a real terminal: tmux runs a shell, the shell runs the built binary, and
//! the tests type keys and read the screen as a user would.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use claude_peer_testkit::home::TempHome;
use claude_peer_testkit::process::{Children, Sleeper, shell_script};
use claude_peer_testkit::registry::{Machine, Registry};

use crate::receiver::{claude, tmux, wait_for};
use crate::support::CommandHome as _;

/// How long a screen may take to show what a test waits for; the benchmarks measure
/// how long it does take.
const LIMIT: Duration = Duration::from_secs(60);

/// A shell in a tmux window of its own, in a clean environment.
pub(crate) struct Terminal {
    name: String,
}

impl Terminal {
    /// A `width`x`height` window running `sh` with `env` (`KEY=value`) added.
    pub(crate) fn shell(width: u16, height: u16, env: &[String]) -> Self {
        static COUNT: AtomicUsize = AtomicUsize::new(0);
        let name = format!("top{}", COUNT.fetch_add(1, Ordering::Relaxed));
        let mut command = vec![
            "env".to_owned(),
            "-i".to_owned(),
            format!("PATH={}", std::env::var("PATH").unwrap_or_default()),
            "TERM=xterm-256color".to_owned(),
            "PS1=$ ".to_owned(),
        ];
        command.extend(env.iter().cloned());
        command.push("sh".to_owned());
        let status = tmux()
            .args(["new-session", "-d", "-x", &width.to_string(), "-y"])
            .arg(height.to_string())
            .args(["-s", &name])
            .args(&command)
            .status()
            .unwrap();
        assert!(status.success(), "tmux new-session failed");
        let terminal = Self { name };
        terminal.wait("the shell's prompt", |s| s.contains('$'));
        terminal
    }

    /// `top` started from the shell for the Claude home `home`, sending with the pinned
    /// Claude Code, `cache` as its cache directory and its history under it.
    pub(crate) fn top(&self, home: &Path, cache: &Path, args: &str) {
        self.line(&format!(
            "XDG_CACHE_HOME={cache} XDG_STATE_HOME={cache}/state {bin} --home {home} top --claude {claude} \
             --managed-settings {cache}/no-managed-settings.json {args}",
            cache = cache.display(),
            bin = env!("CARGO_BIN_EXE_claude-peers"),
            home = home.display(),
            claude = claude().display(),
        ));
        self.wait("top's header", |s| s.contains("claude-peers top"));
    }

    /// Copies everything the pane's program writes from now on to `file`.
    pub(crate) fn record_output(&self, file: &Path) {
        let status = tmux()
            .args(["pipe-pane", "-t", &self.name])
            .arg(format!("cat > {}", file.display()))
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Pastes `text` as a terminal pastes it (bracketed, when the program asked).
    pub(crate) fn paste(&self, text: &str) {
        let set = tmux().args(["set-buffer", "--", text]).status().unwrap();
        let paste = tmux()
            .args(["paste-buffer", "-p", "-t", &self.name])
            .status()
            .unwrap();
        assert!(set.success() && paste.success());
    }

    /// Types `line` and Enter.
    pub(crate) fn line(&self, line: &str) {
        self.text(line);
        self.keys(&["Enter"]);
    }

    /// Types `text` as it is.
    pub(crate) fn text(&self, text: &str) {
        let status = tmux()
            .args(["send-keys", "-l", "-t", &self.name, text])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Presses keys by their tmux names (`Enter`, `Escape`, `Down`, `C-c`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        let status = tmux()
            .args(["send-keys", "-t", &self.name])
            .args(keys)
            .status()
            .unwrap();
        assert!(status.success());
    }

    pub(crate) fn resize(&self, width: u16, height: u16) {
        let status = tmux()
            .args(["resize-window", "-t", &self.name, "-x", &width.to_string()])
            .args(["-y", &height.to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// The screen as text; with `escapes`, with its colours and attributes as escape
    /// sequences.
    pub(crate) fn screen_of(&self, escapes: bool) -> String {
        let mut command = tmux();
        command.args(["capture-pane", "-p", "-t", &self.name]);
        if escapes {
            command.arg("-e");
        }
        String::from_utf8_lossy(&command.output().unwrap().stdout).into_owned()
    }

    pub(crate) fn screen(&self) -> String {
        self.screen_of(false)
    }

    /// Waits until the program the shell ran has ended: the pane runs the shell alone.
    pub(crate) fn wait_for_shell(&self) {
        let shell_alone = wait_for(LIMIT, || {
            let output = tmux()
                .args(["display-message", "-p", "-t", &self.name])
                .arg("#{pane_current_command}")
                .output()
                .unwrap();
            (String::from_utf8_lossy(&output.stdout).trim() == "sh").then_some(())
        });
        assert!(
            shell_alone.is_some(),
            "the program never ended:\n{}",
            self.screen()
        );
    }

    /// Waits until the screen shows `what` (as `check` says), and returns it; fails
    /// with the screen otherwise.
    pub(crate) fn wait(&self, what: &str, check: impl Fn(&str) -> bool) -> String {
        wait_for(LIMIT, || {
            let screen = self.screen();
            check(&screen).then_some(screen)
        })
        .unwrap_or_else(|| panic!("the screen never showed {what}:\n{}", self.screen()))
    }
}

impl Drop for Terminal {
    fn drop(&mut self) {
        let _ = tmux().args(["kill-session", "-t", &self.name]).status();
    }
}

/// The screen's line that starts with `text` (a table row by its name), and its index.
pub(crate) fn row<'a>(screen: &'a str, text: &str) -> Option<(usize, &'a str)> {
    screen
        .lines()
        .enumerate()
        .find(|(_, line)| line.starts_with(text))
}

/// Whether the terminal's line discipline is back as a shell wants it: canonical input
/// and echo on, as `stty` run in it reports to `file`.
fn assert_sane_tty(terminal: &Terminal, file: &Path) {
    terminal.line(&format!("stty -a > {}", file.display()));
    let stty = wait_for(LIMIT, || {
        fs::read_to_string(file)
            .ok()
            .filter(|s| s.contains("icanon"))
    })
    .unwrap();
    let words: Vec<&str> = stty.split_whitespace().collect();
    for mode in ["icanon", "echo", "isig"] {
        assert!(words.contains(&mode), "{mode} is off after top: {stty}");
    }
}

/// Whether `screen` (with escapes) sets a foreground or background colour anywhere:
/// an SGR sequence with a parameter 30–37, 40–47, 90–97, 100–107, 38 or 48 (39 and 49
/// are the defaults, no colour).
fn coloured(screen: &str) -> bool {
    screen.split("\u{1b}[").skip(1).any(|sequence| {
        let Some(end) = sequence.find(|c: char| !(c.is_ascii_digit() || c == ';')) else {
            return false;
        };
        sequence[end..].starts_with('m')
            && sequence[..end].split(';').any(|p| {
                matches!(
                    p.parse::<u32>(),
                    Ok(30..=38 | 40..=48 | 90..=97 | 100..=107)
                )
            })
    })
}

/// Whether the shell printed `EXIT=<status>` (not only the typed command holding it).
fn exited(screen: &str) -> bool {
    screen.lines().any(|line| {
        line.strip_prefix("EXIT=")
            .is_some_and(|code| !code.is_empty() && code.chars().all(|c| c.is_ascii_digit()))
    })
}

fn temp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn q_gives_back_the_screen_and_the_terminal_modes_that_were_there_before() {
    let (home, cache) = (TempHome::new().unwrap(), temp());
    let terminal = Terminal::shell(120, 30, &[]);
    terminal.line("echo BEFORE-TOP-MARKER");
    terminal.wait("the marker", |s| s.contains("BEFORE-TOP-MARKER\n"));
    terminal.top(home.root(), cache.path(), "");
    let shown = terminal.screen();
    assert!(
        !shown.contains("BEFORE-TOP-MARKER"),
        "top draws on a screen of its own:\n{shown}"
    );
    assert!(shown.contains("No live Claude Code sessions"), "{shown}");
    terminal.text("q");
    let back = terminal.wait("the shell again", |s| {
        s.contains("BEFORE-TOP-MARKER") && !s.contains("claude-peers top")
    });
    assert!(!back.contains("No live Claude Code sessions"), "{back}");
    assert_sane_tty(&terminal, &cache.path().join("stty-after-q"));

    // Ctrl-C quits the same way.
    terminal.top(home.root(), cache.path(), "");
    terminal.keys(&["C-c"]);
    terminal.wait("the shell again", |s| !s.contains("claude-peers top"));
    assert_sane_tty(&terminal, &cache.path().join("stty-after-ctrl-c"));
}

#[test]
fn a_panic_or_a_signal_gives_the_terminal_back_too() {
    let (home, cache) = (TempHome::new().unwrap(), temp());
    let terminal = Terminal::shell(120, 30, &[]);
    terminal.line("echo BEFORE-TOP-MARKER");
    // Typed once the shell is back at its prompt: a line typed ahead is echoed early,
    // and the shell's next prompt can land amid top's output.
    terminal.wait("the marker, then the prompt", |s| {
        let lines: Vec<&str> = s.lines().collect();
        lines
            .iter()
            .position(|l| *l == "BEFORE-TOP-MARKER")
            .is_some_and(|at| lines.get(at + 1).is_some_and(|l| l.starts_with('$')))
    });
    terminal.line(&format!(
        "CLAUDE_PEERS_TEST_PANIC=top {} --home {} top; echo EXIT=$?",
        env!("CARGO_BIN_EXE_claude-peers"),
        home.root().display()
    ));
    let screen = terminal.wait("the panic's message on the shell's screen", exited);
    assert!(screen.contains("BEFORE-TOP-MARKER"), "{screen}");
    assert!(screen.contains("CLAUDE_PEERS_TEST_PANIC=top"), "{screen}");
    assert!(screen.lines().any(|l| l == "EXIT=101"), "{screen}");
    assert_sane_tty(&terminal, &cache.path().join("stty-after-panic"));

    // SIGTERM from elsewhere. The next line is typed once the screen is clear: typed
    // ahead, its echo would be cleared away with the rest.
    terminal.line("clear");
    terminal.wait("a clear screen with the shell's prompt", |s| {
        !s.contains("EXIT=101") && s.trim_start().starts_with('$')
    });
    let pid_file = cache.path().join("top.pid");
    terminal.line(&format!(
        "sh -c 'echo $$ > {}; exec {} --home {} top'; echo EXIT=$?",
        pid_file.display(),
        env!("CARGO_BIN_EXE_claude-peers"),
        home.root().display()
    ));
    terminal.wait("top", |s| s.contains("claude-peers top"));
    let pid = fs::read_to_string(&pid_file).unwrap();
    let status = std::process::Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    assert!(status.success());
    let screen = terminal.wait("the shell after SIGTERM", exited);
    assert!(screen.lines().any(|l| l == "EXIT=143"), "{screen}");
    assert!(!screen.contains("claude-peers top"), "{screen}");
    assert_sane_tty(&terminal, &cache.path().join("stty-after-term"));
}

#[test]
fn a_second_signal_ends_a_quit_that_waits_for_a_sender_that_never_starts() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-1", "hanging-one", "idle", true);
    let cache = temp();
    // A Claude Code that never says it started; it ends when its stdin closes.
    let claude = shell_script(cache.path().join("claude"), "cat > /dev/null\n").unwrap();
    let pid_file = cache.path().join("top.pid");
    let terminal = Terminal::shell(120, 20, &[]);
    terminal.line(&format!(
        "XDG_CACHE_HOME={} sh -c 'echo $$ > {}; exec {} --home {} top --claude {}'; echo EXIT=$?",
        cache.path().display(),
        pid_file.display(),
        env!("CARGO_BIN_EXE_claude-peers"),
        home.root().display(),
        claude.display(),
    ));
    terminal.wait("the row", |s| row(s, "hanging-one").is_some());
    terminal.text("m");
    terminal.wait("the message line", |s| s.contains("message to"));
    terminal.text("hello");
    terminal.keys(&["Enter"]);
    terminal.wait("sending", |s| {
        row(s, "hanging-one").is_some_and(|(_, l)| l.contains("sending"))
    });
    terminal.text("q");
    // The screen is given back at once; the quit waits for the sender.
    terminal.wait("the shell's screen", |s| !s.contains("claude-peers top"));
    let pid = fs::read_to_string(&pid_file).unwrap();
    for _ in 0..2 {
        let status = std::process::Command::new("kill")
            .args(["-TERM", pid.trim()])
            .status()
            .unwrap();
        assert!(status.success());
        std::thread::sleep(Duration::from_millis(200));
    }
    let screen = terminal.wait("the exit", exited);
    assert!(screen.lines().any(|l| l == "EXIT=143"), "{screen}");
    assert_sane_tty(&terminal, &cache.path().join("stty-after-second-signal"));
}

#[test]
fn names_and_cwds_that_hold_control_characters_are_shown_escaped_and_no_color_is_plain() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-x", "evil\u{1b}[2Jname\u{202e}", "waiting", false);
    let cache = temp();
    let terminal = Terminal::shell(200, 20, &["NO_COLOR=1".to_owned()]);
    terminal.top(home.root(), cache.path(), "");
    let screen = terminal.wait("the hostile row", |s| s.contains("evil"));
    let (_, line) = row(&screen, "evil").unwrap();
    assert!(
        line.contains(r"evil\u{1b}[2Jname\u{202e}"),
        "the name is shown escaped: {line}"
    );
    let painted = terminal.screen_of(true);
    assert!(
        !coloured(&painted),
        "NO_COLOR: no colour at all: {painted:?}"
    );
    terminal.text("q");

    // Without NO_COLOR, the waiting status is coloured.
    let terminal = Terminal::shell(200, 20, &[]);
    terminal.top(home.root(), cache.path(), "");
    terminal.wait("the row", |s| s.contains("evil"));
    assert!(coloured(&terminal.screen_of(true)));
    terminal.text("q");
}

#[test]
fn a_narrow_terminal_drops_columns_from_the_right_and_resizing_keeps_it_working() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-1", "narrow-one", "idle", true);
    let cache = temp();
    let terminal = Terminal::shell(200, 20, &[]);
    terminal.top(home.root(), cache.path(), "");
    let wide = terminal.wait("the row", |s| s.contains("narrow-one"));
    let (_, header) = row(&wide, "NAME").unwrap();
    for title in ["STATUS", "MSG", "LAST", "PANE", "CWD"] {
        assert!(header.contains(title), "{title} at 200 columns: {header}");
    }
    terminal.resize(30, 10);
    let narrow = terminal.wait("the narrow table", |s| {
        row(s, "NAME").is_some_and(|(_, h)| !h.contains("CWD"))
    });
    let (_, header) = row(&narrow, "NAME").unwrap();
    assert!(header.contains("STATUS"), "{narrow}");
    assert!(!header.contains("PANE"), "{narrow}");
    assert!(row(&narrow, "narrow-one").is_some(), "{narrow}");
    assert!(narrow.lines().all(|l| l.chars().count() <= 30), "{narrow}");
    terminal.resize(80, 24);
    terminal.wait("80 columns", |s| {
        row(s, "NAME").is_some_and(|(_, h)| h.contains("MSG") && h.contains("LAST"))
    });
    terminal.resize(200, 20);
    terminal.wait("all the columns again", |s| {
        row(s, "NAME").is_some_and(|(_, h)| h.contains("CWD"))
    });
    // Still answering keys.
    terminal.text("?");
    terminal.wait("the help", |s| s.contains("filter by name or cwd"));
    terminal.keys(&["Escape"]);
    terminal.wait("the table", |s| s.contains("narrow-one"));
    terminal.text("q");
}

#[test]
fn hundreds_of_sessions_scroll_with_the_selection_in_view_and_the_filter_narrows_them() {
    let children = Children::spawn(300).unwrap();
    let registry = Registry::generate(&Machine::learn(), 0, &children).unwrap();
    // Same status, so by name (as text: ccproj-1000-06 sorts before ccproj-999-06).
    let mut names: Vec<String> = children
        .pids()
        .iter()
        .map(|pid| format!("ccproj-{pid}-06"))
        .collect();
    names.sort();
    let (first, last) = (&names[0], &names[names.len() - 1]);
    let cache = temp();
    let terminal = Terminal::shell(160, 30, &[]);
    terminal.top(registry.home.root(), cache.path(), "");
    let screen = terminal.wait("300 live", |s| s.contains("300 live"));
    assert!(screen.contains(first.as_str()), "{screen}");
    terminal.text("G");
    let screen = terminal.wait("the last row", |s| s.contains(last.as_str()));
    assert!(!screen.contains(first.as_str()), "{screen}");
    terminal.text("g");
    terminal.wait("the first row again", |s| s.contains(first.as_str()));
    terminal.text(&format!("/{last}"));
    terminal.keys(&["Enter"]);
    let screen = terminal.wait("one row", |s| {
        s.contains(last.as_str()) && !s.contains(first.as_str())
    });
    assert!(screen.contains(&format!("filter: {last}")), "{screen}");
    terminal.keys(&["Escape"]);
    // The selection stays on the row it was on; the others are back around it.
    // Waited for whole: a screen captured while a frame is being written can show the
    // new header above the old rows.
    terminal.wait("every row again, the selected one among them", |s| {
        !s.contains("filter:") && s.contains(last.as_str()) && s.matches("ccproj-").count() > 10
    });
    terminal.text("q");
}

#[test]
fn p_changes_the_inbound_policy_after_a_confirmation_keeping_every_other_byte() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-1", "policy-one", "idle", true);
    let settings: PathBuf = home.root().join("settings.json");
    let before = "{\n    \"theme\": \"dark\",\n    \"crossSessionInbound\": \"hold\",\n    \"env\": {\"A\": \"1\"}\n}\n";
    fs::write(&settings, before).unwrap();
    let cache = temp();
    let terminal = Terminal::shell(200, 20, &[]);
    terminal.top(home.root(), cache.path(), "");
    terminal.wait("the policy", |s| s.contains("inbound: hold"));
    // Declined: nothing written.
    terminal.text("pa");
    terminal.wait("the question", |s| {
        s.contains("set crossSessionInbound to accept")
    });
    terminal.text("n");
    terminal.wait("unchanged", |s| s.contains("policy unchanged"));
    assert_eq!(fs::read_to_string(&settings).unwrap(), before);
    // Confirmed.
    terminal.text("pa");
    terminal.wait("the question", |s| {
        s.contains("set crossSessionInbound to accept")
    });
    terminal.text("y");
    terminal.wait("the new policy", |s| s.contains("inbound: accept"));
    assert_eq!(
        fs::read_to_string(&settings).unwrap(),
        before.replace("\"hold\"", "\"accept\""),
        "only the value changed"
    );
    // Changed elsewhere after the question was asked: refused, nothing written.
    terminal.text("pr");
    terminal.wait("the question", |s| {
        s.contains("set crossSessionInbound to refuse")
    });
    let elsewhere = before.replace("\"hold\"", "\"hold\", \"model\": \"x\"");
    fs::write(&settings, &elsewhere).unwrap();
    terminal.text("y");
    terminal.wait("the conflict", |s| s.contains("policy unchanged"));
    assert_eq!(fs::read_to_string(&settings).unwrap(), elsewhere);
    terminal.wait("the policy read again", |s| s.contains("inbound: hold"));
    terminal.text("q");
}

#[test]
fn bell_rings_when_a_session_starts_waiting_and_only_with_bell() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-1", "bell-one", "idle", false);
    let record = home.record_path(child.pid());
    let cache = temp();
    for bell in [true, false] {
        fs::write(
            &record,
            fs::read_to_string(&record)
                .unwrap()
                .replace("waiting", "idle"),
        )
        .unwrap();
        let terminal = Terminal::shell(200, 20, &[]);
        let output = cache.path().join(format!("output-{bell}"));
        terminal.record_output(&output);
        terminal.top(home.root(), cache.path(), if bell { "--bell" } else { "" });
        terminal.wait("the idle row", |s| {
            row(s, "bell-one").is_some_and(|(_, l)| l.contains("idle"))
        });
        fs::write(
            &record,
            fs::read_to_string(&record)
                .unwrap()
                .replace("idle", "waiting"),
        )
        .unwrap();
        terminal.wait("the waiting row", |s| {
            row(s, "bell-one").is_some_and(|(_, l)| l.contains("waiting"))
        });
        terminal.text("q");
        terminal.wait("the shell", |s| !s.contains("claude-peers top"));
        // The recording lags the screen: read it once it holds top's last bytes (leaving
        // the alternate screen), which come after any bell.
        let written = wait_for(LIMIT, || {
            let written = fs::read(&output).ok()?;
            written
                .windows(8)
                .any(|w| w == b"\x1b[?1049l")
                .then_some(written)
        })
        .expect("top's output recorded to its end");
        assert_eq!(
            written.contains(&0x07),
            bell,
            "a bell {} with --bell {bell}",
            if bell { "rings" } else { "stays silent" }
        );
    }
}

#[test]
fn a_pasted_paragraph_is_one_message_and_a_long_line_shows_its_end() {
    let mut home = TempHome::new().unwrap();
    let child = Sleeper::spawn().unwrap();
    home.live_record(&child, "s-1", "paste-one", "idle", true);
    let cache = temp();
    let terminal = Terminal::shell(60, 12, &[]);
    terminal.top(home.root(), cache.path(), "");
    terminal.wait("the row", |s| s.contains("paste-one"));
    terminal.text("m");
    terminal.wait("the message line", |s| s.contains("message to paste-one:"));
    terminal.paste("first line\nsecond line");
    let screen = terminal.wait("the pasted text", |s| s.contains("second line"));
    let (_, line) = row(&screen, "message to").unwrap();
    assert!(line.contains(r"first line\u{a}second line"), "{line}");
    assert!(
        !screen.contains("sending"),
        "a pasted newline sends nothing:\n{screen}"
    );
    // Longer than the line: its end stays in view, where the typing is.
    terminal.text(&"x".repeat(80));
    terminal.text("END");
    let screen = terminal.wait("the end of the text", |s| s.contains("xxxEND"));
    assert!(
        row(&screen, "message to paste-one: …").is_some(),
        "{screen}"
    );
    terminal.keys(&["Escape"]);
    terminal.wait("nothing sent", |s| s.contains("message not sent"));
    terminal.text("q");
}
