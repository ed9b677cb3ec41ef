//! Talking to a running post office: a request a line, its answer read back.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use crate::Error;
use crate::protocol::{Answer, Record, Request, SentRecord};
use crate::server::SOCKET_FILE;

/// The longest answer line a client reads: a record with a 64 KiB text, escaped, and
/// its timeline.
const MAX_ANSWER_BYTES: u64 = 1 << 20;

/// A connection to the post office whose socket is in a runtime directory.
#[derive(Debug)]
pub struct Client {
    socket: PathBuf,
    lines: BufReader<UnixStream>,
    out: UnixStream,
}

/// What a request answered: the record asked for, or the post office's pid and home
/// (`ping`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Done {
    /// The record of a `post`, `get`, `cancel` or `retry`.
    pub record: Option<Record>,
    /// The post office's pid, for `ping`.
    pub pid: Option<u32>,
    /// The Claude home it delivers to, for `ping`.
    pub home: Option<String>,
    /// What a `send` came to.
    pub sent: Option<SentRecord>,
}

impl Client {
    /// Connects to the post office whose runtime directory is `dir`.
    pub fn connect(dir: &Path) -> Result<Self, Error> {
        let socket = dir.join(SOCKET_FILE);
        let not_running = |source| Error::NotRunning {
            socket: socket.clone(),
            source,
        };
        let stream = UnixStream::connect(&socket).map_err(not_running)?;
        let out = stream.try_clone().map_err(not_running)?;
        Ok(Self {
            socket,
            lines: BufReader::new(stream),
            out,
        })
    }

    /// Sends `request` and reads its answer, handing each record of a list (`outbox`,
    /// `log`) to `each` as it arrives.
    pub fn request(
        &mut self,
        request: &Request,
        mut each: impl FnMut(Record),
    ) -> Result<Done, Error> {
        let mut line = serde_json::to_vec(request).map_err(|err| self.broken(err))?;
        line.push(b'\n');
        self.out
            .write_all(&line)
            .and_then(|()| self.out.flush())
            .map_err(|err| self.broken(err))?;
        loop {
            line.clear();
            let read = (&mut self.lines)
                .take(MAX_ANSWER_BYTES)
                .read_until(b'\n', &mut line)
                .map_err(|err| self.broken(err))?;
            if read == 0 || line.last() != Some(&b'\n') {
                return Err(self.broken("the answer ended early, or was too long"));
            }
            match serde_json::from_slice::<Answer>(&line).map_err(|err| self.broken(err))? {
                Answer::Record { record } => each(record),
                Answer::Done {
                    record, pid, home, ..
                } => {
                    return Ok(Done {
                        record,
                        pid,
                        home,
                        sent: None,
                    });
                }
                Answer::Sent { record, sent, .. } => {
                    return Ok(Done {
                        record: Some(record),
                        pid: None,
                        home: None,
                        sent: Some(sent),
                    });
                }
                Answer::Failed { error, message, .. } => {
                    return Err(Error::answered(&error, message));
                }
            }
        }
    }

    fn broken(&self, why: impl std::fmt::Display) -> Error {
        Error::NotRunning {
            socket: self.socket.clone(),
            source: std::io::Error::other(why.to_string()),
        }
    }
}
