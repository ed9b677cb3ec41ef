//! Messages to and from rows: reading one with its timeline, and writing a step.

use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read};
use std::ops::ControlFlow;

use claude_peer_deliver::{Basis, Outcome, Receipt};
use rusqlite::{Connection, Row, params};

use crate::message::{
    Address, AddressKind, Attempt, Change, Direction, Message, SenderProcess, State, Step,
};

/// The columns [`message`] reads, in its order.
pub(super) const MESSAGE_COLUMNS: &str = "seq, id, sender, key, to_kind, address, text, state, reason, outcome, basis, msg_id, session_id, attempts, created_at_ms, expires_at_ms, not_before_ms, attempt_pid, attempt_start, attempt_address, attempt_transcript_len, direction, session_name, in_reply_to, inferred";

/// A time or count as SQLite keeps it (a signed 64-bit integer).
pub(super) fn ms(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn unsigned(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

/// A new post id: 8 bytes of the kernel's randomness in hex, unique across stores (so
/// records moved between machines keep their ids).
pub(super) fn new_id() -> io::Result<String> {
    let mut bytes = [0_u8; 8];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    }))
}

/// A text column that must hold one of a vocabulary's words.
fn word<T>(row: &Row<'_>, at: usize, parse: fn(&str) -> Option<T>) -> rusqlite::Result<T> {
    let text: String = row.get(at)?;
    parse(&text).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            at,
            rusqlite::types::Type::Text,
            format!("`{text}` is not a word this claude-peers knows").into(),
        )
    })
}

/// A receipt from its two columns, when both are set.
fn receipt(row: &Row<'_>, outcome: usize, basis: usize) -> rusqlite::Result<Option<Receipt>> {
    let set: Option<String> = row.get(outcome)?;
    if set.is_none() {
        return Ok(None);
    }
    Ok(Some(Receipt {
        outcome: word(row, outcome, Outcome::from_name)?,
        basis: word(row, basis, Basis::from_name)?,
    }))
}

/// The message of a row of [`MESSAGE_COLUMNS`], its timeline not yet read.
fn message(row: &Row<'_>) -> rusqlite::Result<Message> {
    Ok(Message {
        id: row.get(1)?,
        seq: unsigned(row.get(0)?),
        direction: word(row, 21, Direction::from_name)?,
        from: row.get(2)?,
        key: row.get(3)?,
        to: Address::new(word(row, 4, AddressKind::from_name)?, row.get(5)?),
        text: row.get(6)?,
        state: word(row, 7, State::from_name)?,
        reason: row.get(8)?,
        receipt: receipt(row, 9, 10)?,
        msg_id: row.get(11)?,
        session_id: row.get(12)?,
        session_name: row.get(22)?,
        in_reply_to: row.get(23)?,
        inferred: row.get(24)?,
        attempts: u32::try_from(row.get::<_, i64>(13)?).unwrap_or(u32::MAX),
        created_at_ms: unsigned(row.get(14)?),
        expires_at_ms: unsigned(row.get(15)?),
        not_before_ms: unsigned(row.get(16)?),
        attempt: attempt(row)?,
        timeline: Vec::new(),
    })
}

/// The last attempt, from the receiving session and the `attempt_` columns.
fn attempt(row: &Row<'_>) -> rusqlite::Result<Option<Attempt>> {
    let attempts: i64 = row.get(13)?;
    let Some(session_id) = row.get::<_, Option<String>>(12)?.filter(|_| attempts > 0) else {
        return Ok(None);
    };
    let pid: Option<i64> = row.get(17)?;
    let start: Option<String> = row.get(18)?;
    let address: Option<String> = row.get(19)?;
    let sender = match (pid.and_then(|pid| u32::try_from(pid).ok()), start) {
        (Some(pid), Some(start_token)) => Some(SenderProcess {
            pid,
            start_token,
            address,
        }),
        _ => None,
    };
    Ok(Some(Attempt {
        session_id,
        sender,
        transcript_len: row.get::<_, Option<i64>>(20)?.map(unsigned),
    }))
}

/// The timeline of the message `seq`, oldest first.
fn timeline(conn: &Connection, seq: u64) -> rusqlite::Result<Vec<Change>> {
    let mut statement = conn.prepare_cached(
        "SELECT state, at_ms, outcome, basis, detail FROM change WHERE message = ?1 ORDER BY n",
    )?;
    let changes = statement.query_map([ms(seq)], |row| {
        Ok(Change {
            state: word(row, 0, State::from_name)?,
            at_ms: unsigned(row.get(1)?),
            receipt: receipt(row, 2, 3)?,
            detail: row.get(4)?,
        })
    })?;
    changes.collect()
}

/// The message `id` with its timeline, if there is one.
pub(super) fn load(conn: &Connection, id: &str) -> rusqlite::Result<Option<Message>> {
    let sql = format!("SELECT {MESSAGE_COLUMNS} FROM message WHERE id = ?1");
    let mut statement = conn.prepare_cached(&sql)?;
    let mut rows = statement.query([id])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let mut message = message(row)?;
    message.timeline = timeline(conn, message.seq)?;
    Ok(Some(message))
}

