//! Integration tests of the transcript follower on real files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod find;
mod follow;
mod summary;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use claude_peer_registry::ClaudeHome;
use claude_peer_transcript::Fact;
use tempfile::TempDir;

/// The session every test follows (the id of the real sample's receiver).
pub(crate) const SESSION: &str = "af4c64f8-b0e2-4e2b-95a9-0d7c5bfd95cd";
/// The directory Claude Code made for the sample's cwd.
pub(crate) const CWD_DIR: &str = "-tmp--tmpKSSGPb-project";

/// A Claude home of its own in a temporary directory.
pub(crate) struct Home {
    _dir: TempDir,
    pub(crate) home: ClaudeHome,
}

impl Home {
    /// A home that exists, without `projects/`.
    pub(crate) fn empty() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let home = ClaudeHome::new(dir.path().join(".claude"));
        fs::create_dir(home.root()).unwrap();
        Self { _dir: dir, home }
    }

    /// A home whose `projects/` holds a project directory (and another project's).
    pub(crate) fn with_project() -> Self {
        let home = Self::empty();
        fs::create_dir_all(home.home.projects_dir().join(CWD_DIR)).unwrap();
        fs::create_dir_all(home.home.projects_dir().join("-elsewhere")).unwrap();
        home
    }

    /// Where the session's transcript goes.
    pub(crate) fn transcript(&self) -> PathBuf {
        self.home
            .projects_dir()
            .join(CWD_DIR)
            .join(format!("{SESSION}.jsonl"))
    }
}

/// A fixture's text: lines taken from real Claude Code 2.1.332 transcripts.
pub(crate) fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name);
    fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// Appends `bytes` to `path`, creating it.
pub(crate) fn append(path: &Path, bytes: &[u8]) {
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    file.write_all(bytes).unwrap();
}

/// What the accepted sample says.
pub(crate) fn accept_facts() -> Vec<Fact> {
    vec![
        Fact::Queued {
            from: "uds:/tmp/cc-socks/22051.sock".to_owned(),
            from_name: Some("claude-peers".to_owned()),
            text: "hello accept".to_owned(),
        },
        Fact::Read {
            msg_id: "ab3549f6-d230-4229-a93a-2da29952f856".to_owned(),
            from: Some("uds:/tmp/cc-socks/22051.sock".to_owned()),
        },
    ]
}

/// What the held sample says.
pub(crate) fn hold_facts() -> Vec<Fact> {
    vec![Fact::Held {
        from: "uds:/tmp/cc-socks/22166.sock".to_owned(),
        preview: "hello hold".to_owned(),
    }]
}
