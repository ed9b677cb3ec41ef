//! The store: one SQLite file per user, every message and every change of it.

mod history;
mod import;
mod row;
mod schema;

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};

use crate::message::{Address, Message, NewMessage, Step};
use crate::{Error, MAX_EXPIRY};
pub use history::{LogFilter, Logged, MARK_END, MARK_START, Order, Retention};
pub use import::{Imported, MAX_IMPORT_LINE};
use row::{MESSAGE_COLUMNS, ms, new_id};

/// How long a write waits for another process's write to end before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What [`Store::post`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    /// The message as stored.
    pub message: Message,
    /// `false` when its idempotency key named a message posted before, which this is.
    pub fresh: bool,
}

/// The post office's store, open.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

impl Store {
    /// Opens the store at `path`, creating it (0600, in a directory only this user can
    /// change) when there is none, and bringing an older schema up to date. A file that
    /// is not a store, is cut off or was written by a newer claude-peers is refused by
    /// name and left as it is.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Error::NotAStore {
                path: path.to_owned(),
                why: "it names no file".to_owned(),
            });
        };
        let dir = claude_peer_sender::private_dir(dir).map_err(|source| Error::Dir {
            path: dir.to_owned(),
            source,
        })?;
        let path = dir.join(name);
        schema::check_file(&path)?;
        let sqlite = failed(&path);
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let mut conn = Connection::open_with_flags(&path, flags).map_err(sqlite)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(sqlite)?;
        schema::prepare(&mut conn, &path)?;
        Ok(Self { conn, path })
    }

    /// The store's file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stores `new`, waiting, as posted at `now_ms`; on disk when this returns. With a
    /// key its sender used before, the message posted then (nothing is stored again).
    pub fn post(&mut self, new: &NewMessage, now_ms: u64) -> Result<Posted, Error> {
        check(new, now_ms)?;
        let sqlite = failed(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        if let Some(key) = &new.key {
            let before: Option<String> = tx
                .query_row(
                    "SELECT id FROM message WHERE sender = ?1 AND key = ?2",
                    params![new.from, key],
                    |row| row.get(0),
                )
                .optional()
                .map_err(sqlite)?;
            if let Some(id) = before {
                let message = row::load(&tx, &id).map_err(sqlite)?;
                let message = message.ok_or_else(|| Error::NoSuchMessage(id.clone()))?;
                if message.to != new.to || message.text != new.text {
                    return Err(Error::KeyInUse {
                        key: key.clone(),
                        from: new.from.clone(),
                        id,
                    });
                }
                return Ok(Posted {
                    message,
                    fresh: false,
                });
            }
        }
        let id = new_id().map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        insert(&tx, &id, new, now_ms).map_err(sqlite)?;
        let message = row::load(&tx, &id).map_err(sqlite)?;
        tx.commit().map_err(sqlite)?;
        Ok(Posted {
            message: message.ok_or(Error::NoSuchMessage(id))?,
            fresh: true,
        })
    }

    /// Stores a message that was sent without a post office, as posted at `now_ms` then
    /// taken through `steps` (its attempt and outcome), in one transaction: the log
    /// holds every message this user sent. A step that does not apply is
    /// [`Error::NotNow`], nothing stored.
    pub fn record(
        &mut self,
        new: &NewMessage,
        steps: &[Step],
        now_ms: u64,
    ) -> Result<Message, Error> {
        check(new, now_ms)?;
        let sqlite = failed(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        let id = new_id().map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        insert(&tx, &id, new, now_ms).map_err(sqlite)?;
        let mut message = row::load(&tx, &id)
            .map_err(sqlite)?
            .ok_or_else(|| Error::NoSuchMessage(id.clone()))?;
        for step in steps {
            message = step_in(&tx, &self.path, &id, step, now_ms)?;
        }
        tx.commit().map_err(sqlite)?;
        Ok(message)
    }

    /// The message `id`, if there is one.
    pub fn get(&self, id: &str) -> Result<Option<Message>, Error> {
        row::load(&self.conn, id).map_err(failed(&self.path))
    }

    /// The message Claude Code knows as `msg_id`, if any: where a later receipt belongs.
    pub fn by_msg_id(&self, msg_id: &str) -> Result<Option<Message>, Error> {
        let id: Option<String> = self
            .conn
            .query_row(
                "SELECT id FROM message WHERE msg_id = ?1",
                [msg_id],
                |row| row.get(0),
            )
            .optional()
            .map_err(failed(&self.path))?;
        id.map_or(Ok(None), |id| self.get(&id))
    }

    /// Whether a message `from` sent, delivered since `since_ms`, still waits for its
    /// receiver's word (`queued` until read, `held` until released, denied or expired):
    /// its sender still has work to hear.
    pub fn awaits_receipt(&self, from: &str, since_ms: u64) -> Result<bool, Error> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM message WHERE sender = ?1 AND state = 'delivered'
                 AND outcome IN ('queued', 'held') AND created_at_ms >= ?2)",
                params![from, ms(since_ms)],
                |row| row.get(0),
            )
            .map_err(failed(&self.path))
    }

    /// Takes `step` for the message `id` at `at_ms`, if it applies to the message as it
    /// stands (else [`Error::NotNow`], nothing changed); returns the message after it.
    /// A reason or receipt that is already the message's is not recorded again.
    pub fn step(&mut self, id: &str, step: &Step, at_ms: u64) -> Result<Message, Error> {
        let sqlite = failed(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        let after = step_in(&tx, &self.path, id, step, at_ms)?;
        tx.commit().map_err(sqlite)?;
        Ok(after)
    }

    /// Expires every waiting message whose expiry is at or before `now_ms`; their ids.
    pub fn expire_due(&mut self, now_ms: u64) -> Result<Vec<String>, Error> {
        let due: Vec<String> = {
            let mut statement = self
                .conn
                .prepare_cached(
                    "SELECT id FROM message WHERE state = 'waiting' AND expires_at_ms <= ?1 ORDER BY seq",
                )
                .map_err(failed(&self.path))?;
            let ids = statement
                .query_map([ms(now_ms)], |row| row.get(0))
                .and_then(Iterator::collect::<Result<_, _>>);
            ids.map_err(failed(&self.path))?
        };
        let mut expired = Vec::new();
        for id in due {
            // One cancelled or claimed meanwhile, through another connection, is skipped.
            match self.step(&id, &Step::Expire, now_ms) {
                Ok(_) => expired.push(id),
                Err(Error::NotNow { .. }) => {}
                Err(err) => return Err(err),
            }
        }
        Ok(expired)
    }

    /// Hands `each` every message not yet final (waiting, sending, unknown), oldest
    /// first, one at a time (memory does not grow with their number), until it breaks.
    pub fn outbox(&self, mut each: impl FnMut(Message) -> ControlFlow<()>) -> Result<(), Error> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM message WHERE state IN ('waiting', 'sending', 'unknown') ORDER BY seq"
        );
        row::each(&self.conn, &sql, [], |message, _| each(message)).map_err(failed(&self.path))
    }

    /// Up to `limit` waiting messages posted after `after_seq`, oldest first: a page of
    /// the queue, so a pass over 100,000 holds only a page at a time.
    pub fn waiting_after(&self, after_seq: u64, limit: usize) -> Result<Vec<Message>, Error> {
        let sql = format!(
            "SELECT {MESSAGE_COLUMNS} FROM message WHERE state = 'waiting' AND seq > ?1 ORDER BY seq LIMIT ?2"
        );
        let mut page = Vec::new();
        let limit = ms(u64::try_from(limit).unwrap_or(u64::MAX));
        row::each(&self.conn, &sql, [ms(after_seq), limit], |message, _| {
            page.push(message);
            ControlFlow::Continue(())
        })
        .map_err(failed(&self.path))?;
        Ok(page)
    }

    /// Whether any message is not yet final.
    pub fn has_open(&self) -> Result<bool, Error> {
        self.conn
            .query_row(
                "SELECT EXISTS (SELECT 1 FROM message WHERE state IN ('waiting', 'sending', 'unknown'))",
                [],
                |row| row.get(0),
            )
            .map_err(failed(&self.path))
    }

    /// The earliest time after `now_ms` at which a waiting message's backoff ends or its
    /// expiry comes: when a pass is next due, whatever the registry does.
    pub fn next_due_ms(&self, now_ms: u64) -> Result<Option<u64>, Error> {
        let at: Option<i64> = self
            .conn
            .query_row(
                "SELECT min(CASE WHEN not_before_ms > ?1 THEN min(not_before_ms, expires_at_ms) ELSE expires_at_ms END)
                 FROM message WHERE state = 'waiting'",
                [ms(now_ms)],
                |row| row.get(0),
            )
            .map_err(failed(&self.path))?;
        Ok(at.map(|at| u64::try_from(at).unwrap_or(0)))
    }
}

