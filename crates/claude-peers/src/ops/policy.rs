//! The inbound policy a session in a directory gets, as far as files show.

use std::path::PathBuf;

use claude_peer_settings::{EffectivePolicy, effective_policy};

use crate::error::Failure;
use crate::ops::Context;

/// The effective `crossSessionInbound` for a session in `cwd` [default: the current
/// directory], with every layer read.
pub(crate) fn effective(ctx: &Context, cwd: Option<PathBuf>) -> Result<EffectivePolicy, Failure> {
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().map_err(|err| {
            Failure::error(
                "no_cwd",
                format!("cannot read the current directory: {err}"),
            )
        })?,
    };
    Ok(effective_policy(
        &ctx.home.user_settings(),
        &ctx.managed_settings,
        &cwd,
    ))
}
