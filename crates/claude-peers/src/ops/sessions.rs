//! Finding sessions: scans with their warnings, the session `show` means, resolution.

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_resolve::{
    AddressableSession, Discovery, Entries, RefusalKind, Scan, Scope, Session, Warning,
};

use claude_peer_transcript::Summary;

use crate::error::Failure;
use crate::ops::Context;
use crate::output::Output;

/// Scans, reporting the registry directory's warnings on stderr.
pub(crate) fn scan(ctx: &Context, scope: Scope, out: &Output) -> Result<Scan, Failure> {
    let scan = Discovery::os().scan(&ctx.home, scope)?;
    warn(&scan.warnings, out);
    Ok(scan)
}

/// Reports the registry directory's warnings on stderr.
fn warn(warnings: &[Warning], out: &Output) {
    for warning in warnings {
        out.warn(&warning.to_string());
    }
}

/// Hands `each` every entry as it is judged, holding nothing, for a one-shot listing
/// (no pins: a pidfd per live process would be pure cost); the warnings go to stderr
/// first.
pub(crate) fn list<T>(
    ctx: &Context,
    scope: Scope,
    out: &Output,
    each: impl FnOnce(Entries<'_, OsProcessTable, OsRegistryFs>) -> T,
) -> Result<T, Failure> {
    let discovery = Discovery::new(OsProcessTable::with_pin_limit(0), OsRegistryFs);
    let entries = discovery.entries(&ctx.home, scope)?;
    for warning in entries.warnings() {
        out.warn(&warning.to_string());
    }
    Ok(each(entries))
}

/// The one live, addressable session `target` names now (its id, or else the name of
/// exactly one live session), or a refusal; what is wrong with the registry directory
/// goes to stderr first.
pub(crate) fn resolve(
    ctx: &Context,
    target: &str,
    out: &Output,
) -> Result<AddressableSession, Failure> {
    let discovery = Discovery::os();
    let roster = discovery.roster(&ctx.home, Scope::Live)?;
    warn(roster.warnings(), out);
    Ok(roster.resolve(target)?)
}

/// The id of the one live, addressable session `target` names (its id, or else the name
/// of exactly one live session), for a front end whose sends go by id; the refusal the
/// send would give otherwise.
pub(crate) fn session_id(ctx: &Context, target: &str) -> Result<String, Failure> {
    let session = Discovery::os().resolve_live_session(&ctx.home, target)?;
    Ok(session.record.session_id)
}

/// Warns on stderr of what is wrong with the registry directory (as `list` does), for
/// the commands that read one session of it. A directory that cannot be read is left
/// to the command, which fails naming it.
pub(crate) fn warn_registry(ctx: &Context, out: &Output) {
    for warning in Discovery::os()
        .registry_warnings(&ctx.home)
        .unwrap_or_default()
    {
        out.warn(&warning.to_string());
    }
}

/// The session `show` means by `target`, by the rule every target follows
/// ([`claude_peer_resolve::Roster::shown`]): the live session its id or name names, messageable or not, else
/// the leftover record of that id. Naming no record is `not_found`.
pub(crate) fn find(ctx: &Context, target: &str, out: &Output) -> Result<Session, Failure> {
    let discovery = Discovery::os();
    let roster = discovery.roster(&ctx.home, Scope::All)?;
    warn(roster.warnings(), out);
    roster
        .shown(target)
        .map_err(|err| match err.refusal().map(|r| r.kind) {
            Some(RefusalKind::NotLive) => Failure::error(
                "not_found",
                format!(
                    "no record has session id `{target}` and no live session is named `{target}`"
                ),
            ),
            _ => err.into(),
        })
}

/// The end of `session`'s transcript (its last prompt, when it last wrote), when it has
/// one; a transcript that cannot be read is left out with a warning on stderr.
pub(crate) fn transcript(ctx: &Context, session: &Session, out: &Output) -> Option<Summary> {
    let session_id = &session.record.as_ref()?.session_id;
    match claude_peer_transcript::summary(&ctx.home, session_id) {
        Ok(summary) => summary,
        Err(err) => {
            out.warn(&err.to_string());
            None
        }
    }
}