/// Takes `step` for the message `id` within the transaction `tx` (see [`Store::step`]).
fn step_in(
    tx: &Connection,
    path: &Path,
    id: &str,
    step: &Step,
    at_ms: u64,
) -> Result<Message, Error> {
    let sqlite = failed(path);
    let message = row::load(tx, id)
        .map_err(sqlite)?
        .ok_or_else(|| Error::NoSuchMessage(id.to_owned()))?;
    let Some(to) = step.from(message.state) else {
        return Err(Error::NotNow {
            id: id.to_owned(),
            state: message.state,
            step: step.as_str(),
        });
    };
    if row::changes_nothing(&message, step) {
        return Ok(message);
    }
    row::apply(tx, id, step, to, message.attempts, at_ms).map_err(sqlite)?;
    row::load(tx, id)
        .map_err(sqlite)?
        .ok_or_else(|| Error::NoSuchMessage(id.to_owned()))
}

/// Inserts `new` as the waiting message `id`, posted at `now_ms`.
fn insert(conn: &Connection, id: &str, new: &NewMessage, now_ms: u64) -> rusqlite::Result<()> {
    let reason = "posted";
    conn.execute(
        "INSERT INTO message (id, sender, key, to_kind, address, text, state, reason, created_at_ms, expires_at_ms,
         in_reply_to, session_name)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'waiting', ?7, ?8, ?9, ?10, ?11)",
        params![
            id,
            new.from,
            new.key,
            new.to.kind().as_str(),
            new.to.value(),
            new.text,
            reason,
            ms(now_ms),
            ms(new.expires_at_ms),
            new.in_reply_to,
            // Known for a name now, for an id once delivered: what `log --with` finds.
            matches!(new.to, Address::Name(_)).then(|| new.to.value()),
        ],
    )?;
    conn.execute(
        "INSERT INTO change (message, n, at_ms, state, detail) VALUES (last_insert_rowid(), 0, ?1, 'waiting', ?2)",
        params![ms(now_ms), reason],
    )?;
    Ok(())
}

