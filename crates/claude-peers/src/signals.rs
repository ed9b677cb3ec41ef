//! SIGINT and SIGTERM for the commands that run a sender (`send`, `mcp`): the first
//! cancels every send, whose sender is then killed and reaped and its plans removed.

use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::thread;
use std::time::Duration;

use claude_peer_sender::Cancel;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{Exit, Failure};

/// How long `mcp` waits for its cancelled sends to be cleaned up before it exits.
const CLEANUP: Duration = Duration::from_secs(2);

/// What should happen at the first signal besides cancelling the sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnSignal {
    /// The command returns by itself once its send is cancelled.
    Cancel,
    /// The process exits once its sends are cleaned up (a server that would serve on).
    CancelAndExit,
}

/// The watch for SIGINT and SIGTERM, and the [`Cancel`] it pulls.
#[derive(Debug)]
pub(crate) struct Interrupt {
    cancel: Cancel,
    signal: Arc<AtomicI32>,
}

impl Interrupt {
    pub(crate) fn watch(on_signal: OnSignal) -> Result<Self, Failure> {
        let mut signals = Signals::new([SIGINT, SIGTERM]).map_err(|err| {
            Failure::error(
                "signals",
                format!("cannot watch for SIGINT and SIGTERM: {err}"),
            )
        })?;
        let (cancel, signal) = (Cancel::new(), Arc::new(AtomicI32::new(0)));
        let (pulled, seen) = (cancel.clone(), Arc::clone(&signal));
        thread::spawn(move || {
            let Some(first) = signals.forever().next() else {
                return;
            };
            seen.store(first, Ordering::Release);
            pulled.cancel();
            if on_signal == OnSignal::CancelAndExit {
                let _ = pulled.wait_idle(CLEANUP);
                std::process::exit(128 + first);
            }
        });
        Ok(Self { cancel, signal })
    }

    /// The handle the command's relays stop with.
    pub(crate) fn cancel(&self) -> Cancel {
        self.cancel.clone()
    }

    /// The exit a signal asks for, once one came.
    pub(crate) fn exit(&self) -> Option<Exit> {
        match self.signal.load(Ordering::Acquire) {
            0 => None,
            SIGTERM => Some(Exit::Terminated),
            _ => Some(Exit::Interrupted),
        }
    }
}
