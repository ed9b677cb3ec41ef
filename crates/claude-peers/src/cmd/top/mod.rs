//! `top`: the live sessions on one screen, kept current by the watch engine, with the
//! operator's actions (details, a message and its receipt, the inbound policy).
//!
//! One loop owns the screen and waits on one channel. Three threads feed it: the watch
//! engine's events, the terminal's keys and resizes, and signals; a fourth sends the
//! messages typed here. The loop redraws after each burst of input and once a second
//! (the times shown count up); ratatui writes only the cells that changed.

mod board;
mod keys;
mod mail;
mod screen;
mod view;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use claude_peer_settings::Snapshot;
use claude_peer_transcript::Summary;
use claude_peer_watch::{Event, Watcher};

use self::board::Board;
use self::keys::Mode;
use self::mail::{Heard, Mail, Origin};
use self::screen::Screen;
use crate::error::{Exit, Failure};
use crate::ops::{Context, settings};
use crate::signals;

/// How `top` was asked to run.
#[derive(Debug)]
pub(crate) struct Options {
    /// Ring the terminal's bell when a session starts waiting on its user.
    pub(crate) bell: bool,
    /// Colours, unless `NO_COLOR` says otherwise.
    pub(crate) color: bool,
    /// The Claude Code that sends messages, and the name they are from.
    pub(crate) claude: Option<PathBuf>,
    pub(crate) from: String,
}

/// What reaches the loop.
#[derive(Debug)]
pub(crate) enum Input {
    Watch(Vec<Event>),
    WatchFailed(String),
    Terminal(crossterm::event::Event),
    Signal(i32),
    Mail(Heard),
}

/// Everything the screen shows.
#[derive(Debug)]
pub(crate) struct App {
    pub(crate) ctx: Context,
    pub(crate) board: Board,
    pub(crate) mode: Mode,
    /// The user's settings as last read: their `crossSessionInbound` is in the header.
    pub(crate) settings: Result<Snapshot, String>,
    /// The last thing to tell the user, on the bottom line.
    pub(crate) status: String,
    /// The end of the transcript of the session whose details are open: that session's
    /// id, and its transcript's end when it has one.
    pub(crate) transcript: Option<(String, Option<Summary>)>,
    pub(crate) color: bool,
    pub(crate) quit: Option<Exit>,
}

pub(crate) fn run(ctx: &Context, options: Options) -> Result<Exit, Failure> {
    if !io::stdin().is_terminal() || !io::stdout().is_terminal() {
        return Err(Failure::error(
            "not_a_terminal",
            "top needs a terminal on stdin and stdout; scripts read `list --json` or `watch --json`",
        ));
    }
    let mut watcher = Watcher::os(ctx.home.clone())?;
    let mut first = Vec::new();
    while let Some(event) = watcher.next_event(Duration::ZERO)? {
        first.push(event);
    }
    let mut app = App {
        ctx: ctx.clone(),
        board: Board::default(),
        mode: Mode::Table,
        settings: read_settings(ctx),
        status: watcher
            .warnings()
            .first()
            .map_or_else(String::new, ToString::to_string),
        transcript: None,
        color: options.color,
        quit: None,
    };
    app.board.apply(first);

    let (to_loop, inputs) = mpsc::channel();
    spawn("top-watch", to_loop.clone(), move |to| watch(watcher, &to))?;
    spawn("top-keys", to_loop.clone(), |to| terminal(&to))?;
    // A second signal while the sender closes: out at once, the terminal given back
    // (again) first. The sender ends by itself when its stdin closes with us.
    let signalled = to_loop.clone();
    signals::watch(
        move |first| {
            let _ = signalled.send(Input::Signal(first));
        },
        screen::restore,
    )?;
    let origin = Origin {
        claude: options.claude,
        from: options.from,
    };
    let mail = Mail::start(ctx.clone(), origin, to_loop);

    let mut screen = Screen::enter()?;
    screen.terminal.draw(|frame| view::draw(frame, &mut app))?;
    panic_after_first_draw();
    let mut tick = next_second();
    let exit = loop {
        let mut rings = 0;
        match inputs.recv_timeout(tick.saturating_duration_since(Instant::now())) {
            Ok(input) => rings += app.take(input, &mail),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break Exit::Success,
        }
        // A burst of input is drawn once.
        while let Ok(input) = inputs.try_recv() {
            rings += app.take(input, &mail);
        }
        if let Some(exit) = app.quit {
            break exit;
        }
        // The clock, however busy the inputs: times move on, and the policy and the open
        // transcript may have been changed elsewhere.
        let ticked = Instant::now() >= tick;
        if ticked {
            app.settings = read_settings(ctx);
            tick = next_second();
        }
        app.read_transcript(ticked);
        screen.terminal.draw(|frame| view::draw(frame, &mut app))?;
        if options.bell && rings > 0 {
            let mut out = io::stdout();
            let _ = out.write_all(b"\x07").and_then(|()| out.flush());
        }
    };
    drop(screen);
    mail.close();
    Ok(exit)
}

