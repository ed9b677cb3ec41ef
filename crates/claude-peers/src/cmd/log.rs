//! `log`: the history, every message out and in, read from the store (no post office
//! needed): newest first with timelines, a conversation, a search, a thread; and
//! `--export` / `--import` of it as JSON lines.
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use std::ffi::OsString;
use std::io::{self, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use claude_peer_post::protocol::Record;
use claude_peer_post::{Direction, LogFilter, Order, State, Store, default_store_path};
use serde::Serialize;

use crate::args::{Span, since};
use crate::cmd::outbox::{Printer, Style};
use crate::error::{Exit, Failure};
use crate::ops;
use crate::ops::remote::Hosts;
use crate::output::{Output, passed_on};
use crate::table::now_ms;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Only messages to this session id, name or directory
    #[arg(long, value_name = "TARGET")]
    to: Option<String>,
    /// The conversation with one session (its id or name), both ways, oldest first
    #[arg(long, value_name = "TARGET")]
    with: Option<String>,
    /// Full-text search of the texts, newest first, matches marked: words, "a phrase",
    /// word*, AND, OR, NOT, ( )
    #[arg(long, value_name = "TEXT")]
    search: Option<String>,
    /// A message and everything that answered it, transitively, oldest first
    #[arg(long, value_name = "ID")]
    thread: Option<String>,
    /// Only messages in (replies and others to our senders)
    #[arg(long = "in", conflicts_with = "outgoing")]
    incoming: bool,
    /// Only messages out
    #[arg(long = "out")]
    outgoing: bool,
    /// Only messages posted within this long: 90s, 10m, 2h, 3d
    #[arg(long, value_name = "DURATION", value_parser = since)]
    since: Option<Span>,
    /// Only messages in this state
    #[arg(long, value_name = "STATE", value_parser = state)]
    state: Option<State>,
    /// At most this many (the newest)
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// Write the records picked (every one without filters) as JSON lines, oldest first
    #[arg(long, conflicts_with_all = ["search", "import"])]
    export: bool,
    /// Read records written by --export from FILE (- for stdin), skipping those the
    /// store has: all or, at a bad line, none
    #[arg(long, value_name = "FILE", conflicts_with_all = ["to", "with", "search", "thread", "incoming", "outgoing", "since", "state", "limit"])]
    import: Option<PathBuf>,
    /// The store [default: $XDG_STATE_HOME/claude-peers/post.db]
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
}

impl Args {
    /// These flags as a host's `log` takes them (not `--store`, `--import`: this
    /// machine's paths).
    fn words(&self) -> Vec<OsString> {
        let mut words: Vec<OsString> = vec!["log".into()];
        let text = [
            ("--to", self.to.clone()),
            ("--with", self.with.clone()),
            ("--search", self.search.clone()),
            ("--thread", self.thread.clone()),
            (
                "--since",
                self.since.map(|span| format!("{}s", span.0.as_secs_f64())),
            ),
            ("--state", self.state.map(|state| state.as_str().to_owned())),
            ("--limit", self.limit.map(|n| n.to_string())),
        ];
        for (flag, value) in text {
            if let Some(value) = value {
                // `--flag=value`: a value that starts with `-` stays a value.
                words.push(format!("{flag}={value}").into());
            }
        }
        for (given, flag) in [
            (self.incoming, "--in"),
            (self.outgoing, "--out"),
            (self.export, "--export"),
        ] {
            if given {
                words.push(flag.into());
            }
        }
        words
    }
}

