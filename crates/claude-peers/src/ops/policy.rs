//! The inbound policy a session in a directory gets, as far as files show.

use std::path::PathBuf;

use claude_peer_settings::{EffectivePolicy, effective_policy};

use crate::ops::{Context, Error};

/// The effective `crossSessionInbound` for a session in `cwd` [default: the current
/// directory], with every layer read.
pub(crate) fn effective(ctx: &Context, cwd: Option<PathBuf>) -> Result<EffectivePolicy, Error> {
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(Error::NoCwd)?,
    };
    Ok(effective_policy(
        &ctx.home.user_settings(),
        &ctx.managed_settings,
        &cwd,
    ))
}
