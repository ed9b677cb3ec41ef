//! The store's file and schema: what is refused before SQLite writes a byte, and the
//! migrations that bring an older store up to date.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};

use std::path::Path;

use rusqlite::Connection;
use rustix::fs::{Mode, OFlags};

use crate::Error;

/// Marks the file as this project's store (`PRAGMA application_id`): "cpst".
const APPLICATION_ID: i64 = 0x6370_7374;

/// The trigger that indexes each new text: also what an import drops while it writes, and
/// makes again once it has indexed what it wrote at once (a trigger indexes one text a
/// statement, flushing the index each time).
macro_rules! text_insert_trigger {
    () => {
        "
CREATE TRIGGER message_text_insert AFTER INSERT ON message BEGIN
    INSERT INTO message_text (rowid, text) VALUES (new.seq, new.text);
END;
"
    };
}

/// See [`text_insert_trigger`].
pub(super) const TEXT_INSERT_TRIGGER: &str = text_insert_trigger!();

/// Each schema version's migration from the one before; the store's `user_version` is
/// how many have run. Append only: a released migration is never changed.
const MIGRATIONS: [&str; 3] = [
    r"
CREATE TABLE message (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    sender TEXT NOT NULL,
    key TEXT,
    to_kind TEXT NOT NULL,
    address TEXT NOT NULL,
    text TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    outcome TEXT,
    basis TEXT,
    msg_id TEXT,
    session_id TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    not_before_ms INTEGER NOT NULL DEFAULT 0,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    UNIQUE (sender, key)
);
CREATE INDEX message_open ON message (seq) WHERE state IN ('waiting', 'sending', 'unknown');
CREATE TABLE change (
    message INTEGER NOT NULL REFERENCES message (seq) ON DELETE CASCADE,
    at_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    basis TEXT,
    detail TEXT
);
CREATE INDEX change_message ON change (message);
",
    r"
ALTER TABLE message ADD COLUMN attempt_pid INTEGER;
ALTER TABLE message ADD COLUMN attempt_start TEXT;
ALTER TABLE message ADD COLUMN attempt_address TEXT;
ALTER TABLE message ADD COLUMN attempt_transcript_len INTEGER;
CREATE INDEX message_msg_id ON message (msg_id) WHERE msg_id IS NOT NULL;
",
    // History: messages in as well as out, what each answers, the other session's name,
    // the full-text index of every text (the texts themselves are not copied), and the
    // timeline kept in each message's order without an index of its own.
    concat!(
        r"
ALTER TABLE message ADD COLUMN direction TEXT NOT NULL DEFAULT 'out';
ALTER TABLE message ADD COLUMN session_name TEXT;
ALTER TABLE message ADD COLUMN in_reply_to TEXT;
ALTER TABLE message ADD COLUMN inferred INTEGER NOT NULL DEFAULT 0;
CREATE INDEX message_session ON message (session_id) WHERE session_id IS NOT NULL;
CREATE INDEX message_session_name ON message (session_name) WHERE session_name IS NOT NULL;
CREATE INDEX message_in_reply_to ON message (in_reply_to) WHERE in_reply_to IS NOT NULL;
CREATE VIRTUAL TABLE message_text USING fts5 (
    text, content = 'message', content_rowid = 'seq', columnsize = 0
);
INSERT INTO message_text (message_text) VALUES ('rebuild');
",
        text_insert_trigger!(),
        r"
CREATE TRIGGER message_text_delete AFTER DELETE ON message BEGIN
    INSERT INTO message_text (message_text, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TRIGGER message_text_fixed BEFORE UPDATE OF text ON message BEGIN
    SELECT RAISE (ABORT, 'a message text never changes');
END;
CREATE TABLE change_by_message (
    message INTEGER NOT NULL REFERENCES message (seq) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    at_ms INTEGER NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    basis TEXT,
    detail TEXT,
    PRIMARY KEY (message, n)
) WITHOUT ROWID;
INSERT INTO change_by_message
    SELECT message, row_number() OVER (PARTITION BY message ORDER BY rowid) - 1,
           at_ms, state, outcome, basis, detail
    FROM change;
DROP TABLE change;
ALTER TABLE change_by_message RENAME TO change;
"
    ),
];

/// The newest schema version this build knows.
#[allow(
    clippy::cast_possible_wrap,
    reason = "a handful of migrations, never near i64::MAX"
)]
pub(crate) const LATEST: i64 = MIGRATIONS.len() as i64;

/// The SQLite header's first bytes.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Makes sure `path` is a store file this user may open, creating it 0600 when there is
/// none: a regular file of this user (never through a link), SQLite by its header, and
/// no shorter than its header says. Nothing is written to a file that fails.
pub(crate) fn check_file(path: &Path) -> Result<(), Error> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let not_a_store = |why: String| Error::NotAStore {
        path: path.to_owned(),
        why,
    };
    let meta = match fs::symlink_metadata(path) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            return match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)
            {
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => check_file(path),
                other => other.map(drop).map_err(io),
            };
        }
        other => other.map_err(io)?,
    };
    if !meta.is_file() {
        return Err(not_a_store("not a regular file".to_owned()));
    }
    let uid = rustix::process::getuid().as_raw();
    if meta.uid() != uid {
        return Err(not_a_store(format!(
            "it belongs to uid {}, not to this user",
            meta.uid()
        )));
    }
    if meta.len() > 0 {
        check_header(path, meta.len())?;
    }
    if meta.mode() & 0o077 != 0 {
        fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(())
}

