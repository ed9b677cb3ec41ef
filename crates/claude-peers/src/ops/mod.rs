//! The operations: what each subcommand and each MCP tool does, written once.
//!
//! A subcommand (`cmd/`) parses its arguments, calls an operation and renders the result;
//! an MCP tool (`cmd/mcp`) calls the same operation and answers with the same JSON
//! shape (`json/`), so the two front ends cannot drift. An operation prints nothing:
//! it returns plain values (with the warnings met on the way, [`Warned`]) or its typed
//! [`Error`], and the front end says them.

pub(crate) mod broadcast;
pub(crate) mod doctor;
mod error;
pub(crate) mod history;
pub(crate) mod policy;
pub(crate) mod post;
pub(crate) mod remote;
pub(crate) mod send;
pub(crate) mod sessions;
pub(crate) mod settings;
pub(crate) mod whoami;

use std::path::PathBuf;

use claude_peer_deliver::Courier;
use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::Warning;
use claude_peer_settings::MANAGED_SETTINGS_PATH;

pub(crate) use error::Error;

/// A value and what was wrong on the way to it without stopping it (by default, the
/// registry directory's warnings), for the front end to say (on stderr) whatever the
/// value is: a refusal too.
#[derive(Debug)]
pub(crate) struct Warned<T, W = Warning> {
    pub(crate) value: T,
    pub(crate) warnings: Vec<W>,
}

impl<T, W> Warned<T, W> {
    /// `value`, with nothing to warn of.
    pub(crate) const fn quiet(value: T) -> Self {
        Self {
            value,
            warnings: Vec::new(),
        }
    }
}

/// What the operations of one invocation share: whose sessions, under which managed
/// settings.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    pub(crate) home: ClaudeHome,
    /// The managed settings file (`--managed-settings`), the top layer of every policy.
    pub(crate) managed_settings: PathBuf,
}

impl Context {
    /// The Claude home `--home`, else `CLAUDE_CONFIG_DIR`, else `~/.claude`, with the
    /// system's managed settings. Made absolute here, once: the sender and its hooks run
    /// in other directories.
    pub(crate) fn new(home: Option<PathBuf>) -> Result<Self, Error> {
        let home = home
            .map(ClaudeHome::new)
            .or_else(|| {
                ClaudeHome::from_env_values(
                    std::env::var_os("CLAUDE_CONFIG_DIR"),
                    std::env::var_os("HOME"),
                )
            })
            .ok_or(Error::NoHome)?;
        Ok(Self {
            home: ClaudeHome::new(absolute(home.root().to_path_buf())),
            managed_settings: PathBuf::from(MANAGED_SETTINGS_PATH),
        })
    }

    /// The same, reading managed settings at `path`.
    pub(crate) fn with_managed_settings(self, path: PathBuf) -> Self {
        Self {
            managed_settings: absolute(path),
            ..self
        }
    }

    /// The delivery gate every send goes through: built here and nowhere else.
    pub(crate) fn courier(&self) -> Courier {
        Courier::os().with_managed_settings(&self.managed_settings)
    }
}

/// `path` made absolute against the working directory, as given otherwise (an absolute
/// path, or a working directory that cannot be read: then it fails where it is used).
pub(crate) fn absolute(path: PathBuf) -> PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}
