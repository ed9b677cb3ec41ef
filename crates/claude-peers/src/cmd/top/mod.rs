//! `top`: the live sessions on one screen, kept current by the watch engine, with the
//! operator's actions (details, a message and its receipt, the inbound policy).
//!
//! One loop owns the screen and waits on one channel. Three threads feed it: the watch
//! engine's events, the terminal's keys and resizes, and signals; a fourth sends the
//! messages typed here. The loop redraws after each burst of input and once a second
//! (the times shown count up); ratatui writes only the cells that changed.
//!
//! The loop is the only part that does IO. An input changes the [`State`] through its
//! pure updates (a key through [`keys::handle`], which answers with the [`Action`] to
//! take, if any); the loop takes it (the mail thread sends, the settings store writes
//! with a compare-and-swap) and feeds the result back as another update; before each
//! draw it gives the state the screen's height and the time, and [`view::draw`] draws
//! the state as it is.

mod board;
mod hosts;
mod keys;
mod mail;
mod screen;
mod state;
mod view;

#[cfg(test)]
mod tests;

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use claude_peer_post::{Direction, LogFilter, Order, Store, default_store_path};
use claude_peer_remote::Host;
use claude_peer_settings::Snapshot;
use claude_peer_watch::{Event, Watcher};

use self::keys::Action;
use self::mail::{Heard, Mail, Origin};
use self::screen::Screen;
pub(crate) use self::state::Colors;
use self::state::{Said, State};
use crate::error::{Exit, Failure};
use crate::ops::Context;
use crate::ops::remote::Hosts;
use crate::ops::settings::{self, Change};
use crate::signals;
use crate::table::now_ms;

/// How `top` was asked to run.
#[derive(Debug)]
pub(crate) struct Options {
    /// Ring the terminal's bell when a session starts waiting on its user.
    pub(crate) bell: bool,
    /// Colours, unless `NO_COLOR` says otherwise.
    pub(crate) colors: Colors,
    /// The Claude Code that sends messages, and the name they are from.
    pub(crate) claude: Option<PathBuf>,
    pub(crate) from: String,
    /// The hosts `--host` asks, when given: their sessions beside (or instead of) these.
    pub(crate) hosts: Option<Hosts>,
}

/// What reaches the loop.
#[derive(Debug)]
pub(crate) enum LoopInput {
    Watch(Vec<Event>),
    WatchFailed(String),
    Terminal(crossterm::event::Event),
    Signal(i32),
    Mail(Heard),
    Host(hosts::Told),
}

