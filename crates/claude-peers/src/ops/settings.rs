//! The user's `crossSessionInbound`: read, set, reset, each a compare-and-swap when a
//! revision is expected.

use claude_peer_settings::{InboundPolicy, Revision, SettingsStore, Snapshot};

use crate::ops::{Context, Error};

/// What to do with the setting.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change {
    Set(InboundPolicy),
    Reset,
}

fn store(ctx: &Context) -> SettingsStore {
    SettingsStore::new(ctx.home.user_settings())
}

/// The setting as the file holds it now.
pub(crate) fn read(ctx: &Context) -> Result<Snapshot, Error> {
    Ok(store(ctx).read()?)
}

/// Sets or resets it; with `expect_revision`, only if the file still has that revision.
pub(crate) fn change(
    ctx: &Context,
    change: Change,
    expect_revision: Option<&str>,
) -> Result<Snapshot, Error> {
    let expected = expect_revision
        .map(str::parse::<Revision>)
        .transpose()
        .map_err(claude_peer_settings::Error::from)?;
    let store = store(ctx);
    Ok(match change {
        Change::Set(policy) => store.set_inbound(policy, expected.as_ref())?,
        Change::Reset => store.reset_inbound(expected.as_ref())?,
    })
}
