//! What the subcommands share: the Claude home, the scan, the session `show` means, and
//! the Claude Code sender.

use std::path::{Path, PathBuf};
use std::time::Duration;

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{Discovery, RefusalKind, Scan, Scope, Session};
use claude_peer_sender::ClaudeRelay;

use crate::error::Failure;
use crate::output::Output;

/// The first argument that runs the Claude sender's hooks (see [`claude_relay`]).
pub(crate) const HOOK: &str = "hook";

pub(crate) type Os = Discovery<OsProcessTable, OsRegistryFs>;

/// The Claude home: `--home`, else `CLAUDE_CONFIG_DIR`, else `~/.claude`.
pub(crate) fn home(flag: Option<PathBuf>) -> Result<ClaudeHome, Failure> {
    flag.map(ClaudeHome::new)
        .or_else(|| {
            ClaudeHome::from_env_values(
                std::env::var_os("CLAUDE_CONFIG_DIR"),
                std::env::var_os("HOME"),
            )
        })
        .ok_or_else(|| {
            Failure::error(
                "no_home",
                "no Claude home: pass --home, or set CLAUDE_CONFIG_DIR or HOME",
            )
        })
}

/// Scans and reports the registry directory's warnings on stderr.
pub(crate) fn scan(
    discovery: &Os,
    home: &ClaudeHome,
    scope: Scope,
    out: &Output,
) -> Result<Scan, Failure> {
    let scan = discovery.scan(home, scope)?;
    for warning in &scan.warnings {
        out.warn(&warning.to_string());
    }
    Ok(scan)
}

/// The session `show` means by `target`: a session id (its live record over leftovers,
/// which `show` displays too), else the name of exactly one live session, as
/// [`Discovery::resolve_by_name`] finds it.
pub(crate) fn find_session(
    home: &ClaudeHome,
    target: &str,
    out: &Output,
) -> Result<Session, Failure> {
    let discovery = Discovery::os();
    let scan = scan(&discovery, home, Scope::All, out)?;
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
    let err = match discovery.resolve_by_name(home, target) {
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

/// The Claude sender of `send` and `mailbox`: the Claude Code found by
/// [`find_claude`], with this program as its hook.
pub(crate) fn claude_relay(
    claude: Option<PathBuf>,
    from: String,
    timeout: Duration,
) -> Result<ClaudeRelay, Failure> {
    let claude = find_claude(claude)?;
    let hook = std::env::current_exe().map_err(|err| {
        Failure::error(
            "no_hook_program",
            format!("cannot find this program to run as the sender's hook: {err}"),
        )
    })?;
    Ok(ClaudeRelay::new(claude, vec![hook.into(), HOOK.into()])
        .from(from)
        .timeout(timeout))
}

/// The Claude Code to send with: `--claude`, else `claude` on `PATH`.
fn find_claude(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    if let Some(path) = flag {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Failure::error(
                "claude_not_found",
                format!(
                    "no Claude Code at `{}` (--claude); nothing was sent",
                    path.display()
                ),
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("claude"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            Failure::error(
                "claude_not_found",
                "no Claude Code to send with: --claude was not given and no `claude` is on PATH; nothing was sent",
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}
