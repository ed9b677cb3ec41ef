//! `log --import`: records as `log --export` writes them (JSON lines), read back into a
//! store in one transaction, every line checked first.

use std::io::Read;
use std::ops::ControlFlow;

use claude_peer_deliver::{Basis, Outcome};
use claude_peer_probe::stream::{Line, read_lines};
use rusqlite::{Connection, TransactionBehavior, params};

use super::row::{self, ms};
use super::{Store, failed, schema};
use crate::Error;
use crate::message::{AddressKind, Direction, State};
use crate::protocol::Record;

/// The longest line an import reads: a message of 64 KiB escaped at its worst, with a
/// long timeline.
pub const MAX_IMPORT_LINE: usize = 1 << 20;

/// The page cache an import may use, in KiB as SQLite's `cache_size` takes it (negative).
const IMPORT_CACHE_KIB: i64 = -65_536;

/// What [`Store::import`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Imported {
    /// Records stored.
    pub imported: u64,
    /// Records the store had already, exactly so.
    pub skipped: u64,
}

impl Store {
    /// Reads records, a JSON line each (blank lines aside), from `reader` (named `file`
    /// in errors) into the store, skipping those it holds already exactly so; all of
    /// them or, at the first line that cannot be taken (not a record, too long, a word
    /// no claude-peers writes, an id the store holds with other content, a message
    /// caught `sending`), none: [`Error::Import`] with its line number.
    pub fn import(&mut self, file: &str, reader: impl Read) -> Result<Imported, Error> {
        let path = self.path.clone();
        let sqlite = failed(&path);
        // One transaction of a million records: pages kept in memory rather than spilled
        // to the log and read back, up to a bound.
        self.conn()
            .pragma_update(None, "cache_size", IMPORT_CACHE_KIB)
            .and_then(|()| self.conn().pragma_update(None, "temp_store", "MEMORY"))
            .map_err(sqlite)?;
        let tx = self
            .conn()
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sqlite)?;
        // Indexed at once, after the rows: see `schema::TEXT_INSERT_TRIGGER`.
        let before: i64 = tx
            .query_row("SELECT coalesce(max(seq), 0) FROM message", [], |row| {
                row.get(0)
            })
            .and_then(|before| {
                tx.execute_batch("DROP TRIGGER message_text_insert")?;
                Ok(before)
            })
            .map_err(sqlite)?;
        let mut done = Imported::default();
        let mut number = 0_u64;
        let mut failure = None;
        let bad = |line, why: String| Error::Import {
            file: file.to_owned(),
            line,
            why,
        };
        let read = read_lines(reader, MAX_IMPORT_LINE, |line| {
            number += 1;
            let result = match line {
                Line::Overlong => Err(bad(number, format!("longer than {MAX_IMPORT_LINE} bytes"))),
                Line::Whole(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(()),
                Line::Whole(bytes) => serde_json::from_slice::<Record>(bytes)
                    .map_err(|err| bad(number, format!("not a message record: {err}")))
                    .and_then(|record| {
                        check(&record).map_err(|Unfit(why)| bad(number, why))?;
                        take(&tx, &record, &mut done).map_err(|err| match err {
                            Taken::Other(why) => bad(number, why),
                            Taken::Sqlite(err) => sqlite(err),
                        })
                    }),
            };
            match result {
                Ok(()) => ControlFlow::Continue(()),
                Err(err) => {
                    failure = Some(err);
                    ControlFlow::Break(())
                }
            }
        });
        if let Some(err) = failure {
            return Err(err);
        }
        read.map_err(|err| bad(number + 1, format!("cannot be read: {err}")))?;
        tx.execute(
            "INSERT INTO message_text (rowid, text) SELECT seq, text FROM message WHERE seq > ?1",
            [before],
        )
        .and_then(|_| tx.execute_batch(schema::TEXT_INSERT_TRIGGER))
        .and_then(|()| tx.commit())
        .map_err(sqlite)?;
        Ok(done)
    }
}

