//! `list`: the live sessions, or with `--all` every record and its verdict.

use std::fmt::Write as _;
use std::io::{self, Write};

use claude_peer_registry::{ClaudeHome, Liveness};
use claude_peer_resolve::{Entry, Scope};

use serde_json::Value;

use crate::error::{Exit, Failure};
use crate::json::SessionJson;
use crate::ops::remote::Hosts;
use crate::ops::{Context, sessions};
use crate::output::{JsonArray, Output};
use crate::table::{Column, Table, field, now_ms, status_of_json, status_text};

// `list`'s flags (its help is the command's, in `cli.rs`).
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Every record in the registry, each with its liveness verdict and reason
    #[arg(long)]
    all: bool,
}

/// How many rows of a human `list` set its column widths: every row of any real
/// listing, while `list --all` over a huge registry of leftovers still prints as it goes.
const WIDTH_SAMPLE: usize = 1000;

/// Prints the entries as they are judged: JSON element by element, or a table whose
/// widths come from its first [`WIDTH_SAMPLE`] rows. Nothing else is held.
pub(crate) fn exec(ctx: &Context, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let scope = if args.all { Scope::All } else { Scope::Live };
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    sessions::list(ctx, scope, |entries| {
        out.warn_all(entries.warnings());
        if out.is_json() {
            json_list(&mut stdout, entries)
        } else {
            human_list(&mut stdout, &ctx.home, entries, scope, out)
        }
    })??;
    stdout.flush()?;
    Ok(Exit::Success)
}

/// `list` of every host, asked at once: one array (or table) of them all, each session
/// with its `host`, in the hosts' order; a host that cannot answer is named on stderr and
/// makes the exit 1, the others still listed.
pub(crate) fn exec_hosts(hosts: &Hosts, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let mut words = vec!["list".into()];
    if args.all {
        words.push("--all".into());
    }
    let (sessions, failed) = hosts.arrays(&words);
    for err in &failed {
        out.warn(&err.to_string());
    }
    if out.is_json() {
        out.json(&sessions)?;
    } else {
        let scope = if args.all { Scope::All } else { Scope::Live };
        let rows: Vec<Vec<String>> = sessions.iter().map(|s| host_row(s, scope)).collect();
        let mut columns = vec![Column::plain("HOST")];
        columns.extend(columns_of(scope));
        let table = Table::measure(&columns, &rows, out.style);
        let mut text = table.header();
        for row in &rows {
            text.push_str(&table.row(row));
        }
        let plural = if sessions.len() == 1 { "" } else { "s" };
        let _ = writeln!(text, "{} session{plural}.", sessions.len());
        out.text(&text)?;
    }
    Ok(if failed.is_empty() {
        Exit::Success
    } else {
        Exit::Error
    })
}

/// A host's session (its JSON) as a row of `list --host`'s table: `list`'s cells, its
/// host first.
fn host_row(session: &Value, scope: Scope) -> Vec<String> {
    let text = |key: &str| session[key].as_str();
    let or_dash = |key: &str| text(key).unwrap_or("-").to_owned();
    let status = if session["session_id"].is_null() {
        "-".to_owned()
    } else {
        status_of_json(session, now_ms())
    };
    let mut row = vec![
        or_dash("host"),
        text("name")
            .or_else(|| text("file").and_then(|f| f.rsplit('/').next()))
            .unwrap_or_default()
            .to_owned(),
        status,
        or_dash("cwd"),
        session["pid"]
            .as_u64()
            .map_or_else(|| "-".to_owned(), |p| p.to_string()),
        or_dash("tmux"),
        if session["addressable"] == true {
            "yes"
        } else {
            "no"
        }
        .to_owned(),
    ];
    if scope == Scope::All {
        row.push(or_dash("liveness"));
        row.push(or_dash("reason"));
    }
    row
}

/// `list`'s columns, with `--all` its verdict's too.
fn columns_of(scope: Scope) -> Vec<Column> {
    let mut columns = vec![
        Column::plain("NAME"),
        Column::status("STATUS"),
        Column::plain("CWD"),
        Column::plain("PID"),
        Column::plain("TMUX"),
        Column::plain("MSG"),
    ];
    if scope == Scope::All {
        columns.extend([Column::plain("VERDICT"), Column::plain("REASON")]);
    }
    columns
}

/// Writes `sessions` as one JSON array and a newline, element by element: the very
/// bytes `serde_json` writes for the whole array collected.
fn json_list(to: &mut impl Write, sessions: impl Iterator<Item = Entry>) -> io::Result<()> {
    let mut array = JsonArray::default();
    for session in sessions {
        array.push(to, &SessionJson::new(&session))?;
    }
    array.end(to)
}

