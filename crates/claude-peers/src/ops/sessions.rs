//! Finding sessions: scans with their warnings, the session `show` means, resolution.

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_resolve::{
    AddressableSession, Discovery, Entries, RefusalKind, Scan, Scope, Session,
};

use claude_peer_transcript::Summary;

use crate::error::Failure;
use crate::ops::Context;
use crate::output::Output;

/// Scans, reporting the registry directory's warnings on stderr.
pub(crate) fn scan(ctx: &Context, scope: Scope, out: &Output) -> Result<Scan, Failure> {
    let scan = Discovery::os().scan(&ctx.home, scope)?;
    for warning in &scan.warnings {
        out.warn(&warning.to_string());
    }
    Ok(scan)
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

/// The one live, addressable session `session_id` names now, or a refusal; what is
/// wrong with the registry directory goes to stderr first.
pub(crate) fn resolve(
    ctx: &Context,
    session_id: &str,
    out: &Output,
) -> Result<AddressableSession, Failure> {
    warn_registry(ctx, out);
    Ok(Discovery::os().resolve_live_session(&ctx.home, session_id)?)
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

/// The session `show` means by `target`: a session id (its live record over leftovers,
/// which `show` displays too), else the name of exactly one live session, as
/// [`Discovery::resolve_by_name`] finds it.
pub(crate) fn find(ctx: &Context, target: &str, out: &Output) -> Result<Session, Failure> {
    let scan = scan(ctx, Scope::All, out)?;
    let by_id = |s: &&Session| s.record.as_ref().is_some_and(|r| r.session_id == target);
    // A session id names one conversation; prefer its live record over leftovers.
    let found = scan
        .sessions
        .iter()
        .filter(by_id)
        .find(|s| s.is_live())
        .or_else(|| scan.sessions.iter().find(by_id));
    if let Some(session) = found {
        return Ok(session.clone());
    }
    let not_found = || {
        Failure::error(
            "not_found",
            format!("no record has session id `{target}` and no live session is named `{target}`"),
        )
    };
    let err = match Discovery::os().resolve_by_name(&ctx.home, target) {
        Ok(session) => return Ok(session.into()),
        Err(err) => err,
    };
    match err.refusal().map(|r| r.kind) {
        Some(RefusalKind::NotLive) => Err(not_found()),
        // The one live session of that name cannot be messaged: `show` still shows it,
        // and why.
        Some(RefusalKind::NotAddressable) => scan
            .sessions
            .into_iter()
            .find(|s| {
                s.is_live() && s.record.as_ref().and_then(|r| r.name.as_deref()) == Some(target)
            })
            .ok_or_else(not_found),
        _ => Err(err.into()),
    }
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
