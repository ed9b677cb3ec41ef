//! Why a host did not answer, each naming the host.

use std::path::PathBuf;

/// What can go wrong on the way to another machine.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A `--host` (or hosts-file line) that is no destination ssh could only read as one.
    #[error("`{host}` is not a host: {why}")]
    BadHost { host: String, why: &'static str },
    /// The hosts file cannot be used.
    #[error("the hosts file `{}` {why}", path.display())]
    HostsFile { path: PathBuf, why: String },
    /// `ssh` itself cannot be started.
    #[error("cannot run `{program}` to reach {host}: {source}")]
    NoSsh {
        host: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
    /// ssh could not connect or log in (down, refused, key refused, timed out): what ssh
    /// said.
    #[error("{host} is unreachable: {message}")]
    Unreachable { host: String, message: String },
    /// The remote has no `claude-peers` where it was looked for.
    #[error(
        "{host} has no `{bin}` on its PATH (install claude-peers there, or pass --remote-bin PATH)"
    )]
    NotInstalled { host: String, bin: String },
    /// The remote `claude-peers` does not speak this one's protocol.
    #[error("{host} runs an incompatible claude-peers: {message}")]
    Incompatible { host: String, message: String },
    /// The remote answered what is no answer of `claude-peers --json`.
    #[error("{host} answered no claude-peers JSON (exit {exit}): {message}")]
    BadAnswer {
        host: String,
        exit: i32,
        message: String,
    },
}

impl Error {
    /// The stable machine name.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::BadHost { .. } => "bad_host",
            Self::HostsFile { .. } => "hosts_file_invalid",
            Self::NoSsh { .. } => "ssh_not_found",
            Self::Unreachable { .. } => "host_unreachable",
            Self::NotInstalled { .. } => "remote_not_installed",
            Self::Incompatible { .. } => "remote_incompatible",
            Self::BadAnswer { .. } => "remote_bad_answer",
        }
    }

    /// The host it is about, when it is about one.
    #[must_use]
    pub fn host(&self) -> Option<&str> {
        match self {
            Self::BadHost { host, .. }
            | Self::NoSsh { host, .. }
            | Self::Unreachable { host, .. }
            | Self::NotInstalled { host, .. }
            | Self::Incompatible { host, .. }
            | Self::BadAnswer { host, .. } => Some(host),
            Self::HostsFile { .. } => None,
        }
    }
}
