//! Stopping sends from another thread (a signal handler, a cancelled request): a
//! cancelled send never starts its hand-over, and one under way has its sender killed
//! and reaped, and its plans removed, before it returns.

use std::collections::HashMap;
use std::sync::mpsc::Sender as Channel;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::channel::Line;

/// A handle shared by the relays it is given to ([`crate::ClaudeRelay::cancel_with`])
/// and whoever may stop them.
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    shared: Arc<Shared>,
    /// Also stops this handle's sends, and waits for them in [`Cancel::wait_idle`].
    parent: Option<Box<Cancel>>,
}

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

    /// A handle for one caller's sends (one request among many): cancelling it stops
    /// only them, cancelling `self` stops them too, and `self` still waits for them.
    #[must_use]
    pub fn child(&self) -> Self {
        Self {
            shared: Arc::default(),
            parent: Some(Box::new(self.clone())),
        }
    }

    /// Stops every send under way and every later one.
    pub fn cancel(&self) {
        let mut state = self.lock();
        state.cancelled = true;
        for lines in state.running.values() {
            let _ = lines.send(Line::Cancelled);
        }
    }

    /// Whether [`Cancel::cancel`] was called, on this handle or a parent.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.lock().cancelled || self.parent.as_ref().is_some_and(|p| p.is_cancelled())
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
                .shared
                .idle
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Notes a running sender whose waits read `lines`, here and in the parents;
    /// `None` once any of them is cancelled.
    pub(crate) fn register(&self, lines: Channel<Line>) -> Option<Running> {
        let parent = match &self.parent {
            Some(parent) => Some(Box::new(parent.register(lines.clone())?)),
            None => None,
        };
        let mut state = self.lock();
        if state.cancelled {
            return None;
        }
        let id = state.next;
        state.next += 1;
        state.running.insert(id, lines);
        Some(Running {
            shared: Arc::clone(&self.shared),
            id,
            _parent: parent,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.lock()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running sender's place in its [`Cancel`] and its parents; dropped once it is reaped.
#[derive(Debug)]
pub(crate) struct Running {
    shared: Arc<Shared>,
    id: u64,
    /// Held only to be dropped after this one: the parent hears last.
    _parent: Option<Box<Running>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.shared.lock().running.remove(&self.id);
        self.shared.idle.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn a_child_is_stopped_by_itself_or_its_parent_and_its_parent_waits_for_it() {
        let parent = Cancel::new();
        let (one, two) = (parent.child(), parent.child());
        let (one_tx, one_rx) = mpsc::channel();
        let (two_tx, two_rx) = mpsc::channel();
        let one_running = one.register(one_tx).unwrap();
        let two_running = two.register(two_tx).unwrap();

        one.cancel();
        assert!(one.is_cancelled() && one.register(mpsc::channel().0).is_none());
        assert_eq!(one_rx.try_recv(), Ok(Line::Cancelled));
        assert!(
            !parent.is_cancelled() && !two.is_cancelled(),
            "only the child"
        );
        assert!(two_rx.try_recv().is_err());
        assert!(
            !parent.wait_idle(Duration::ZERO),
            "its children's sends count"
        );
        drop(one_running);

        parent.cancel();
        assert!(two.is_cancelled() && parent.child().is_cancelled());
        assert_eq!(two_rx.try_recv(), Ok(Line::Cancelled));
        assert!(two.register(mpsc::channel().0).is_none());
        assert!(!parent.wait_idle(Duration::ZERO));
        drop(two_running);
        assert!(parent.wait_idle(Duration::ZERO) && one.wait_idle(Duration::ZERO));
    }
}
