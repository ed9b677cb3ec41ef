//! A Claude home in a temporary directory, for OS tests and the command's tests: its
//! registry, records written into it, and listening sockets that make sessions
//! addressable.
//!
//! The temporary directory is the home itself: `sessions/` (mode 0700) is its registry,
//! `settings.json` its user settings, `socks/<pid>.sock` the sockets made here. What a
//! test puts beside them (project directories, scripts) stays inside it too, so the
//! home's path redacts everything a test made.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use claude_peer_registry::ClaudeHome;

/// A Claude home in a temporary directory, removed when dropped; its sockets listen
/// until then.
#[derive(Debug)]
pub struct TempHome {
    // Dropped in this order: the sockets close before their directory goes.
    listeners: Vec<UnixListener>,
    claude: ClaudeHome,
    dir: tempfile::TempDir,
}

impl TempHome {
    /// A home with an empty registry, private to its owner as Claude Code makes it.
    pub fn new() -> io::Result<Self> {
        let home = Self::without_registry()?;
        let sessions = home.sessions();
        fs::create_dir_all(&sessions)?;
        fs::set_permissions(&sessions, fs::Permissions::from_mode(0o700))?;
        Ok(home)
    }

    /// A home with no registry at all, as before Claude Code first ran.
    pub fn without_registry() -> io::Result<Self> {
        let dir = tempfile::tempdir()?;
        Ok(Self {
            listeners: Vec::new(),
            claude: ClaudeHome::new(dir.path()),
            dir,
        })
    }

    /// The home's directory.
    #[must_use]
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// The home, as the library crates take it.
    #[must_use]
    pub fn claude(&self) -> &ClaudeHome {
        &self.claude
    }

    /// Its registry, `sessions/`.
    #[must_use]
    pub fn sessions(&self) -> PathBuf {
        self.claude.sessions_dir()
    }

    /// Where the record of `pid` is: `sessions/<pid>.json`.
    #[must_use]
    pub fn record_path(&self, pid: u32) -> PathBuf {
        self.sessions().join(format!("{pid}.json"))
    }

    /// Writes `body` as the record of `pid` in place (truncate, write, close, as Claude
    /// Code does); returns its path.
    pub fn write_record(&self, pid: u32, body: impl AsRef<[u8]>) -> io::Result<PathBuf> {
        let path = self.record_path(pid);
        fs::write(&path, body)?;
        Ok(path)
    }

    /// Writes `body` as the registry's entry `name`, whatever the name; returns its path.
    pub fn write_entry(&self, name: &str, body: impl AsRef<[u8]>) -> io::Result<PathBuf> {
        let path = self.sessions().join(name);
        fs::write(&path, body)?;
        Ok(path)
    }

    /// A messaging socket for `pid` at `socks/<pid>.sock`, listening until the home is
    /// dropped; asked again, the same one.
    pub fn socket(&mut self, pid: u32) -> io::Result<PathBuf> {
        let dir = self.root().join("socks");
        fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{pid}.sock"));
        if !path.exists() {
            self.listeners.push(UnixListener::bind(&path)?);
        }
        Ok(path)
    }
}
