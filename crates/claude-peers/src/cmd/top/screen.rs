//! The terminal while `top` runs: raw mode, the alternate screen, bracketed paste (a
//! pasted paragraph is one message, not a line per Enter) and a hidden cursor,
//! given back as they were when it quits, fails, panics or is signalled.

use std::io::{self, Stdout};
use std::sync::Once;

use crossterm::cursor::{Hide, Show};
use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::execute;
use crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;

/// The dashboard's terminal; dropping it restores the user's.
pub(crate) struct Screen {
    pub(crate) terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl std::fmt::Debug for Screen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Screen")
    }
}

impl Screen {
    /// Switches the terminal to the dashboard's modes, after installing the panic hook
    /// that switches it back first (so the panic's message is printed where it stays).
    pub(crate) fn enter() -> io::Result<Self> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode()?;
        let entered = execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableBracketedPaste,
            Hide
        )
        .and_then(|()| Terminal::new(CrosstermBackend::new(io::stdout())));
        entered
            .map(|terminal| Self { terminal })
            .inspect_err(|_| restore())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back: line discipline first, then the user's screen and cursor.
/// Safe to run twice (a panic's hook, then the unwinding drop).
pub(crate) fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableBracketedPaste,
        LeaveAlternateScreen,
        Show
    );
}
