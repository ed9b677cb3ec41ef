//! Finding sessions: scans with their warnings, the session `show` means, resolution.

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_resolve::{
    AddressableSession, Discovery, Entries, Entry, RefusalKind, Scope, Warning,
};
use claude_peer_transcript::Summary;

use crate::ops::{Context, Error, Warned};

/// Every session of `scope`, with the registry directory's warnings.
pub(crate) fn scan(ctx: &Context, scope: Scope) -> Warned<Result<Vec<Entry>, Error>> {
    match Discovery::os().scan(&ctx.home, scope) {
        Ok(scan) => Warned {
            value: Ok(scan.entries),
            warnings: scan.warnings,
        },
        Err(err) => Warned::quiet(Err(err.into())),
    }
}

/// Hands `each` every entry as it is judged, holding nothing, for a one-shot listing
/// (no pins: a pidfd per live process would be pure cost); the entries carry the
/// registry directory's warnings ([`Entries::warnings`]), known before the first.
pub(crate) fn list<T>(
    ctx: &Context,
    scope: Scope,
    each: impl FnOnce(Entries<'_, OsProcessTable, OsRegistryFs>) -> T,
) -> Result<T, Error> {
    let discovery = Discovery::new(OsProcessTable::with_pin_limit(0), OsRegistryFs);
    let entries = discovery.entries(&ctx.home, scope)?;
    Ok(each(entries))
}

/// The one live, addressable session `target` names now (its id, or else the name of
/// exactly one live session), or a refusal; with what is wrong with the registry
/// directory.
pub(crate) fn resolve(ctx: &Context, target: &str) -> Warned<Result<AddressableSession, Error>> {
    let discovery = Discovery::os();
    match discovery.roster(&ctx.home, Scope::Live) {
        Ok(roster) => Warned {
            value: roster.resolve(target).map_err(Error::from),
            warnings: roster.warnings().to_vec(),
        },
        Err(err) => Warned::quiet(Err(err.into())),
    }
}

/// The id of the one live, addressable session `target` names (its id, or else the name
/// of exactly one live session), for a front end whose sends go by id; the refusal the
/// send would give otherwise.
pub(crate) fn session_id(ctx: &Context, target: &str) -> Result<String, Error> {
    let session = Discovery::os().resolve_live_session(&ctx.home, target)?;
    Ok(session.record.session_id)
}

/// What is wrong with the registry directory (as `list` warns), for the commands that
/// read one session of it. A directory that cannot be read is left to the command,
/// which fails naming it.
pub(crate) fn registry_warnings(ctx: &Context) -> Vec<Warning> {
    Discovery::os()
        .registry_warnings(&ctx.home)
        .unwrap_or_default()
}

/// The session `show` means by `target`, by the rule every target follows
/// ([`claude_peer_resolve::Roster::shown`]): the live session its id or name names,
/// messageable or not, else the leftover record of that id. Naming no record is
/// [`Error::NotFound`].
pub(crate) fn find(ctx: &Context, target: &str) -> Warned<Result<Entry, Error>> {
    let discovery = Discovery::os();
    let roster = match discovery.roster(&ctx.home, Scope::All) {
        Ok(roster) => roster,
        Err(err) => {
            return Warned::quiet(Err(err.into()));
        }
    };
    let value = roster
        .shown(target)
        .map_err(|err| match err.refusal().map(|r| r.kind) {
            Some(RefusalKind::NotLive) => Error::NotFound(target.to_owned()),
            _ => err.into(),
        });
    Warned {
        value,
        warnings: roster.warnings().to_vec(),
    }
}

/// The end of `session`'s transcript (its last prompt, when it last wrote), when it has
/// one; a transcript that cannot be read is left out, and is the warning.
pub(crate) fn transcript(
    ctx: &Context,
    session: &Entry,
) -> Warned<Option<Summary>, claude_peer_transcript::Error> {
    let Some(record) = session.record.as_ref() else {
        return Warned::quiet(None);
    };
    match claude_peer_transcript::summary(&ctx.home, &record.session_id) {
        Ok(summary) => Warned::quiet(summary),
        Err(err) => Warned {
            value: None,
            warnings: vec![err],
        },
    }
}