/// SQLite's failure on the store at `path`, as this crate's error.
fn failed(path: &Path) -> impl Fn(rusqlite::Error) -> Error + Copy + '_ {
    |source| Error::Sqlite {
        path: path.to_owned(),
        source,
    }
}

/// What a message must be to be posted: its text within the gate's bounds, a sender
/// name Claude Code shows, an address that can name a session, an expiry in the future
/// and at most [`MAX_EXPIRY`] away.
fn check(new: &NewMessage, now_ms: u64) -> Result<(), Error> {
    claude_peer_deliver::check_message(&new.text).map_err(Error::Text)?;
    claude_peer_sender::check_sender_name(&new.from)
        .map_err(|err| Error::Invalid(err.to_string()))?;
    let value = new.to.value();
    let address = match &new.to {
        _ if value.is_empty() => Some("the address is empty"),
        _ if value.chars().any(char::is_control) => Some("the address holds a control character"),
        Address::Cwd(dir) if !dir.starts_with('/') => {
            Some("a cwd address must be an absolute directory")
        }
        _ => None,
    };
    if let Some(why) = address {
        return Err(Error::Invalid(why.to_owned()));
    }
    let longest = now_ms.saturating_add(u64::try_from(MAX_EXPIRY.as_millis()).unwrap_or(u64::MAX));
    if new.expires_at_ms <= now_ms {
        return Err(Error::Invalid("the expiry is not in the future".to_owned()));
    }
    if new.expires_at_ms > longest {
        return Err(Error::Invalid(format!(
            "the expiry is more than {} days away",
            MAX_EXPIRY.as_secs() / 86_400
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::AddressKind;

    fn new(text: &str, expires_at_ms: u64) -> NewMessage {
        NewMessage {
            from: "build-bot".to_owned(),
            key: None,
            to: Address::new(AddressKind::Name, "reviewer".to_owned()),
            text: text.to_owned(),
            expires_at_ms,
            in_reply_to: None,
        }
    }

    #[test]
    fn a_message_that_cannot_go_is_refused_before_anything_is_stored() {
        let day = 86_400_000;
        let cases = [
            (new("hi", day), "not in the future"),
            (new("hi", day + 30 * day + 1), "more than 30 days"),
            (
                NewMessage {
                    from: "-x".to_owned(),
                    ..new("hi", 2 * day)
                },
                "starts with `-`",
            ),
            (
                NewMessage {
                    to: Address::Cwd("relative/dir".to_owned()),
                    ..new("hi", 2 * day)
                },
                "absolute",
            ),
            (
                NewMessage {
                    to: Address::Name("a\u{1b}[2J".to_owned()),
                    ..new("hi", 2 * day)
                },
                "control character",
            ),
        ];
        for (message, words) in cases {
            let err = check(&message, day).unwrap_err();
            assert_eq!(err.as_str(), "invalid_message");
            assert!(err.to_string().contains(words), "{words}: {err}");
        }
        // A text no send takes, under the name `send` gives it.
        for (text, name, words) in [
            (String::new(), "empty_message", "empty"),
            ("x".repeat(65_537), "message_too_large", "65537 bytes"),
        ] {
            let err = check(&new(&text, 2 * day), day).unwrap_err();
            assert_eq!(err.as_str(), name);
            assert!(err.to_string().contains(words), "{words}: {err}");
        }
        assert!(check(&new("hi", day + 30 * day), day).is_ok());
    }
}
