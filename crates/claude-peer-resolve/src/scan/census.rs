//! Which pids exist: `kill(pid, 0)` per record, or a census of them all at once.
//!
//! From 1,024 records on, learning the pids at once can cost less than signalling each
//! (the probe's `ProcessTable::census` decides, and declines where it cannot see every
//! process). Even then only the pids the census found are signalled, so `EPERM` and
//! `ESRCH` stay exactly what `kill` says; the census only spares the signals that would
//! have answered `ESRCH`.

use claude_peer_probe::{Census, Counting, FileKind, ProcessTable, RegistryFs};
use claude_peer_registry::{Pid, Signal};

use super::entry::is_readable_kind;
use crate::{Discovery, Entries, Scope};

impl<P: ProcessTable, F> Discovery<P, F> {
    /// The census for a scan of `scope` over `records` records, when it is cheaper than
    /// signalling each.
    pub(super) fn census(&self, records: usize, scope: Scope) -> Option<Census> {
        // A live-only scan needs no thread ids: a thread is never a live session.
        let counting = match scope {
            Scope::Live => Counting::Processes,
            Scope::All => Counting::ProcessesAndThreads,
        };
        self.processes.census(records, counting)
    }
}

impl<P: ProcessTable, F: RegistryFs> Entries<'_, P, F> {
    /// What `kill(pid, 0)` says of a record listed as `kind`. An entry its kind decides
    /// is never signalled, nor a pid the census did not find.
    pub(super) fn signal(&self, pid: Pid, kind: FileKind) -> Signal {
        match &self.census {
            _ if !is_readable_kind(kind) => Signal::NoSuchProcess,
            Some(census) if !census.contains(pid) => Signal::NoSuchProcess,
            _ => self.discovery.processes.signal(pid),
        }
    }
}