pub(crate) fn run(ctx: &Context, options: Options) -> Result<Exit, Failure> {
    if !io::stdin().is_terminal() || !io::stdout().is_terminal() {
        return Err(Failure::error(
            "not_a_terminal",
            "top needs a terminal on stdin and stdout; scripts read `list --json` or `watch --json`",
        ));
    }
    // This machine's sessions, unless `--host` leaves `local` out.
    let here = options
        .hosts
        .as_ref()
        .is_none_or(|hosts| hosts.list.contains(&Host::Local));
    let mut watcher = if here {
        Some(Watcher::os(ctx.home.clone())?)
    } else {
        None
    };
    let mut first = Vec::new();
    if let Some(watcher) = &mut watcher {
        while let Some(event) = watcher.next_event(Duration::ZERO)? {
            first.push(event);
        }
    }
    let mut state = State::new(
        ctx.home.sessions_dir(),
        read_settings(ctx),
        options.colors,
        now_ms(),
    );
    if let Some(hosts) = &options.hosts {
        let names = hosts::others(hosts).iter().map(Host::to_string).collect();
        state.board = std::mem::take(&mut state.board).with_hosts(names);
    }
    if let Some(warning) = watcher.as_ref().and_then(|w| w.warnings().first()) {
        state.status = warning.to_string();
    }
    state.board.apply(first);

    let (to_loop, inputs) = mpsc::channel();
    if let Some(watcher) = watcher {
        spawn("top-watch", to_loop.clone(), move |to| watch(watcher, &to))?;
    }
    let followed = options
        .hosts
        .as_ref()
        .map(|hosts| hosts::follow_all(hosts, &to_loop));
    spawn("top-keys", to_loop.clone(), |to| terminal(&to))?;
    // A second signal while the sender closes: out at once, the terminal given back
    // (again) first. The sender ends by itself when its stdin closes with us.
    let signalled = to_loop.clone();
    signals::watch(
        move |first| {
            let _ = signalled.send(LoopInput::Signal(first));
        },
        screen::restore,
    )?;
    let origin = Origin {
        claude: options.claude,
        from: options.from.clone(),
    };
    let mail = Mail::start(ctx.clone(), origin, to_loop.clone());
    let mut dashboard = Dashboard {
        ctx,
        mail: &mail,
        hosts: options.hosts.as_ref(),
        from: options.from,
        to_loop,
        history: default_store_path()
            .and_then(|path| Store::open(&path))
            .ok(),
        state,
        rings: 0,
    };
    let mut screen = Screen::enter()?;
    let exit = dashboard.run(&mut screen, &inputs, options.bell);
    drop(screen);
    if let Some(running) = &followed {
        crate::cmd::watch::stop(running);
    }
    let cancelled = mail.close();
    if cancelled > 0 {
        let plural = if cancelled == 1 { "" } else { "s" };
        eprintln!(
            "claude-peers top: {cancelled} message{plural} typed and not yet sent were cancelled"
        );
    }
    exit
}

/// The loop's side of the dashboard: the state, and what performs its actions.
struct Dashboard<'a> {
    ctx: &'a Context,
    mail: &'a Mail,
    /// The other hosts, and what a message to one of their sessions needs.
    hosts: Option<&'a Hosts>,
    from: String,
    to_loop: Sender<LoopInput>,
    /// The history, where the open details' conversation is read from.
    history: Option<Store>,
    state: State,
    /// How many sessions started waiting since the last draw (for `--bell`).
    rings: usize,
}

