use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A Claude home: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
///
/// Only paths: the caller reads the environment and this type never touches the
/// file system, so the same value names a home in a test's temporary directory.
///
/// ```
/// use claude_peer_registry::ClaudeHome;
///
/// let home = ClaudeHome::from_env_values(None, Some("/home/ada".into())).unwrap();
/// assert_eq!(home.sessions_dir(), std::path::Path::new("/home/ada/.claude/sessions"));
/// let same = ClaudeHome::from_projects_dir("/home/ada/.claude/projects".as_ref()).unwrap();
/// assert_eq!(same, home);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClaudeHome {
    root: PathBuf,
}

impl ClaudeHome {
    /// A home at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The home Claude Code itself would use, from the values of `CLAUDE_CONFIG_DIR`
    /// and `HOME` as the caller read them. Empty values count as unset.
    #[must_use]
    pub fn from_env_values(
        claude_config_dir: Option<OsString>,
        home: Option<OsString>,
    ) -> Option<Self> {
        let non_empty = |value: Option<OsString>| value.filter(|v| !v.is_empty());
        non_empty(claude_config_dir)
            .map(Self::new)
            .or_else(|| non_empty(home).map(|home| Self::new(Path::new(&home).join(".claude"))))
    }

    /// The home whose `projects` directory is `projects` (the path harnesses often hold).
    /// `None` unless the path's last component is `projects`.
    #[must_use]
    pub fn from_projects_dir(projects: &Path) -> Option<Self> {
        let trimmed: PathBuf = projects.components().collect();
        if trimmed.file_name()? != "projects" {
            return None;
        }
        trimmed.parent().map(Self::new)
    }

    /// The home directory itself.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The live-session registry, `<home>/sessions`.
    #[must_use]
    pub fn sessions_dir(&self) -> PathBuf {
        self.root.join("sessions")
    }

    /// The user settings file, `<home>/settings.json`.
    #[must_use]
    pub fn user_settings(&self) -> PathBuf {
        self.root.join("settings.json")
    }

    /// Transcripts, `<home>/projects`.
    #[must_use]
    pub fn projects_dir(&self) -> PathBuf {
        self.root.join("projects")
    }
}
