//! The stop signals, for every command that runs until it is stopped or runs a sender
//! (`send`, `mailbox`, `mcp`, `top`): the first asks the command to stop cleanly, a
//! second ends the process at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::thread;

use claude_peer_sender::Cancel;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::{Exit, Failure};

/// The signals that stop a command: Ctrl-C, `kill`, a closed terminal, Ctrl-\.
const STOP: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT];

/// The exit a stop signal asks for.
pub(crate) const fn exit_for(signal: i32) -> Exit {
    if signal == SIGTERM {
        Exit::Terminated
    } else {
        Exit::Interrupted
    }
}

/// Watches for the stop signals on a thread of its own, from now on (a signal while the
/// command starts is not lost): `first` is called with the first; a second ends the
/// process at once (`128 +` the first, as the shell reports it), after `at_once` (kill a
/// sender's process group, give the terminal back).
pub(crate) fn watch(
    first: impl FnOnce(i32) + Send + 'static,
    at_once: impl FnOnce() + Send + 'static,
) -> Result<(), Failure> {
    let mut signals = Signals::new(STOP).map_err(|err| {
        Failure::error(
            "signals",
            format!("cannot watch for SIGINT, SIGTERM, SIGHUP and SIGQUIT: {err}"),
        )
    })?;
    thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || {
            let mut signals = signals.forever();
            let Some(signal) = signals.next() else {
                return;
            };
            first(signal);
            if signals.next().is_some() {
                at_once();
                std::process::exit(128 + signal);
            }
        })
        .map_err(|err| Failure::error("signals", format!("cannot watch for signals: {err}")))?;
    Ok(())
}

/// The stop signals as a [`Cancel`] for `send`: the first cancels every send, whose
/// sender is then killed and reaped and its plans removed, and the command returns.
#[derive(Debug)]
pub(crate) struct Interrupt {
    cancel: Cancel,
    signal: Arc<AtomicI32>,
    /// Set with the first signal, for what watches a flag (a relay program).
    stopped: Arc<AtomicBool>,
}

impl Interrupt {
    pub(crate) fn watch() -> Result<Self, Failure> {
        let (cancel, signal) = (Cancel::new(), Arc::new(AtomicI32::new(0)));
        let stopped = Arc::new(AtomicBool::new(false));
        let (pulled, seen, stop) = (cancel.clone(), Arc::clone(&signal), Arc::clone(&stopped));
        watch(
            move |first| {
                seen.store(first, Ordering::Release);
                stop.store(true, Ordering::Release);
                pulled.cancel();
            },
            || {},
        )?;
        Ok(Self {
            cancel,
            signal,
            stopped,
        })
    }

    /// The flag the first signal sets.
    pub(crate) fn stopped(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stopped)
    }

    /// The handle the command's relays stop with.
    pub(crate) fn cancel(&self) -> Cancel {
        self.cancel.clone()
    }

    /// The exit a signal asks for, once one came.
    pub(crate) fn exit(&self) -> Option<Exit> {
        match self.signal.load(Ordering::Acquire) {
            0 => None,
            signal => Some(exit_for(signal)),
        }
    }
}
