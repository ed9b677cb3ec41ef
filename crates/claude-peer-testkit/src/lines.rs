//! The lines a child prints, read on a thread of their own and waited for with a
//! deadline, so a child that stops answering fails its test instead of hanging it.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read};
use std::process::Child;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Lines arriving from a reader (a child's stdout), each with the time it arrived.
/// The reading thread ends at the end of the stream, at a read error, or once this is
/// dropped and another line comes.
#[derive(Debug)]
pub struct Lines {
    lines: mpsc::Receiver<(Instant, String)>,
}

/// Why no (fitting) line came.
#[derive(Debug)]
pub enum LineError {
    /// No line within this long.
    TimedOut(Duration),
    /// The stream ended (or could not be read on).
    Ended,
    /// A line that is not one JSON value.
    NotJson {
        /// The line.
        line: String,
        /// What is wrong with it.
        error: serde_json::Error,
    },
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TimedOut(limit) => write!(f, "no line within {limit:?}"),
            Self::Ended => f.write_str("the stream ended"),
            Self::NotJson { line, error } => write!(f, "not a JSON line ({error}): {line}"),
        }
    }
}

impl std::error::Error for LineError {}

/// JSON lines seen while waiting for one that never came, and why it did not.
#[derive(Debug)]
pub struct Unmet {
    /// Every value seen, in order.
    pub seen: Vec<Value>,
    /// What ended the wait.
    pub error: LineError,
}

impl Lines {
    /// Reads `source` line by line on a thread of its own.
    pub fn read(source: impl Read + Send + 'static) -> Self {
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(source).lines() {
                let Ok(line) = line else { break };
                if tx.send((Instant::now(), line)).is_err() {
                    break;
                }
            }
        });
        Self { lines }
    }

    /// Reads the stdout of `child`, which must have been spawned with it piped.
    pub fn stdout(child: &mut Child) -> io::Result<Self> {
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io::Error::other("the child's stdout is not piped"))?;
        Ok(Self::read(stdout))
    }

    /// The next line and when it arrived, if it comes within `within`.
    pub fn next_timed(&self, within: Duration) -> Result<(Instant, String), LineError> {
        self.lines.recv_timeout(within).map_err(|err| match err {
            RecvTimeoutError::Timeout => LineError::TimedOut(within),
            RecvTimeoutError::Disconnected => LineError::Ended,
        })
    }

    /// The next line, if it comes within `within`.
    pub fn next(&self, within: Duration) -> Result<String, LineError> {
        self.next_timed(within).map(|(_, line)| line)
    }

    /// The next line as a JSON value, if it comes within `within` and is one.
    pub fn next_json(&self, within: Duration) -> Result<Value, LineError> {
        let line = self.next(within)?;
        serde_json::from_str(&line).map_err(|error| LineError::NotJson { line, error })
    }

    /// JSON lines until one satisfies `wanted` (returned last), all within `within`.
    pub fn until_json(
        &self,
        within: Duration,
        mut wanted: impl FnMut(&Value) -> bool,
    ) -> Result<Vec<Value>, Unmet> {
        let deadline = Instant::now() + within;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_json(left) {
                Ok(value) => {
                    let done = wanted(&value);
                    seen.push(value);
                    if done {
                        return Ok(seen);
                    }
                }
                Err(LineError::TimedOut(_)) => {
                    let error = LineError::TimedOut(within);
                    return Err(Unmet { seen, error });
                }
                Err(error) => return Err(Unmet { seen, error }),
            }
        }
    }

    /// The lines still to come: until the stream ends, or until none comes for `gap`.
    #[must_use]
    pub fn rest(&self, gap: Duration) -> Vec<String> {
        std::iter::from_fn(|| self.next(gap).ok()).collect()
    }
}