/// Why a checked record could not be taken.
enum Taken {
    Other(String),
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for Taken {
    fn from(err: rusqlite::Error) -> Self {
        Self::Sqlite(err)
    }
}

/// Stores `record`, or skips it when the store holds it exactly so.
fn take(tx: &Connection, record: &Record, done: &mut Imported) -> Result<(), Taken> {
    let inserted = tx
        .prepare_cached(
        "INSERT INTO message (id, direction, sender, key, to_kind, address, text, state, reason,
         outcome, basis, msg_id, session_id, session_name, in_reply_to, inferred, attempts,
         created_at_ms, expires_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)
         ON CONFLICT (id) DO NOTHING",
    )?
    .execute(params![
        record.id,
        record.direction,
        record.from,
        record.key,
        record.to_kind,
        record.to,
        record.text,
        record.state,
        record.reason,
        record.receipt,
        record.receipt_basis,
        record.msg_id,
        record.session_id,
        record.session_name,
        record.in_reply_to,
        record.inferred,
        record.attempts,
        ms(record.created_at_ms),
        ms(record.expires_at_ms),
    ])
    .map_err(|err| match err {
        // The same sender's key twice: another message's.
        rusqlite::Error::SqliteFailure(e, _)
            if e.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            Taken::Other(format!(
                "the key {:?} of sender {:?} is another message's in the store",
                record.key.as_deref().unwrap_or_default(),
                record.from
            ))
        }
        err => Taken::Sqlite(err),
    })?;
    if inserted == 0 {
        // Its id is the store's already: the same record, or a conflict.
        let same = row::load(tx, &record.id)?.is_some_and(|m| Record::from(&m) == *record);
        if !same {
            return Err(Taken::Other(format!(
                "the store holds message {} already, with other content",
                record.id
            )));
        }
        done.skipped += 1;
        return Ok(());
    }
    let seq = tx.last_insert_rowid();
    let mut change = tx.prepare_cached(
        "INSERT INTO change (message, n, at_ms, state, outcome, basis, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (n, step) in (0_i64..).zip(&record.timeline) {
        change.execute(params![
            seq,
            n,
            ms(step.at_ms),
            step.state,
            step.receipt,
            step.receipt_basis,
            step.detail
        ])?;
    }
    done.imported += 1;
    Ok(())
}

/// Why a record cannot be taken.
struct Unfit(String);

/// Whether `record` holds only what a store can: its words from claude-peers'
/// vocabularies, an id as a store makes them, a receipt with its basis.
fn check(record: &Record) -> Result<(), Unfit> {
    let id_ok = (1..=64).contains(&record.id.len())
        && record
            .id
            .bytes()
            .all(|b| b.is_ascii_digit() || b.is_ascii_lowercase());
    if !id_ok {
        return Err(Unfit(format!(
            "{:?} is not a post id (lowercase letters and digits)",
            record.id
        )));
    }
    let known = |what: &str, word: &str, ok: bool| {
        if ok {
            Ok(())
        } else {
            Err(Unfit(format!(
                "{word:?} is no {what} a claude-peers writes"
            )))
        }
    };
    known(
        "direction",
        &record.direction,
        Direction::from_name(&record.direction).is_some(),
    )?;
    known(
        "kind of address",
        &record.to_kind,
        AddressKind::from_name(&record.to_kind).is_some(),
    )?;
    let receipt = |outcome: &Option<String>, basis: &Option<String>| match (outcome, basis) {
        (None, None) => Ok(()),
        (Some(outcome), Some(basis)) => {
            known("receipt", outcome, Outcome::from_name(outcome).is_some())?;
            known("receipt basis", basis, Basis::from_name(basis).is_some())
        }
        _ => Err(Unfit(
            "a receipt needs its basis, and a basis its receipt".to_owned(),
        )),
    };
    receipt(&record.receipt, &record.receipt_basis)?;
    for state in std::iter::once(&record.state).chain(record.timeline.iter().map(|c| &c.state)) {
        known("state", state, State::from_name(state).is_some())?;
    }
    for change in &record.timeline {
        if let Some(outcome) = &change.receipt {
            known("receipt", outcome, Outcome::from_name(outcome).is_some())?;
        }
        if let Some(basis) = &change.receipt_basis {
            known("receipt basis", basis, Basis::from_name(basis).is_some())?;
        }
    }
    if record.state == State::Sending.as_str() {
        return Err(Unfit(format!(
            "message {} was being sent when it was exported: export it again once it is not",
            record.id
        )));
    }
    Ok(())
}