fn human_list(
    to: &mut impl Write,
    home: &ClaudeHome,
    sessions: impl Iterator<Item = Entry>,
    scope: Scope,
    out: &Output,
) -> io::Result<()> {
    let now = now_ms();
    let columns = columns_of(scope);
    let (mut records, mut live) = (0_usize, 0_usize);
    let mut rows = sessions.map(|s| {
        records += 1;
        live += usize::from(s.verdict.liveness == Liveness::Live);
        row(&s, scope, now)
    });
    let sample: Vec<Vec<String>> = rows.by_ref().take(WIDTH_SAMPLE).collect();
    if sample.is_empty() {
        let dir = home.sessions_dir();
        let shown = field(&dir.to_string_lossy()).into_owned();
        let sentence = if dir.exists() {
            format!("No live Claude Code sessions (registry: {shown}).\n")
        } else {
            format!("No Claude Code sessions: {shown} does not exist.\n")
        };
        return to.write_all(sentence.as_bytes());
    }
    let columns = Table::measure(&columns, &sample, out.style);
    to.write_all(columns.header().as_bytes())?;
    for row in &sample {
        to.write_all(columns.row(row).as_bytes())?;
    }
    for row in rows {
        to.write_all(columns.row(&row).as_bytes())?;
    }
    if scope == Scope::All {
        writeln!(to, "{records} records, {live} live.")
    } else {
        let plural = if live == 1 { "" } else { "s" };
        writeln!(to, "{live} live session{plural}.")
    }
}

/// One session's cells in `list`'s table; every record's also has its verdict.
fn row(s: &Entry, scope: Scope, now: u64) -> Vec<String> {
    let record = s.record.as_ref();
    let or_dash = |v: Option<&str>| v.unwrap_or("-").to_owned();
    let mut row = vec![
        record.and_then(|r| r.display_name()).map_or_else(
            || {
                s.file
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            },
            str::to_owned,
        ),
        status_text(record, now),
        or_dash(record.and_then(|r| r.cwd.as_deref())),
        s.pid.map_or_else(|| "-".to_owned(), |p| p.to_string()),
        or_dash(record.and_then(|r| r.tmux.as_deref())),
        if s.addressability.is_addressable() {
            "yes"
        } else {
            "no"
        }
        .to_owned(),
    ];
    if scope == Scope::All {
        row.push(s.verdict.liveness.as_str().to_owned());
        row.push(or_dash(s.verdict.reason.as_deref()));
    }
    row
}

#[cfg(test)]
mod tests {
    use std::fs;

    use claude_peer_resolve::{Discovery, Scope};
    use claude_peer_testkit::process::Children;
    use claude_peer_testkit::registry::{Machine, Registry};

    use super::json_list;
    use crate::json::SessionJson;

    #[test]
    fn the_streamed_json_list_is_the_collected_array_byte_for_byte() {
        let children = Children::spawn(3).unwrap();
        let machine = Machine::learn();
        let registry = Registry::generate(&machine, 40, &children).unwrap();
        let dead = |i| format!("{}.json", machine.dead_pid(i));
        // Every kind of entry: live, leftovers, a torn file, a rejected name, a FIFO.
        fs::write(registry.sessions.join(dead(100)), "{\"sessionId\":").unwrap();
        fs::write(registry.sessions.join("007.json"), "{}").unwrap();
        fs::write(registry.sessions.join("x.json"), "{}").unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            registry.sessions.join(dead(101)),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let discovery = Discovery::os();
        for scope in [Scope::All, Scope::Live] {
            let scan = discovery.scan(&registry.home, scope).unwrap();
            let collected: Vec<SessionJson<'_>> =
                scan.entries.iter().map(SessionJson::new).collect();
            let mut expected = serde_json::to_vec(&collected).unwrap();
            expected.push(b'\n');

            let mut streamed = Vec::new();
            json_list(
                &mut streamed,
                discovery.entries(&registry.home, scope).unwrap(),
            )
            .unwrap();
            assert_eq!(
                String::from_utf8(streamed).unwrap(),
                String::from_utf8(expected).unwrap(),
                "{scope:?}: streaming must not change a byte"
            );
        }
        let (mut empty, no_home) = (
            Vec::new(),
            claude_peer_registry::ClaudeHome::new("/nonexistent"),
        );
        json_list(&mut empty, discovery.entries(&no_home, Scope::All).unwrap()).unwrap();
        assert_eq!(empty, b"[]\n", "no registry is the empty array");
    }
}
