//! The user's settings for claude-peers itself: `$XDG_CONFIG_HOME/claude-peers/config.toml`
//! (else `~/.config/claude-peers/config.toml`). Optional; a flag given on the command line
//! wins over it. It exists so that every post office of the user, the one `serve` starts
//! and the one a `send` starts on demand, keeps the same history.
//!
//! ```toml
//! [history]
//! keep = 1000000   # messages at most
//! keep_for = "90d" # and none older (s, m, h or d)
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use claude_peer_post::Retention;
use serde::Deserialize;

use crate::args;

/// Longer is no configuration file anyone writes by hand.
const MAX_CONFIG_BYTES: u64 = 64 * 1024;

/// What the file sets; what it leaves out, the flags or the defaults decide.
#[derive(Debug, Default)]
pub(crate) struct Config {
    keep: Option<u64>,
    keep_for: Option<Duration>,
}

/// The file as written: every key optional, an unknown one an error (a typo must not
/// silently keep the default).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    history: History,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct History {
    keep: Option<u64>,
    keep_for: Option<String>,
}

/// Why the file cannot be used: its path and the reason, which for a syntax error names
/// the line and column.
#[derive(Debug, thiserror::Error)]
#[error("the configuration file `{}` {reason}", path.display())]
pub(crate) struct Error {
    pub(crate) path: PathBuf,
    reason: String,
}

impl Config {
    /// The user's file, or the defaults when there is none.
    pub(crate) fn load() -> Result<Self, Error> {
        match default_path() {
            Some(path) => Self::read(&path),
            None => Ok(Self::default()),
        }
    }

    /// The file at `path`, or the defaults when it does not exist.
    pub(crate) fn read(path: &Path) -> Result<Self, Error> {
        let fail = |reason: String| Error {
            path: path.to_owned(),
            reason,
        };
        let file = match std::fs::File::open(path) {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(err) => return Err(fail(format!("cannot be read: {err}"))),
        };
        let mut bytes = Vec::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|err| fail(format!("cannot be read: {err}")))?;
        if bytes.len() as u64 > MAX_CONFIG_BYTES {
            return Err(fail(format!(
                "is above {} KiB: not a configuration file",
                MAX_CONFIG_BYTES / 1024
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| fail("is not UTF-8".to_owned()))?;
        let file: File =
            toml::from_str(&text).map_err(|err| fail(format!("is not valid: {err}")))?;
        let keep_for = file
            .history
            .keep_for
            .map(|text| args::since(&text).map(|span| span.0))
            .transpose()
            .map_err(|err| fail(format!("is not valid: history.keep_for: {err}")))?;
        Ok(Self {
            keep: file.history.keep,
            keep_for,
        })
    }

    /// The history's retention: each of `keep` and `keep_for` from the command line, else
    /// from this file, else [`Retention::DEFAULT`].
    pub(crate) fn retention(&self, keep: Option<u64>, keep_for: Option<Duration>) -> Retention {
        Retention {
            max_messages: keep
                .or(self.keep)
                .unwrap_or(Retention::DEFAULT.max_messages),
            max_age: keep_for
                .or(self.keep_for)
                .unwrap_or(Retention::DEFAULT.max_age),
        }
    }
}

/// `claude-peers/config.toml` under `$XDG_CONFIG_HOME`, else `~/.config`.
pub(crate) fn default_path() -> Option<PathBuf> {
    config_dir().map(|dir| dir.join("config.toml"))
}

/// This user's `claude-peers` configuration directory: under `$XDG_CONFIG_HOME` (when
/// absolute), else `~/.config`.
pub(crate) fn config_dir() -> Option<PathBuf> {
    let var = |name| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    var("XDG_CONFIG_HOME")
        .or_else(|| var("HOME").map(|home| home.join(".config")))
        .map(|base| base.join("claude-peers"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use claude_peer_post::Retention;

    use super::Config;

    fn config(text: &str) -> Result<Config, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, text).unwrap();
        Config::read(&path).map_err(|err| {
            assert_eq!(err.path, path);
            err.to_string()
        })
    }

    #[test]
    fn the_file_sets_what_a_flag_does_not() {
        let config = config("[history]\nkeep = 500\nkeep_for = \"7d\"\n").unwrap();
        let week = Duration::from_secs(7 * 86_400);
        let from_file = config.retention(None, None);
        assert_eq!((from_file.max_messages, from_file.max_age), (500, week));
        let flags = config.retention(Some(9), Some(Duration::from_secs(60)));
        assert_eq!(
            (flags.max_messages, flags.max_age),
            (9, Duration::from_secs(60))
        );
    }

    #[test]
    fn no_file_and_an_empty_file_keep_the_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let none = Config::read(&dir.path().join("absent.toml")).unwrap();
        let empty = config("# nothing yet\n").unwrap();
        for config in [none, empty] {
            let retention = config.retention(None, None);
            assert_eq!(retention.max_messages, Retention::DEFAULT.max_messages);
            assert_eq!(retention.max_age, Retention::DEFAULT.max_age);
        }
    }

    #[test]
    fn a_bad_file_is_named_with_its_reason() {
        for (text, reason) in [
            ("[history]\nkeep = \"many\"\n", "line 2"),
            ("[history]\nkeep = -1\n", "line 2"),
            ("[history]\nkep = 5\n", "unknown field `kep`"),
            ("[histroy]\n", "unknown field `histroy`"),
            ("[history]\nkeep_for = \"forever\"\n", "history.keep_for"),
            ("[history\n", "line 1"),
        ] {
            let message = config(text).unwrap_err();
            assert!(message.contains("config.toml"), "{message}");
            assert!(message.contains(reason), "{text:?}: {message}");
        }
    }

    #[test]
    fn a_file_too_large_or_not_text_is_refused_without_reading_it_all() {
        let huge = format!("# {}\n", "x".repeat(100_000));
        assert!(config(&huge).unwrap_err().contains("above 64 KiB"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, b"[history]\nkeep = 1 # \xff\n").unwrap();
        assert!(
            Config::read(&path)
                .unwrap_err()
                .to_string()
                .contains("not UTF-8")
        );
    }
}
