//! `whoami`: the live session a program runs under, found through its parent processes.
//!
//! Claude Code runs its MCP servers and its Bash tool's shell as children of the
//! session's own process, so that process is among the caller's ancestors. Its record
//! is judged exactly as `list` judges it, and the record's session id is the answer: the
//! inherited `CLAUDE_CODE_SESSION_ID` is stale after `/clear`, and anyone can set it.

use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Pid};
use claude_peer_resolve::{Discovery, LiveSession, Scope};

use crate::ops::{Context, Error};

/// The most ancestors looked at: far more than any real chain, so a process table that
/// keeps answering cannot keep the walk going.
const MAX_ANCESTORS: usize = 64;

/// The live session whose process is the nearest ancestor of the process `start` (this
/// process's pid, for the command and the MCP server), or `not_in_a_session`.
pub(crate) fn whoami(ctx: &Context, start: u32) -> Result<LiveSession, Error> {
    // One look per ancestor: pinning what it sees would be pure cost.
    let discovery = Discovery::new(OsProcessTable::with_pin_limit(0), OsRegistryFs);
    match Pid::new(start) {
        Some(start) => nearest(&discovery, &ctx.home, start),
        None => Err(not_in_a_session(&ctx.home)),
    }
}

/// [`whoami`] over any probes: up the parents from `start`'s, until one has a live
/// record, the chain ends (no parent, or init) or comes back on itself, or
/// [`MAX_ANCESTORS`] have been looked at.
fn nearest<P: ProcessTable, F: RegistryFs>(
    discovery: &Discovery<P, F>,
    home: &ClaudeHome,
    start: Pid,
) -> Result<LiveSession, Error> {
    let (mut pid, mut seen) = (start, vec![start]);
    while seen.len() <= MAX_ANCESTORS {
        let Some(parent) = discovery.processes().parent(pid) else {
            break;
        };
        if seen.contains(&parent) {
            break;
        }
        let entry = discovery.entry(home, parent, Scope::Live)?;
        if let Some(live) = entry.and_then(|session| LiveSession::try_from(session).ok()) {
            return Ok(live);
        }
        seen.push(parent);
        pid = parent;
    }
    Err(not_in_a_session(home))
}

fn not_in_a_session(home: &ClaudeHome) -> Error {
    Error::NotInASession(home.root().to_path_buf())
}

#[cfg(test)]
mod tests {
    use claude_peer_registry::Pid;
    use claude_peer_resolve::Discovery;
    use claude_peer_testkit::fake::{FakeFile, FakeProcessTable, FakeRegistryFs, UID, home};

    use super::{MAX_ANCESTORS, nearest};
    use crate::error::Failure;

    fn pid(raw: u32) -> Pid {
        Pid::new(raw).unwrap()
    }

    /// A registry holding a record of `session` for the live `session_pid`.
    fn registry(session_pid: u32, session: &str) -> FakeRegistryFs {
        let body = format!(r#"{{"pid":{session_pid},"sessionId":"{session}","procStart":"7"}}"#);
        FakeRegistryFs::owned_by(UID)
            .with_file(&format!("{session_pid}.json"), FakeFile::regular(UID, body))
    }

    /// A chain `first` ← `first + 1` ← … of `len` live processes, each the parent of the
    /// one before.
    fn chain(first: u32, len: u32) -> FakeProcessTable {
        (first..first + len).fold(FakeProcessTable::new(UID, None), |table, p| {
            table.with_live(pid(p), "7").with_parent(pid(p), pid(p + 1))
        })
    }

    #[test]
    fn the_nearest_live_ancestor_is_the_session() {
        let discovery = Discovery::new(chain(100, 10), registry(105, "s-105"));
        let live = nearest(&discovery, &home(), pid(100)).unwrap();
        assert_eq!(
            (live.pid, live.record.session_id.as_str()),
            (pid(105), "s-105")
        );
    }

    #[test]
    fn the_walk_starts_at_the_parent_not_at_the_process_itself() {
        let discovery = Discovery::new(chain(100, 10), registry(100, "s-100"));
        let err = nearest(&discovery, &home(), pid(100)).unwrap_err();
        let failure = Failure::from(err);
        assert_eq!((failure.name, failure.exit as u8), ("not_in_a_session", 3));
    }

    #[test]
    fn a_cycle_ends_the_walk_and_so_does_the_bound() {
        let looped = chain(100, 3).with_parent(pid(102), pid(100));
        let discovery = Discovery::new(looped, registry(500, "s-500"));
        let err = nearest(&discovery, &home(), pid(100)).unwrap_err();
        assert_eq!(err.as_str(), "not_in_a_session");

        let bound = u32::try_from(MAX_ANCESTORS).unwrap();
        let within = Discovery::new(chain(100, 200), registry(100 + bound, "s-near"));
        assert!(nearest(&within, &home(), pid(100)).is_ok());
        let beyond = Discovery::new(chain(100, 200), registry(101 + bound, "s-far"));
        let err = nearest(&beyond, &home(), pid(100)).unwrap_err();
        assert_eq!(err.as_str(), "not_in_a_session");
    }
}
