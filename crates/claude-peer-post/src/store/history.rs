//! The history: messages in as well as out, what each answers, the log's ways of reading
//! it (a conversation, a search, a thread) and the retention that prunes it.

use std::ops::ControlFlow;
use std::time::Duration;

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};

use super::row::{self, MESSAGE_COLUMNS, ms, new_id};
use super::{Store, failed};
use crate::Error;
use crate::message::{Direction, Inbound, Message, State};

/// Where the search marks a match in [`Logged::marked`]: Unicode noncharacters, which
/// are never text to show.
pub const MARK_START: char = '\u{FDD0}';
/// The end of a mark: see [`MARK_START`].
pub const MARK_END: char = '\u{FDD1}';

/// Which messages [`Store::log`] lists, and in what order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogFilter {
    /// Only those to this address's id, name or directory.
    pub to: Option<String>,
    /// Only the conversation with this session (its id, or its name), both ways.
    pub with: Option<String>,
    /// Only those whose text matches this full-text search (SQLite FTS5's syntax:
    /// words, `"a phrase"`, `word*`, `AND`, `OR`, `NOT`, brackets).
    pub search: Option<String>,
    /// Only this message and everything that answered it, transitively.
    pub thread: Option<String>,
    /// Only those that went this way.
    pub direction: Option<Direction>,
    /// Only those in this state.
    pub state: Option<State>,
    /// Only those posted at or after this time, in ms since the epoch.
    pub since_ms: Option<u64>,
    /// At most this many: the newest.
    pub limit: Option<u64>,
    /// In what order.
    pub order: Order,
}

/// The order of what the log lists.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// Newest first.
    #[default]
    NewestFirst,
    /// Oldest first, as a conversation reads (with a limit, the newest that many).
    OldestFirst,
}

/// One message as the log lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    /// The message.
    pub message: Message,
    /// Its text with each match of the search between [`MARK_START`] and [`MARK_END`],
    /// when the log searched.
    pub marked: Option<String>,
}

/// How much history the store keeps: the oldest final messages beyond either bound are
/// pruned (a message not yet final never is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// At most this many messages.
    pub max_messages: u64,
    /// None older than this.
    pub max_age: Duration,
}

impl Retention {
    /// 1,000,000 messages, 90 days.
    pub const DEFAULT: Self = Self {
        max_messages: 1_000_000,
        max_age: Duration::from_secs(90 * 86_400),
    };
}

impl Default for Retention {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// How many messages one pruning transaction deletes: the store stays responsive and
/// memory bounded however much is pruned.
const PRUNE_BATCH: i64 = 5_000;

/// Messages not yet final, which no retention prunes.
const OPEN: &str = "('waiting', 'sending', 'unknown')";

impl Store {
    /// Records a message in, heard at `now_ms`, as answering the latest message that
    /// its sender name delivered to the sending session (`inferred`: Claude Code's
    /// envelope names none); `from` is the sending session's name (else its id, else
    /// its address).
    pub fn receive(&mut self, inbound: &Inbound, now_ms: u64) -> Result<Message, Error> {
        let sqlite = failed(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        let answers = match &inbound.session_id {
            Some(session_id) => latest_delivered(&tx, &inbound.to, session_id).map_err(sqlite)?,
            None => None,
        };
        let id = new_id().map_err(|source| Error::Io {
            path: self.path.clone(),
            source,
        })?;
        let from = inbound
            .from_name
            .as_ref()
            .or(inbound.session_id.as_ref())
            .unwrap_or(&inbound.from_address);
        tx.execute(
            "INSERT INTO message (id, direction, sender, to_kind, address, text, state, session_id,
             session_name, in_reply_to, inferred, created_at_ms, expires_at_ms)
             VALUES (?1, 'in', ?2, 'name', ?3, ?4, 'received', ?5, ?6, ?7, ?8, ?9, ?9)",
            params![
                id,
                from,
                inbound.to,
                inbound.text,
                inbound.session_id,
                inbound.from_name,
                answers,
                answers.is_some(),
                ms(now_ms),
            ],
        )
        .and_then(|_| {
            tx.execute(
                "INSERT INTO change (message, n, at_ms, state, detail) VALUES (last_insert_rowid(), 0, ?1, 'received', ?2)",
                params![ms(now_ms), format!("from {}", inbound.from_address)],
            )
        })
        .map_err(sqlite)?;
        let message = row::load(&tx, &id).map_err(sqlite)?;
        tx.commit().map_err(sqlite)?;
        message.ok_or(Error::NoSuchMessage(id))
    }

