//! Stopping sends from another thread (a signal handler): a cancelled send never starts
//! its hand-over, and one under way has its sender killed and reaped, and its plans
//! removed, before it returns.

use std::collections::HashMap;
use std::sync::mpsc::Sender as Channel;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::stream::Line;

/// A handle shared by the relays it is given to ([`crate::ClaudeRelay::cancel_with`])
/// and whoever may stop them.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<Shared>);

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    idle: Condvar,
}

#[derive(Debug, Default)]
struct State {
    cancelled: bool,
    /// The running senders' line channels, to wake their waits.
    running: HashMap<u64, Channel<Line>>,
    next: u64,
}

impl Cancel {
    /// A handle nothing has cancelled yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops every send under way and every later one.
    pub fn cancel(&self) {
        let mut state = self.lock();
        state.cancelled = true;
        for lines in state.running.values() {
            let _ = lines.send(Line::Cancelled);
        }
    }

    /// Whether [`Cancel::cancel`] was called.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }

    /// Waits up to `limit` for every send under way to end (its sender reaped, its
    /// plans removed); whether they all did.
    #[must_use]
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let mut state = self.lock();
        while !state.running.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .0
                .idle
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Notes a running sender whose waits read `lines`; `None` once cancelled.
    pub(crate) fn register(&self, lines: Channel<Line>) -> Option<Running> {
        let mut state = self.lock();
        if state.cancelled {
            return None;
        }
        let id = state.next;
        state.next += 1;
        state.running.insert(id, lines);
        Some(Running {
            cancel: self.clone(),
            id,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running sender's place in its [`Cancel`]; dropped once it is reaped.
#[derive(Debug)]
pub(crate) struct Running {
    cancel: Cancel,
    id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.cancel.lock().running.remove(&self.id);
        self.cancel.0.idle.notify_all();
    }
}