/// `log --host`: each host's history, one JSON array of them all in time order (newest
/// first, or oldest first for a conversation or thread), each record with its host, at
/// most `--limit` in all; in words (and `--export`'s lines) each host's as it printed
/// them.
pub(crate) fn exec_hosts(hosts: &Hosts, args: &Args, out: &Output) -> Result<Exit, Failure> {
    if args.import.is_some() || args.store.is_some() {
        return Err(Failure::usage(
            "no_host",
            "--import and --store name this machine's files: they take no --host",
        ));
    }
    let words = args.words();
    if args.export || !out.is_json() {
        return passed_on(out, hosts, &words);
    }
    let (mut records, failed) = hosts.arrays(&words);
    for err in &failed {
        out.warn(&err.to_string());
    }
    records.sort_by_key(|record| record["created_at_ms"].as_u64());
    if args.with.is_none() && args.thread.is_none() {
        records.reverse();
    }
    if let Some(limit) = args.limit.and_then(|n| usize::try_from(n).ok()) {
        records.truncate(limit);
    }
    out.json(&records)?;
    Ok(if failed.is_empty() {
        Exit::Success
    } else {
        Exit::Error
    })
}

fn state(name: &str) -> Result<State, String> {
    State::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = State::ALL.iter().map(|s| s.as_str()).collect();
        format!("`{name}` is no state ({})", names.join(", "))
    })
}

pub(crate) fn exec(args: Args, out: &Output) -> Result<Exit, Failure> {
    let path = match &args.store {
        Some(path) => ops::absolute(path.clone()),
        None => default_store_path().map_err(ops::Error::from)?,
    };
    let mut store = Store::open(&path).map_err(ops::Error::from)?;
    if let Some(file) = &args.import {
        return import(&mut store, file, out);
    }
    let chat = args.with.is_some() || args.thread.is_some();
    let filter = LogFilter {
        to: args.to,
        with: args.with,
        search: args.search,
        thread: args.thread,
        direction: match (args.incoming, args.outgoing) {
            (true, _) => Some(Direction::In),
            (_, true) => Some(Direction::Out),
            _ => None,
        },
        state: args.state,
        since_ms: args.since.map(|span| {
            let back = u64::try_from(span.0.as_millis()).unwrap_or(u64::MAX);
            now_ms().saturating_sub(back)
        }),
        limit: args.limit,
        order: if chat || args.export {
            Order::OldestFirst
        } else {
            Order::NewestFirst
        },
    };
    if args.export {
        return export(&store, &filter);
    }
    let mut printer = Printer::new(out, if chat { Style::Chat } else { Style::Log });
    store
        .log(&filter, |logged| {
            printer.print(&Record::from(&logged.message), logged.marked.as_deref());
            ControlFlow::Continue(())
        })
        .map_err(ops::Error::from)?;
    printer.end()?;
    Ok(Exit::Success)
}

/// `--export`: a record a line, as `--json` shows each.
fn export(store: &Store, filter: &LogFilter) -> Result<Exit, Failure> {
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    let mut written = Ok(());
    store
        .log(filter, |logged| {
            written = serde_json::to_writer(&mut stdout, &Record::from(&logged.message))
                .map_err(io::Error::from)
                .and_then(|()| stdout.write_all(b"\n"));
            if written.is_ok() {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })
        .map_err(ops::Error::from)?;
    written?;
    stdout.flush()?;
    Ok(Exit::Success)
}

#[derive(Debug, Serialize)]
struct ImportedJson {
    imported: u64,
    skipped: u64,
}

/// `--import FILE`: every line checked, then all stored in one transaction.
fn import(store: &mut Store, file: &PathBuf, out: &Output) -> Result<Exit, Failure> {
    let done = if file.as_os_str() == "-" {
        store.import("stdin", io::stdin().lock())
    } else {
        let opened = std::fs::File::open(file).map_err(|err| {
            Failure::error(
                "import_unreadable",
                format!("cannot read `{}`: {err}", file.display()),
            )
        })?;
        store.import(&format!("`{}`", file.display()), opened)
    };
    let done = done.map_err(ops::Error::from)?;
    if out.is_json() {
        out.json(&ImportedJson {
            imported: done.imported,
            skipped: done.skipped,
        })?;
    } else {
        out.text(&format!(
            "{} imported, {} already in the store.\n",
            done.imported, done.skipped
        ))?;
    }
    Ok(Exit::Success)
}