    /// The post id of the latest message `from` delivered to `session_id`: what a reply
    /// or an idle notice from that session is about.
    pub fn latest_delivered(&self, from: &str, session_id: &str) -> Result<Option<String>, Error> {
        latest_delivered(&self.conn, from, session_id).map_err(failed(&self.path))
    }

    /// Hands `each` the messages `filter` picks, in its order, one at a time (memory does
    /// not grow with their number). A search SQLite's full-text index cannot read is
    /// [`Error::Search`].
    pub fn log(
        &self,
        filter: &LogFilter,
        mut each: impl FnMut(Logged) -> ControlFlow<()>,
    ) -> Result<(), Error> {
        if filter
            .search
            .as_deref()
            .is_some_and(|s| s.trim().is_empty())
        {
            return Err(search_error(filter, "the search is empty"));
        }
        let (sql, args) = log_query(filter);
        let each = |message, marked| each(Logged { message, marked });
        row::each(&self.conn, &sql, rusqlite::params_from_iter(args), each).map_err(|err| {
            match search_failure(&err) {
                Some(why) if filter.search.is_some() => search_error(filter, why),
                _ => failed(&self.path)(err),
            }
        })
    }

    /// Prunes the oldest final messages beyond `retention` (as of `now_ms`), a batch per
    /// transaction; how many.
    pub fn prune(&mut self, retention: &Retention, now_ms: u64) -> Result<u64, Error> {
        let sqlite = failed(&self.path);
        let max_age = u64::try_from(retention.max_age.as_millis()).unwrap_or(u64::MAX);
        let cutoff = ms(now_ms.saturating_sub(max_age));
        let mut pruned = 0;
        loop {
            let deleted = self
                .conn
                .execute(
                    &format!(
                        "DELETE FROM message WHERE seq IN (SELECT seq FROM message
                         WHERE created_at_ms < ?1 AND state NOT IN {OPEN} ORDER BY seq LIMIT ?2)"
                    ),
                    params![cutoff, PRUNE_BATCH],
                )
                .map_err(sqlite)?;
            pruned += deleted as u64;
            if deleted == 0 {
                break;
            }
        }
        let count: i64 = self
            .conn
            .query_row("SELECT count(*) FROM message", [], |row| row.get(0))
            .map_err(sqlite)?;
        let mut over = count.saturating_sub(ms(retention.max_messages));
        while over > 0 {
            let deleted = self
                .conn
                .execute(
                    &format!(
                        "DELETE FROM message WHERE seq IN (SELECT seq FROM message
                         WHERE state NOT IN {OPEN} ORDER BY seq LIMIT ?1)"
                    ),
                    [over.min(PRUNE_BATCH)],
                )
                .map_err(sqlite)?;
            if deleted == 0 {
                break;
            }
            pruned += deleted as u64;
            over -= i64::try_from(deleted).unwrap_or(over);
        }
        Ok(pruned)
    }

    /// The connection, for the import in a sibling module.
    pub(super) fn conn(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

fn latest_delivered(
    conn: &Connection,
    from: &str,
    session_id: &str,
) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached(
        "SELECT id FROM message WHERE session_id = ?1 AND direction = 'out'
         AND sender = ?2 AND state = 'delivered' ORDER BY seq DESC LIMIT 1",
    )?
    .query_row(params![session_id, from], |row| row.get(0))
    .optional()
}

