//! The records real Claude Code sessions wrote, kept in the repository's
//! `fixtures/claude-code-real/`: a folder for each situation, each holding the registry
//! (`sessions/`) as it was and, where captured, what Claude Code listed.

/// The folder of the captured situations.
pub const REAL_RECORDS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/claude-code-real"
);

/// The pid domain of the machine they were captured on, as the records say it.
pub const REAL_PID_DOMAIN: &str = "linux:3d1219c7c4c5404aaa1f6d2a48adfda4:pid:[4026531836]";
