//! Which session a target names: the one rule for `show`, `send`, a broadcast, `doctor`,
//! the mailbox and MCP, applied to one look at the registry (a [`Roster`]).
//!
//! A single target is a session id, or else the name of exactly one live session.
//! Claude Code's session ids are UUIDs, but names are free text (one may look like a
//! UUID), so the rule never guesses from the shape: it looks for both, and text that is
//! the id of one live session and the name of another is refused as
//! `identity_mismatch`, never taken as either.

use std::cell::OnceCell;
use std::path::{Path, PathBuf};

use claude_peer_probe::{ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;

use crate::resolve::{addressable_or_refused, describe};
use crate::{
    AddressableSession, Discovery, Entry, Error, LiveSession, RefusalKind, Scope, Warning,
};

/// Whom a user named.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A session id, or else the name of exactly one live session, as given.
    Session(String),
    /// Every live session whose working directory is this one or below it.
    Cwd(PathBuf),
    /// Every live session.
    AllLive,
}

/// The registry as one scan found it, against which any number of targets resolve:
/// a broadcast to many reads the registry once. Made by [`Discovery::roster`].
///
/// Explaining a target that is not live needs every record, dead ones too: a roster of
/// a full scan has them, a live one reads them once, when first needed.
#[derive(Debug)]
pub struct Roster<'d, P, F> {
    discovery: &'d Discovery<P, F>,
    home: ClaudeHome,
    /// The live sessions, by pid.
    live: Vec<LiveSession>,
    /// Every entry, by pid; `None` when they could not be read.
    all: OnceCell<Option<Vec<Entry>>>,
    warnings: Vec<Warning>,
}

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// Reads the registry once, as [`Discovery::scan`] does for `scope`, to resolve
    /// targets against: `Scope::Live` to send, `Scope::All` to also find the leftover
    /// records [`Roster::shown`] shows.
    pub fn roster(&self, home: &ClaudeHome, scope: Scope) -> Result<Roster<'_, P, F>, Error> {
        let scan = self.scan(home, scope)?;
        let live = scan
            .entries
            .iter()
            .filter(|s| s.is_live())
            .filter_map(|s| LiveSession::try_from(s.clone()).ok())
            .collect();
        let all = OnceCell::new();
        if scope == Scope::All {
            let _ = all.set(Some(scan.entries));
        }
        Ok(Roster {
            discovery: self,
            home: home.clone(),
            live,
            all,
            warnings: scan.warnings,
        })
    }
}