/// The log's query for `filter` and its arguments.
fn log_query(filter: &LogFilter) -> (String, Vec<Value>) {
    let columns: Vec<String> = MESSAGE_COLUMNS
        .split(", ")
        .map(|column| format!("m.{column}"))
        .collect();
    let mut args: Vec<Value> = Vec::new();
    let mut arg = |value: Value| {
        args.push(value);
        format!("?{}", args.len())
    };
    let mut clauses = Vec::new();
    let mut with = String::new();
    if let Some(thread) = &filter.thread {
        let id = arg(Value::Text(thread.clone()));
        with = format!(
            "WITH RECURSIVE thread (id) AS (SELECT {id} UNION SELECT m.id FROM message m JOIN thread ON m.in_reply_to = thread.id) "
        );
        clauses.push("m.id IN (SELECT id FROM thread)".to_owned());
    }
    if let Some(to) = &filter.to {
        clauses.push(format!("m.address = {}", arg(Value::Text(to.clone()))));
    }
    if let Some(peer) = &filter.with {
        let p = arg(Value::Text(peer.clone()));
        clauses.push(format!(
            "(m.session_id = {p} OR m.session_name = {p} OR (m.address = {p} AND m.direction = 'out'))"
        ));
    }
    if let Some(direction) = filter.direction {
        clauses.push(format!(
            "m.direction = {}",
            arg(Value::Text(direction.as_str().to_owned()))
        ));
    }
    if let Some(state) = filter.state {
        clauses.push(format!(
            "m.state = {}",
            arg(Value::Text(state.as_str().to_owned()))
        ));
    }
    if let Some(since) = filter.since_ms {
        clauses.push(format!(
            "m.created_at_ms >= {}",
            arg(Value::Integer(ms(since)))
        ));
    }
    let (from, marked, by) = match &filter.search {
        Some(search) => {
            clauses.push(format!(
                "message_text MATCH {}",
                arg(Value::Text(search.clone()))
            ));
            (
                "message_text JOIN message m ON m.seq = message_text.rowid",
                format!("highlight(message_text, 0, '{MARK_START}', '{MARK_END}') AS marked"),
                // The index's own order, so the newest matches come without a sort.
                "message_text.rowid",
            )
        }
        None => ("message m", "NULL AS marked".to_owned(), "m.seq"),
    };
    let limit = arg(Value::Integer(filter.limit.map_or(-1, ms)));
    let wheres = if clauses.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", clauses.join(" AND "))
    };
    let (inner_order, outer) = match (filter.order, filter.limit) {
        (Order::NewestFirst, _) => ("DESC", ""),
        (Order::OldestFirst, None) => ("", ""),
        (Order::OldestFirst, Some(_)) => ("DESC", " ORDER BY seq"),
    };
    let select = format!(
        "SELECT {}, {marked} FROM {from} {wheres} ORDER BY {by} {inner_order} LIMIT {limit}",
        columns.join(", ")
    );
    let sql = if outer.is_empty() {
        format!("{with}{select}")
    } else {
        format!("{with}SELECT * FROM ({select}){outer}")
    };
    (sql, args)
}

/// What is wrong with a search, from SQLite's full-text error, in words of our own.
fn search_failure(err: &rusqlite::Error) -> Option<&'static str> {
    let rusqlite::Error::SqliteFailure(_, Some(text)) = err else {
        return None;
    };
    if text.contains("unterminated string") {
        Some("a quote is not closed")
    } else if text.contains("no such column") {
        Some(
            "a word followed by `:` picks a column, and there is none of that name: put the text in quotes",
        )
    } else if text.starts_with("fts5: syntax error near \"\"") {
        Some("it ends where a word is still expected (after AND, OR, NOT or an opening bracket)")
    } else if text.starts_with("fts5:") {
        Some(
            "AND, OR, NOT and brackets need words on both sides, and `*` ends a word (quote a word to search it as it is)",
        )
    } else {
        None
    }
}

fn search_error(filter: &LogFilter, why: &str) -> Error {
    Error::Search {
        query: filter.search.clone().unwrap_or_default(),
        why: why.to_owned(),
    }
}