impl App {
    /// Applies one input; how many sessions started waiting.
    fn take(&mut self, input: Input, mail: &Mail) -> usize {
        match input {
            Input::Watch(events) => return self.board.apply(events),
            Input::WatchFailed(why) => self.status = format!("the watch stopped: {why}"),
            Input::Terminal(event) => keys::handle(self, &event, mail),
            Input::Signal(signal) => self.quit = Some(signals::exit_for(signal)),
            Input::Mail(heard) => self.heard(heard),
        }
        0
    }

    /// Reads the end of the transcript of the session whose details are open (a bounded
    /// read): when they open, and `again` once a second while they stay open.
    fn read_transcript(&mut self, again: bool) {
        let Mode::Details(session_id) = &self.mode else {
            self.transcript = None;
            return;
        };
        let read_for = self.transcript.as_ref().map(|(id, _)| id);
        if again || read_for != Some(session_id) {
            let summary = claude_peer_transcript::summary(&self.ctx.home, session_id)
                .ok()
                .flatten();
            self.transcript = Some((session_id.clone(), summary));
        }
    }

    fn heard(&mut self, heard: Heard) {
        match heard {
            Heard::Sent { session_id, result } => {
                let mail = match result {
                    Ok(delivered) => {
                        let name = delivered.session.record.display_name().unwrap_or("-");
                        self.status = format!("sent to {name}; its row shows what it does with it");
                        let outcome = delivered.receipt.map_or("accepted", |r| r.outcome.as_str());
                        board::Mail::Sent {
                            msg_id: delivered.msg_id.unwrap_or_default(),
                            outcome: outcome.to_owned(),
                        }
                    }
                    Err(failure) => {
                        self.status = format!("not sent: {}", failure.message);
                        board::Mail::Failed(failure.name.to_owned())
                    }
                };
                self.board.set_mail(&session_id, mail);
            }
            Heard::Event(claude_peer_sender::Event::Receipt(receipt)) => {
                self.board
                    .receipt(&receipt.msg_ids, receipt.outcome.as_str());
            }
            Heard::Event(claude_peer_sender::Event::Message {
                from,
                from_name,
                session_id,
                text,
            }) => match session_id {
                Some(session_id) => {
                    let name = from_name.unwrap_or(from);
                    self.status = format!("reply from {name} (Enter on its row shows it)");
                    self.board.reply(
                        &session_id,
                        board::Reply {
                            at_ms: crate::table::now_ms(),
                            text,
                        },
                    );
                }
                None => self.status = format!("message from {from}: {text}"),
            },
            Heard::Event(claude_peer_sender::Event::Closed {
                reason: Some(reason),
                ..
            }) => self.status = format!("the sender ended: {reason}"),
            Heard::Event(_) => {}
        }
    }
}

fn read_settings(ctx: &Context) -> Result<Snapshot, String> {
    settings::read(ctx).map_err(|failure| failure.message)
}

/// Feeds the loop the watch engine's events, a burst at a time.
fn watch<P, F, N>(mut watcher: Watcher<P, F, N>, to: &Sender<Input>)
where
    P: claude_peer_probe::ProcessTable,
    F: claude_peer_probe::RegistryFs,
    N: claude_peer_probe::Notifier,
{
    loop {
        let mut burst = Vec::new();
        let next = watcher
            .next_event(Duration::from_secs(3600))
            .and_then(|first| {
                burst.extend(first);
                while let Some(event) = watcher.next_event(Duration::ZERO)? {
                    burst.push(event);
                }
                Ok(())
            });
        let input = match next {
            Ok(()) if burst.is_empty() => continue,
            Ok(()) => Input::Watch(burst),
            Err(err) => Input::WatchFailed(err.to_string()),
        };
        let failed = matches!(input, Input::WatchFailed(_));
        if to.send(input).is_err() || failed {
            return;
        }
    }
}

/// Feeds the loop the terminal's keys and resizes.
fn terminal(to: &Sender<Input>) {
    while let Ok(event) = crossterm::event::read() {
        if to.send(Input::Terminal(event)).is_err() {
            return;
        }
    }
}

fn spawn(
    name: &str,
    to: Sender<Input>,
    work: impl FnOnce(Sender<Input>) + Send + 'static,
) -> Result<(), Failure> {
    thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || work(to))
        .map(drop)
        .map_err(|err| Failure::error("top_failed", format!("cannot start a thread: {err}")))
}

/// The wall clock's next whole second, when the times shown change.
fn next_second() -> Instant {
    let into = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_millis());
    Instant::now() + Duration::from_millis(u64::from(1000 - into))
}

/// Test builds only: `CLAUDE_PEERS_TEST_PANIC=top` panics once the first screen is
/// drawn, so a test can see the panic hook give the terminal back on the real binary.
fn panic_after_first_draw() {
    #[cfg(debug_assertions)]
    assert!(
        std::env::var_os("CLAUDE_PEERS_TEST_PANIC").is_none_or(|v| v != "top"),
        "CLAUDE_PEERS_TEST_PANIC=top"
    );
}
