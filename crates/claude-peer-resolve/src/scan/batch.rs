//! Signalling ahead of the caller, and judging many records at once across the cores.
//!
//! A scan signals records until [`BATCH`] of them need reading. From [`PER_THREAD`] per
//! core those are judged on scoped threads, each taking the next record until none is
//! left (a thread that starts late, as waking a core on a VM can take milliseconds, just
//! takes fewer), into one slot per record, handed over in order. Fewer are judged one per
//! `next()`. So memory does not follow the registry's size, and a large live scan uses
//! every core.

use std::num::NonZero;
use std::panic;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use claude_peer_probe::{DirStatus, ProcessTable, RegistryFs};

use super::entry::skipped;
use crate::Entries;

/// Records judged together, at most: the most a scan holds ahead of its caller. Large
/// enough that a scan of a few hundred live sessions starts one thread, not one per
/// small batch: waking another core can take a millisecond or two here.
const BATCH: usize = 1024;
/// Records per thread, at least, for another thread to pay for itself: a live record
/// costs about 15 µs to judge, so 128 of them take about as long as a thread can take
/// to start.
const PER_THREAD: usize = 128;

/// Whether signalling ahead found records to signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ahead {
    /// Some records were signalled (all of them may have been left out).
    Signalled,
    /// No record was left to signal.
    Exhausted,
}

impl<P: ProcessTable, F: RegistryFs> Entries<'_, P, F> {
    /// Signals records until [`BATCH`] of them need reading (for a live-only scan, the
    /// ones alive), and judges those at once across the cores when there are enough
    /// to pay for the threads; otherwise they are judged one per `next()`.
    pub(super) fn signal_ahead(&mut self, status: DirStatus) -> Ahead {
        let mut ahead = Ahead::Exhausted;
        while self.ahead.len() < BATCH {
            let Some((pid, kind)) = self.records.next() else {
                break;
            };
            ahead = Ahead::Signalled;
            let signal = self.signal(pid, kind);
            if !skipped(self.scope, kind, signal) {
                self.ahead.push_back((pid, kind, signal));
            }
        }
        let cores = *self
            .cores
            .get_or_insert_with(|| thread::available_parallelism().map_or(1, NonZero::get));
        let threads = cores.min(self.ahead.len() / PER_THREAD);
        if threads > 1 {
            // Each record with the slot its entry is judged into, in place: no judged
            // entry is moved or sorted.
            let batch: Vec<_> = self
                .ahead
                .drain(..)
                .map(|record| (record, OnceLock::new()))
                .collect();
            let this = &*self;
            // Each thread takes the next unjudged record until none is left, so a thread
            // that starts late (waking another core can take milliseconds) only takes
            // fewer, and never holds the others up.
            let next = AtomicUsize::new(0);
            let take_and_judge = || {
                while let Some(&((pid, kind, signal), ref slot)) =
                    batch.get(next.fetch_add(1, Ordering::Relaxed))
                {
                    if let Some(session) = this.judge_record(pid, kind, signal, status) {
                        // Each record is taken once, so each slot is set once.
                        let _ = slot.set(session);
                    }
                }
            };
            thread::scope(|scope| {
                let others: Vec<_> = (1..threads).map(|_| scope.spawn(take_and_judge)).collect();
                take_and_judge();
                for other in others {
                    other
                        .join()
                        .unwrap_or_else(|panic| panic::resume_unwind(panic));
                }
            });
            self.judged = batch.into_iter();
        }
        ahead
    }
}
