//! The crate's one error type.

use std::io;
use std::path::PathBuf;

use crate::State;

/// Why the store could not be opened or did not take a change. Each names the store's
/// file or the message; clients match on [`Error::as_str`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No `XDG_STATE_HOME` or `HOME` to put the store under.
    #[error("no place for the post office's store: set XDG_STATE_HOME or HOME")]
    NoPlace,
    /// The store's directory, or one on its way, is not this user's alone.
    #[error("the post office's store cannot be kept in `{}`: {source}", path.display())]
    Dir {
        /// The store's directory.
        path: PathBuf,
        /// Which directory on the way is wrong, and how.
        #[source]
        source: io::Error,
    },
    /// The file is not a store: not SQLite, another program's database, not a regular
    /// file of this user. It is left as it is.
    #[error("`{}` is not a claude-peers post office store ({why}); it was left untouched", path.display())]
    NotAStore {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        why: String,
    },
    /// The file is shorter than its own header says: cut off. It is left as it is.
    #[error(
        "the store `{}` is truncated: {len} bytes where its header says {expected}; it was left untouched",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The length its header gives.
        expected: u64,
    },
    /// The store was written by a newer claude-peers: refused, never rewritten.
    #[error(
        "the store `{}` has schema version {version}, newer than this claude-peers knows ({known}); it was left untouched: use the claude-peers that wrote it",
        path.display()
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its schema version.
        version: i64,
        /// The newest version this build knows.
        known: i64,
    },
    /// SQLite failed on the store (a full or read-only disk, a damaged file, …); the
    /// change was not made.
    #[error("the store `{}`: {source}", path.display())]
    Sqlite {
        /// The file.
        path: PathBuf,
        /// What SQLite said.
        #[source]
        source: rusqlite::Error,
    },
    /// The store's file could not be looked at or created.
    #[error("the store `{}`: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// The message cannot be posted as it is; nothing was stored.
    #[error("{0}; nothing was stored")]
    Invalid(String),
    /// Its text is one no send takes (empty, or above the bound), under the same name
    /// as `send` gives it; nothing was stored.
    #[error("{0}; nothing was stored")]
    Text(#[source] claude_peer_deliver::Error),
    /// The idempotency key was used before by the same sender for another message.
    #[error(
        "the key `{key}` of sender `{from}` is message {id}'s, which has another address or text; nothing was stored"
    )]
    KeyInUse {
        /// The key.
        key: String,
        /// The sender.
        from: String,
        /// The message that has it.
        id: String,
    },
    /// Another post office of this user runs: it holds the lock.
    #[error(
        "a post office runs already{} (it holds `{}`)",
        pid.map(|pid| format!(" as pid {pid}")).unwrap_or_default(),
        lock.display()
    )]
    Running {
        /// Its pid, as it wrote it in the lock.
        pid: Option<u32>,
        /// The lock file.
        lock: PathBuf,
    },
    /// The registry cannot be followed.
    #[error("cannot follow the registry: {0}")]
    Watch(claude_peer_watch::Error),
    /// A thread could not be started.
    #[error("cannot start a thread: {0}")]
    Thread(#[source] io::Error),
    /// The post office answered that the request failed: its error's name (one of
    /// [`Error::NAMES`], else `post_office_refused`) and words.
    #[error("{message}")]
    Answered {
        /// The error's stable name, as the post office gave it.
        error: &'static str,
        /// What went wrong.
        message: String,
    },
    /// No post office answers on the socket.
    #[error("no post office answers at `{}`: {source}", socket.display())]
    NotRunning {
        /// Its socket.
        socket: PathBuf,
        /// What connecting or talking said.
        #[source]
        source: io::Error,
    },
    /// The registry cannot be read, so no address can be resolved now.
    #[error(transparent)]
    Registry(claude_peer_resolve::Error),
    /// No message has this id.
    #[error("no message has the id `{0}`")]
    NoSuchMessage(String),
    /// The search text is not one the full-text index reads.
    #[error("`{query}` is not a search the log can run: {why}")]
    Search {
        /// The search text.
        query: String,
        /// What is wrong with it.
        why: String,
    },
    /// A line of a file to import cannot be taken: nothing was imported.
    #[error("line {line} of {file}: {why}; nothing was imported")]
    Import {
        /// The file, as the user named it.
        file: String,
        /// The line, from 1.
        line: u64,
        /// What is wrong with it.
        why: String,
    },
    /// The step does not apply to the message as it stands now.
    #[error("message {id} is {state}: it cannot {step} now")]
    NotNow {
        /// The message.
        id: String,
        /// Where it stands.
        state: State,
        /// The step asked for.
        step: &'static str,
    },
}

impl Error {
    /// Every stable name an error of this crate has.
    pub const NAMES: [&'static str; 20] = [
        "no_store_place",
        "store_dir_unsafe",
        "not_a_store",
        "store_truncated",
        "store_newer",
        "store_failed",
        "invalid_message",
        "empty_message",
        "message_too_large",
        "key_in_use",
        "post_office_running",
        "registry_unreadable",
        "watch_failed",
        "thread_failed",
        "post_office_refused",
        "post_office_not_running",
        "no_such_message",
        "not_now",
        "bad_search",
        "bad_import",
    ];

    /// A post office's failed answer as an error, under its own name when it is one of
    /// [`Error::NAMES`].
    #[must_use]
    pub fn answered(error: &str, message: String) -> Self {
        let error = Self::NAMES
            .into_iter()
            .find(|name| *name == error)
            .unwrap_or("post_office_refused");
        Self::Answered { error, message }
    }

    /// The stable machine name of this error.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::NoPlace => "no_store_place",
            Self::Dir { .. } => "store_dir_unsafe",
            Self::NotAStore { .. } => "not_a_store",
            Self::Truncated { .. } => "store_truncated",
            Self::Newer { .. } => "store_newer",
            Self::Sqlite { .. } | Self::Io { .. } => "store_failed",
            Self::Invalid(_) => "invalid_message",
            Self::Text(err) => err.as_str(),
            Self::KeyInUse { .. } => "key_in_use",
            Self::Running { .. } => "post_office_running",
            Self::Registry(_) => "registry_unreadable",
            Self::Watch(_) => "watch_failed",
            Self::Thread(_) => "thread_failed",
            Self::Answered { error, .. } => error,
            Self::NotRunning { .. } => "post_office_not_running",
            Self::NoSuchMessage(_) => "no_such_message",
            Self::NotNow { .. } => "not_now",
            Self::Search { .. } => "bad_search",
            Self::Import { .. } => "bad_import",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answered_error_keeps_its_name_when_it_is_one_of_ours() {
        let ours = [
            Error::NoPlace,
            Error::Invalid("x".into()),
            Error::Text(claude_peer_deliver::Error::EmptyMessage),
            Error::NoSuchMessage("x".into()),
            Error::Thread(io::Error::other("x")),
            Error::NotNow {
                id: "x".into(),
                state: State::Waiting,
                step: "send",
            },
        ];
        for err in ours {
            let again = Error::answered(err.as_str(), err.to_string());
            assert_eq!(again.as_str(), err.as_str());
            assert_eq!(again.to_string(), err.to_string());
        }
        let unknown = Error::answered("from_a_newer_post_office", "words".into());
        assert_eq!(unknown.as_str(), "post_office_refused");
    }
}