impl<P: ProcessTable, F: RegistryFs> Roster<'_, P, F> {
    /// What is wrong with the registry directory itself, as the scan found it.
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }

    /// The one live, addressable session `given` names: its id, or else the name of
    /// exactly one live session. Refuses with `not_live` when it names none,
    /// `identity_mismatch` when it could name more than one (two live processes claim
    /// the id, two live sessions have the name, it is the id of one and the name of
    /// another, or the session's name is also held by another live session, so a
    /// message by name could reach the wrong reader), and `not_addressable` when the
    /// session is live but cannot be messaged.
    pub fn resolve(&self, given: &str) -> Result<AddressableSession, Error> {
        let Some(session) = self.named(given)? else {
            return Err(Error::refused(
                RefusalKind::NotLive,
                self.why_not_live(given),
            ));
        };
        if let Some(name) = session.record.name.as_deref() {
            let others: Vec<_> = self
                .live
                .iter()
                .filter(|s| s.pid != session.pid && name_of(s) == Some(name))
                .collect();
            if !others.is_empty() {
                return Err(Error::refused(
                    RefusalKind::IdentityMismatch,
                    format!(
                        "its name `{name}` is also held by {}; a message by name could reach the wrong session",
                        describe(&others)
                    ),
                ));
            }
        }
        addressable_or_refused(session.clone())
    }

    /// The one live, addressable session whose working directory is `dir` itself (not
    /// one below it): `not_live` when none works there, `identity_mismatch` when several
    /// do, `not_addressable` as [`Roster::resolve`].
    pub fn resolve_cwd(&self, dir: &Path) -> Result<AddressableSession, Error> {
        let there: Vec<&LiveSession> = self
            .live
            .iter()
            .filter(|s| {
                s.record
                    .cwd
                    .as_deref()
                    .is_some_and(|cwd| Path::new(cwd) == dir)
            })
            .collect();
        match there.as_slice() {
            [] => Err(Error::refused(
                RefusalKind::NotLive,
                format!("no live session works in `{}`", dir.display()),
            )),
            [session] => addressable_or_refused((*session).clone()),
            several => Err(Error::refused(
                RefusalKind::IdentityMismatch,
                format!(
                    "{} live sessions work in `{}`: {}",
                    several.len(),
                    dir.display(),
                    describe(several)
                ),
            )),
        }
    }

    /// The session `show` displays for `given`, by the same rule as
    /// [`Roster::resolve`]: the live session it names, messageable or not; else, for a
    /// session id that no live process runs, its leftover record. The refusals are
    /// [`Roster::resolve`]'s, for text that names no record or more than one session.
    pub fn shown(&self, given: &str) -> Result<Entry, Error> {
        if let Some(session) = self.named(given)? {
            return Ok(session.clone().into());
        }
        let leftover = self.all().and_then(|all| {
            all.iter()
                .find(|s| s.record.as_ref().is_some_and(|r| r.session_id == given))
        });
        match leftover {
            Some(session) => Ok(session.clone()),
            None => Err(Error::refused(
                RefusalKind::NotLive,
                self.why_not_live(given),
            )),
        }
    }

    /// The live sessions `target` names, by pid: the one a session target resolves to
    /// (or its refusal), or every live session a selector chooses, messageable or not
    /// (each send refuses the ones that cannot be messaged).
    pub fn select(&self, target: &Target) -> Result<Vec<LiveSession>, Error> {
        let under = |dir: &Path, session: &LiveSession| {
            session
                .record
                .cwd
                .as_deref()
                .is_some_and(|cwd| Path::new(cwd).starts_with(dir))
        };
        Ok(match target {
            Target::Session(given) => vec![self.resolve(given)?.into()],
            Target::Cwd(dir) => self
                .live
                .iter()
                .filter(|s| under(dir, s))
                .cloned()
                .collect(),
            Target::AllLive => self.live.clone(),
        })
    }

    /// The live session `given` names, before any check of its name or socket; `None`
    /// when it names none; a refusal when it could name more than one.
    fn named(&self, given: &str) -> Result<Option<&LiveSession>, Error> {
        let by_id: Vec<&LiveSession> = self
            .live
            .iter()
            .filter(|s| s.record.session_id == given)
            .collect();
        let by_name: Vec<&LiveSession> = self
            .live
            .iter()
            .filter(|s| s.record.session_id != given && name_of(s) == Some(given))
            .collect();
        let mismatch = |message| Err(Error::refused(RefusalKind::IdentityMismatch, message));
        match (by_id.as_slice(), by_name.as_slice()) {
            ([], []) => Ok(None),
            ([session], []) | ([], [session]) => Ok(Some(session)),
            ([_, _, ..], _) => mismatch(format!(
                "session {given} is claimed by {} live processes: {}",
                by_id.len(),
                describe(&by_id)
            )),
            ([session], named) => mismatch(format!(
                "`{given}` is the id of pid {} and the name of {}; name the session by a unique name or id",
                session.pid,
                describe(named)
            )),
            ([], several) => mismatch(format!(
                "{} live sessions are named `{given}`: {}",
                several.len(),
                describe(several)
            )),
        }
    }

    /// Every entry of the registry: the scan's own, or one full scan taken when first
    /// needed; `None` when that scan failed.
    fn all(&self) -> Option<&[Entry]> {
        self.all
            .get_or_init(|| {
                self.discovery
                    .scan(&self.home, Scope::All)
                    .ok()
                    .map(|scan| scan.entries)
            })
            .as_deref()
    }

    /// Explains a `not_live` refusal from everything the registry holds about the id.
    fn why_not_live(&self, session_id: &str) -> String {
        let Some(all) = self.all() else {
            return format!("no live process runs session {session_id}");
        };
        crate::resolve::why_not_live(all, session_id)
    }
}

fn name_of(session: &LiveSession) -> Option<&str> {
    session.record.name.as_deref()
}