/// The header of a non-empty file: SQLite's, and not cut off. Its size is trusted only
/// where SQLite trusts it (the change counter matches) and no write-ahead log beside it
/// may hold the rest.
fn check_header(path: &Path, len: u64) -> Result<(), Error> {
    let mut header = [0_u8; 100];
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let read = rustix::fs::open(path, flags, Mode::empty())
        .map_err(std::io::Error::from)
        .and_then(|fd| read_up_to(File::from(fd), &mut header));
    let read = read.map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    if read < header.len() || &header[..16] != MAGIC {
        return Err(Error::NotAStore {
            path: path.to_owned(),
            why: "it is not an SQLite database".to_owned(),
        });
    }
    let be32 = |at: usize| {
        u32::from_be_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]])
    };
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536,
        size => u64::from(size),
    };
    let pages = u64::from(be32(28));
    let trusted = be32(24) == be32(92) && pages > 0;
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    let wal_empty = fs::symlink_metadata(&wal).map_or(true, |m| m.len() == 0);
    let expected = pages * page_size;
    if trusted && wal_empty && len < expected {
        return Err(Error::Truncated {
            path: path.to_owned(),
            len,
            expected,
        });
    }
    Ok(())
}

fn read_up_to(mut file: File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Readies an open store: refuses another program's database and a newer schema before
/// anything is written, then switches to the write-ahead log with every commit on disk
/// before it returns, and runs the migrations it lacks, each in its own transaction.
pub(crate) fn prepare(conn: &mut Connection, path: &Path) -> Result<(), Error> {
    let sqlite = super::failed(path);
    let pragma = |conn: &Connection, name: &str| -> Result<i64, Error> {
        conn.pragma_query_value(None, name, |row| row.get(0))
            .map_err(sqlite)
    };
    let application_id = pragma(conn, "application_id")?;
    let version = pragma(conn, "user_version")?;
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |row| row.get(0))
        .map_err(sqlite)?;
    let fresh = application_id == 0 && version == 0 && tables == 0;
    if !fresh && application_id != APPLICATION_ID {
        return Err(Error::NotAStore {
            path: path.to_owned(),
            why: format!("another program's SQLite database (application_id {application_id})"),
        });
    }
    if version > LATEST {
        return Err(Error::Newer {
            path: path.to_owned(),
            version,
            known: LATEST,
        });
    }
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0))
        .map_err(sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::NotAStore {
            path: path.to_owned(),
            why: format!("it cannot use a write-ahead log (journal mode {mode})"),
        });
    }
    conn.pragma_update(None, "synchronous", "FULL")
        .and_then(|()| conn.pragma_update(None, "foreign_keys", true))
        .map_err(sqlite)?;
    for (done, migration) in (version..).zip(
        MIGRATIONS
            .iter()
            .skip(usize::try_from(version).unwrap_or(0)),
    ) {
        let tx = conn.transaction().map_err(sqlite)?;
        tx.execute_batch(migration)
            .and_then(|()| tx.pragma_update(None, "user_version", done + 1))
            .and_then(|()| tx.pragma_update(None, "application_id", APPLICATION_ID))
            .and_then(|()| tx.commit())
            .map_err(sqlite)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::os::unix::fs::PermissionsExt;

    use super::*;
    use crate::{LogFilter, Store};

    #[test]
    fn a_store_of_schema_2_keeps_its_timelines_in_order_and_its_texts_become_searchable() {
        let dir = tempfile::tempdir().unwrap();
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().join("post.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "journal_mode", "WAL").unwrap();
            for migration in &MIGRATIONS[..2] {
                conn.execute_batch(migration).unwrap();
            }
            conn.pragma_update(None, "user_version", 2).unwrap();
            conn.pragma_update(None, "application_id", APPLICATION_ID)
                .unwrap();
            conn.execute_batch(
                "INSERT INTO message (id, sender, to_kind, address, text, state, created_at_ms, expires_at_ms)
                 VALUES ('00000000000000a1', 'bot', 'name', 'ada', 'the build is green', 'delivered', 1, 2);
                 INSERT INTO change (message, at_ms, state, detail) VALUES
                     (1, 1, 'waiting', 'posted'), (1, 3, 'sending', 'attempt 1'), (1, 2, 'delivered', 'to s');",
            )
            .unwrap();
        }
        let store = Store::open(&path).unwrap();
        let message = store.get("00000000000000a1").unwrap().unwrap();
        let details: Vec<_> = message
            .timeline
            .iter()
            .map(|c| c.detail.clone().unwrap())
            .collect();
        assert_eq!(
            details,
            ["posted", "attempt 1", "to s"],
            "in the order written"
        );
        let filter = LogFilter {
            search: Some("green".to_owned()),
            ..LogFilter::default()
        };
        let mut found = 0;
        store
            .log(&filter, |_| {
                found += 1;
                ControlFlow::Continue(())
            })
            .unwrap();
        assert_eq!(found, 1);
    }
}
