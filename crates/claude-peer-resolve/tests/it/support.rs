//! Shared helpers: fixture paths and fake registries.

use std::path::PathBuf;

use claude_peer_registry::{ClaudeHome, Pid};

pub(crate) const FIXTURE_DOMAIN: &str = "linux:3d1219c7c4c5404aaa1f6d2a48adfda4:pid:[4026531836]";
pub(crate) const UID: u32 = 1000;

/// The repo's copy of the real records.
pub(crate) fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/claude-code-real")
}

/// A home whose paths fakes never look at beyond the file name.
pub(crate) fn fake_home() -> ClaudeHome {
    ClaudeHome::new("/nonexistent/claude-home")
}

pub(crate) fn pid(raw: u32) -> Pid {
    Pid::new(raw).unwrap()
}