impl Dashboard<'_> {
    /// Draws, then takes the inputs a burst at a time until one of them ends it.
    fn run(
        &mut self,
        screen: &mut Screen,
        inputs: &mpsc::Receiver<LoopInput>,
        bell: bool,
    ) -> Result<Exit, Failure> {
        self.draw(screen)?;
        panic_after_first_draw();
        let mut tick = next_second();
        loop {
            match inputs.recv_timeout(tick.saturating_duration_since(Instant::now())) {
                Ok(input) => {
                    if let Some(exit) = self.take(input) {
                        return Ok(exit);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(Exit::Success),
            }
            // A burst of input is drawn once.
            while let Ok(input) = inputs.try_recv() {
                if let Some(exit) = self.take(input) {
                    return Ok(exit);
                }
            }
            // The clock, however busy the inputs: times move on, and the policy and the
            // open transcript may have been changed elsewhere.
            let ticked = Instant::now() >= tick;
            if ticked {
                self.state.settings = read_settings(self.ctx);
                tick = next_second();
            }
            self.read_transcript(ticked);
            self.draw(screen)?;
            if bell && self.rings > 0 {
                let mut out = io::stdout();
                let _ = out.write_all(b"\x07").and_then(|()| out.flush());
            }
            self.rings = 0;
        }
    }

    /// The state at the screen's size and the clock's time, drawn. The size is the one
    /// the frame was made for: the terminal is asked once a draw.
    fn draw(&mut self, screen: &mut Screen) -> io::Result<()> {
        self.state.tick(now_ms());
        let state = &mut self.state;
        screen
            .terminal
            .draw(|frame| {
                state.resize(view::table_rows(frame.area().as_size()));
                view::draw(state, frame);
            })
            .map(drop)
    }

    /// Applies one input; the exit, when it ends the dashboard.
    fn take(&mut self, input: LoopInput) -> Option<Exit> {
        match input {
            LoopInput::Watch(events) => self.rings += self.state.board.apply(events),
            LoopInput::WatchFailed(why) => self.state.status = format!("the watch stopped: {why}"),
            // A resize is measured at the draw that follows it.
            LoopInput::Terminal(event) => {
                let action = keys::handle(&mut self.state, &event)?;
                return self.perform(action);
            }
            LoopInput::Signal(signal) => return Some(signals::exit_for(signal)),
            LoopInput::Mail(heard) => self.state.heard(heard),
            LoopInput::Host(told) => self.rings += hosts::apply(&mut self.state, told),
        }
        None
    }

    /// Does what a key asked, and tells the state how it went.
    fn perform(&mut self, action: Action) -> Option<Exit> {
        match action {
            Action::Send { session_id, text } => {
                let there = self.state.board.host_of(&session_id).filter(|&at| at > 0);
                let host = there.zip(self.hosts).and_then(|(at, hosts)| {
                    Some((hosts, hosts::others(hosts).into_iter().nth(at - 1)?))
                });
                match host {
                    Some((hosts, host)) => {
                        hosts::send(hosts, host, session_id, text, &self.from, &self.to_loop);
                    }
                    None => self.mail.send(session_id, text),
                }
            }
            Action::SetPolicy { policy, expected } => {
                let written =
                    settings::change(self.ctx, Change::Set(policy), Some(expected.as_str()))
                        .map_err(|err| err.to_string());
                self.state.policy_written(policy, written);
            }
            Action::Quit => return Some(Exit::Success),
        }
        None
    }

    /// Reads the end of the open details' transcript (a bounded read), when it is due.
    fn read_transcript(&mut self, again: bool) {
        if let Some(session_id) = self.state.transcript_due(again).map(str::to_owned) {
            let summary = claude_peer_transcript::summary(&self.ctx.home, &session_id)
                .ok()
                .flatten();
            if let Some(history) = &self.history {
                let said = conversation(history, &session_id);
                self.state.conversation_read(session_id.clone(), said);
            }
            self.state.transcript_read(session_id, summary);
        }
    }
}

/// How many lines of a conversation the details show: the latest.
const CONVERSATION_LINES: u64 = 20;

/// The last lines of the conversation with `session_id` in the history, oldest first
/// (none when it cannot be read).
fn conversation(history: &Store, session_id: &str) -> Vec<Said> {
    let filter = LogFilter {
        with: Some(session_id.to_owned()),
        limit: Some(CONVERSATION_LINES),
        order: Order::OldestFirst,
        ..LogFilter::default()
    };
    let mut said = Vec::new();
    let _ = history.log(&filter, |logged| {
        let message = logged.message;
        said.push(Said {
            at_ms: message.created_at_ms,
            incoming: message.direction == Direction::In,
            fate: (message.direction == Direction::Out).then(|| {
                message.receipt.map_or_else(
                    || message.state.to_string(),
                    |r| r.outcome.as_str().to_owned(),
                )
            }),
            text: message.text,
        });
        std::ops::ControlFlow::Continue(())
    });
    said
}

fn read_settings(ctx: &Context) -> Result<Snapshot, String> {
    settings::read(ctx).map_err(|err| err.to_string())
}

/// Feeds the loop the watch engine's events, a burst at a time.
fn watch<P, F, N>(mut watcher: Watcher<P, F, N>, to: &Sender<LoopInput>)
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
            Ok(()) => LoopInput::Watch(burst),
            Err(err) => LoopInput::WatchFailed(err.to_string()),
        };
        let failed = matches!(input, LoopInput::WatchFailed(_));
        if to.send(input).is_err() || failed {
            return;
        }
    }
}

/// Feeds the loop the terminal's keys and resizes.
fn terminal(to: &Sender<LoopInput>) {
    while let Ok(event) = crossterm::event::read() {
        if to.send(LoopInput::Terminal(event)).is_err() {
            return;
        }
    }
}

fn spawn(
    name: &str,
    to: Sender<LoopInput>,
    work: impl FnOnce(Sender<LoopInput>) + Send + 'static,
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