/// How many columns [`MESSAGE_COLUMNS`] names.
const COLUMNS: usize = 25;

/// Runs `sql` (selecting [`MESSAGE_COLUMNS`], then perhaps the text as a search marked
/// it) and hands each message, with its timeline, to `each` as it is read, until it
/// breaks.
pub(super) fn each<P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    args: P,
    mut each: impl FnMut(Message, Option<String>) -> ControlFlow<()>,
) -> rusqlite::Result<()> {
    let mut statement = conn.prepare_cached(sql)?;
    let marked = statement.column_count() > COLUMNS;
    let mut rows = statement.query(args)?;
    while let Some(row) = rows.next()? {
        let mut message = message(row)?;
        message.timeline = timeline(conn, message.seq)?;
        let marked = if marked { row.get(COLUMNS)? } else { None };
        if each(message, marked).is_break() {
            break;
        }
    }
    Ok(())
}

/// Whether `step` would record nothing new: the reason the message already waits for,
/// the receipt it already has.
pub(super) fn changes_nothing(message: &Message, step: &Step) -> bool {
    match step {
        Step::Wait(reason) => {
            message.state == State::Waiting && message.reason.as_deref() == Some(reason)
        }
        Step::Receipt(receipt) => message.receipt == Some(*receipt),
        _ => false,
    }
}

/// Writes `step` to the message `id` (now `to`) and its timeline.
pub(super) fn apply(
    conn: &Connection,
    id: &str,
    step: &Step,
    to: State,
    attempts: u32,
    at_ms: u64,
) -> rusqlite::Result<()> {
    let state = to.as_str();
    let (reason, detail): (Option<String>, Option<String>) = match step {
        Step::Wait(why)
        | Step::Fail { reason: why, .. }
        | Step::Refuse(why)
        | Step::Unknown(why) => (Some(why.clone()), Some(why.clone())),
        Step::Send(attempt) => (
            None,
            Some(format!(
                "attempt {} to session {}",
                attempts.saturating_add(1),
                attempt.session_id
            )),
        ),
        Step::Deliver { session_id, .. } => (None, Some(format!("to session {session_id}"))),
        Step::Note(what) => (None, Some(what.clone())),
        Step::Receipt(receipt) if receipt.outcome == Outcome::Refused => {
            let why = "its receiver refused it on arrival".to_owned();
            (Some(why.clone()), Some(why))
        }
        Step::Receipt(_) | Step::Cancel => (None, None),
        Step::Expire => {
            let why = "not delivered before its expiry".to_owned();
            (Some(why.clone()), Some(why))
        }
        Step::Retry => (
            Some("asked to retry".to_owned()),
            Some("asked to retry".to_owned()),
        ),
    };
    let receipt = match step {
        Step::Deliver { receipt, .. } => *receipt,
        Step::Receipt(receipt) => Some(*receipt),
        _ => None,
    };
    let (outcome, basis) = (
        receipt.map(|r| r.outcome.as_str()),
        receipt.map(|r| r.basis.as_str()),
    );
    match step {
        Step::Receipt(_) => conn.execute(
            "UPDATE message SET state = ?2, outcome = ?3, basis = ?4, reason = coalesce(?5, reason) WHERE id = ?1",
            params![id, state, outcome, basis, reason],
        )?,
        Step::Deliver {
            session_id,
            session_name,
            msg_id,
            ..
        } => conn.execute(
            "UPDATE message SET state = ?2, reason = NULL, outcome = ?3, basis = ?4, session_id = ?5, msg_id = ?6,
             session_name = coalesce(?7, session_name) WHERE id = ?1",
            params![id, state, outcome, basis, session_id, msg_id, session_name],
        )?,
        Step::Note(_) => 0,
        Step::Fail { retry_at_ms, .. } => conn.execute(
            "UPDATE message SET state = ?2, reason = ?3, not_before_ms = ?4 WHERE id = ?1",
            params![id, state, reason, ms(*retry_at_ms)],
        )?,
        Step::Send(attempt) => {
            let sender = attempt.sender.as_ref();
            conn.execute(
                "UPDATE message SET state = ?2, reason = NULL, attempts = attempts + 1, session_id = ?3,
                 attempt_pid = ?4, attempt_start = ?5, attempt_address = ?6, attempt_transcript_len = ?7
                 WHERE id = ?1",
                params![
                    id,
                    state,
                    attempt.session_id,
                    sender.map(|s| s.pid),
                    sender.map(|s| &s.start_token),
                    sender.and_then(|s| s.address.as_ref()),
                    attempt.transcript_len.map(ms),
                ],
            )?
        }
        _ => conn.execute(
            "UPDATE message SET state = ?2, reason = ?3 WHERE id = ?1",
            params![id, state, reason],
        )?,
    };
    conn.execute(
        "INSERT INTO change (message, n, at_ms, state, outcome, basis, detail)
         SELECT seq, (SELECT count(*) FROM change WHERE message = seq), ?2, ?3, ?4, ?5, ?6
         FROM message WHERE id = ?1",
        params![id, ms(at_ms), state, outcome, basis, detail],
    )?;
    Ok(())
}
