//! `outbox`: the messages the post office still holds, oldest first; `outbox cancel` and
//! `outbox retry`. Also how `log` prints records.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::io::{self, Write};

use claude_peer_post::protocol::{Record, Request};
use claude_peer_post::{MARK_END, MARK_START};
use claude_peer_remote::Host;
use serde_json::Value;

use crate::args::ClaudeArg;
use crate::error::{Exit, Failure};
use crate::ops::post::{self, Start};
use crate::ops::remote::{self, HostError, Hosts};
use crate::ops::{self, Context};
use crate::output::{JsonArray, Output, passed_on};
use crate::table::{field, local_time};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Option<Action>,
    #[command(flatten)]
    claude: ClaudeArg,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Cancel waiting or unknown messages: they are never delivered
    Cancel {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
    /// Try unknown messages again (their earlier attempt may have been delivered)
    Retry {
        #[arg(required = true, value_name = "ID")]
        ids: Vec<String>,
    },
}

pub(crate) fn exec(ctx: &Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let start = Start {
        claude: args.claude.path,
    };
    let mut client = post::connect(ctx, Some(&start))?;
    let (ids, step): (Vec<String>, fn(String) -> Request) = match args.action {
        None => {
            let mut printer = Printer::new(out, Style::Outbox);
            client
                .request(&Request::Outbox, |record| printer.print(&record, None))
                .map_err(ops::Error::from)?;
            printer.end()?;
            return Ok(Exit::Success);
        }
        Some(Action::Cancel { ids }) => (ids, |id| Request::Cancel { id }),
        Some(Action::Retry { ids }) => (ids, |id| Request::Retry { id }),
    };
    let mut printer = Printer::new(out, Style::Outbox);
    let mut failed = false;
    for id in ids {
        match client.request(&step(id), |_| {}) {
            Ok(done) => {
                if let Some(record) = done.record {
                    printer.print(&record, None);
                }
            }
            Err(err) => {
                failed = true;
                out.warn(&err.to_string());
            }
        }
    }
    printer.end()?;
    Ok(if failed { Exit::Error } else { Exit::Success })
}

/// `outbox --host`: each host's outbox (or its cancel or retry of `HOST:ID`s, a bare ID
/// on the one host asked), one JSON array of them all, each record with its host; in
/// words, each host's as it printed them.
pub(crate) fn exec_hosts(hosts: &Hosts, args: Args, out: &Output) -> Result<Exit, Failure> {
    let (verb, ids) = match args.action {
        None => (None, Vec::new()),
        Some(Action::Cancel { ids }) => (Some("cancel"), ids),
        Some(Action::Retry { ids }) => (Some("retry"), ids),
    };
    let per_host = hosts.group(&ids).map_err(no_host)?;
    let Some(verb) = verb else {
        let words = ["outbox".into()];
        if !out.is_json() {
            return passed_on(out, hosts, &words);
        }
        let (records, failed) = hosts.arrays(&words);
        return hosts_json(out, &records, &failed);
    };
    let chosen: Vec<Host> = per_host.iter().map(|(host, _)| host.clone()).collect();
    let asked = hosts.ask_each(&chosen, |host| {
        let mut words = vec!["outbox".into(), verb.into()];
        if let Some((_, ids)) = per_host.iter().find(|(h, _)| h == host) {
            words.extend(ids.iter().map(OsString::from));
        }
        (words, Vec::new())
    });
    let (mut records, mut failed) = (Vec::new(), Vec::new());
    for (host, asked) in asked {
        match remote::array(&host, asked) {
            Ok(found) => records.extend(found),
            Err(err) => failed.push(err),
        }
    }
    hosts_json(out, &records, &failed)
}

/// A target (or id) that names none of the hosts asked: a usage error.
pub(crate) fn no_host(target: &str) -> Failure {
    Failure::usage(
        "no_host",
        format!("`{target}` names none of the hosts asked: write HOST:{target}"),
    )
}

/// The records of several hosts in one answer, the hosts that failed named on stderr.
fn hosts_json(out: &Output, records: &[Value], failed: &[HostError]) -> Result<Exit, Failure> {
    for err in failed {
        out.warn(&err.to_string());
    }
    if out.is_json() {
        out.json(&records)?;
    } else {
        for record in records {
            let line = format!(
                "{} {} {}: {}\n",
                field(record["host"].as_str().unwrap_or_default()),
                field(record["id"].as_str().unwrap_or_default()),
                field(record["state"].as_str().unwrap_or_default()),
                field(record["text"].as_str().unwrap_or_default()),
            );
            out.text(&line)?;
        }
    }
    Ok(if failed.is_empty() {
        Exit::Success
    } else {
        Exit::Error
    })
}

/// How records are printed in words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Style {
    /// Where each stands (`outbox`).
    Outbox,
    /// Where each stands, its text and every change (`log`).
    Log,
    /// A line each, as a conversation reads (`log --with`, `--thread`).
    Chat,
}

/// Prints records as they arrive: one JSON array (`--json`), or in words.
pub(crate) struct Printer<'a> {
    out: &'a Output,
    style: Style,
    stdout: io::BufWriter<io::StdoutLock<'static>>,
    json: JsonArray,
    printed: usize,
    failed: Option<io::Error>,
}

impl<'a> Printer<'a> {
    pub(crate) fn new(out: &'a Output, style: Style) -> Self {
        Self {
            out,
            style,
            stdout: io::BufWriter::new(io::stdout().lock()),
            json: JsonArray::default(),
            printed: 0,
            failed: None,
        }
    }

    /// Prints `record`; `marked`, its text as a search marked it, is shown in its place.
    pub(crate) fn print(&mut self, record: &Record, marked: Option<&str>) {
        if self.failed.is_some() {
            return;
        }
        let written = if self.out.is_json() {
            self.json.push(&mut self.stdout, record)
        } else {
            let text = marked.map_or_else(
                || field(&record.text).into_owned(),
                |marked| mark(marked, self.out.style),
            );
            let words = match self.style {
                Style::Chat => chat(record, &text),
                style => human(record, style, &text),
            };
            self.stdout.write_all(words.as_bytes())
        };
        self.printed += 1;
        self.failed = written.err();
    }

    /// Ends the list: closes the JSON array (an empty one when nothing came).
    pub(crate) fn end(mut self) -> io::Result<()> {
        if let Some(err) = self.failed.take() {
            return Err(err);
        }
        if self.out.is_json() {
            self.json.end(&mut self.stdout)?;
        } else if self.printed == 0 {
            self.stdout.write_all(b"No messages.\n")?;
        }
        self.stdout.flush()
    }
}

/// A text as a search marked it, escaped, each match in bold (between `**` without
/// colours).
fn mark(marked: &str, style: crate::table::Style) -> String {
    let mut text = String::new();
    for (i, part) in marked.split([MARK_START, MARK_END]).enumerate() {
        let part = field(part);
        if i % 2 == 1 && style.color {
            text.push_str(&style.paint("1", &part));
        } else if i % 2 == 1 {
            let _ = write!(text, "**{part}**");
        } else {
            text.push_str(&part);
        }
    }
    text
}

/// What a record answers, in words: ` answers ID (inferred)`, or nothing.
fn answers(record: &Record) -> String {
    record
        .in_reply_to
        .as_deref()
        .map_or_else(String::new, |id| {
            let how = if record.inferred { " (inferred)" } else { "" };
            format!("  answers {}{how}", field(id))
        })
}

/// One record as a conversation line: when, which way, with whom, the text, its id.
fn chat(record: &Record, text: &str) -> String {
    let (arrow, peer, how) = if record.direction == "in" {
        ("<-", &record.from, String::new())
    } else {
        let peer = record.session_name.as_ref().unwrap_or(&record.to);
        let how = record.receipt.as_ref().unwrap_or(&record.state).clone();
        ("->", peer, format!(" {how}"))
    };
    format!(
        "{}  {arrow} {}  {text}\n    [{}{how}{}]\n",
        local_time(record.created_at_ms),
        field(peer),
        record.id,
        answers(record),
    )
}

/// One record in words: its id, state, address, attempts and reason (a message in: whom
/// from, to which of our senders); then, for `log`, its text and every change with its
/// local time.
fn human(record: &Record, style: Style, text: &str) -> String {
    let mut words = if record.direction == "in" {
        format!(
            "{}  {:<9}  from {}{}  to {}  at {}{}\n",
            record.id,
            record.state,
            field(&record.from),
            record
                .session_id
                .as_deref()
                .map(|id| format!(" (session {})", field(id)))
                .unwrap_or_default(),
            field(&record.to),
            local_time(record.created_at_ms),
            answers(record),
        )
    } else {
        format!(
            "{}  {:<9}  {} {}  from {}  {} attempt{}  expires {}{}{}\n",
            record.id,
            record.state,
            record.to_kind,
            field(&record.to),
            field(&record.from),
            record.attempts,
            if record.attempts == 1 { "" } else { "s" },
            local_time(record.expires_at_ms),
            answers(record),
            record
                .reason
                .as_deref()
                .map(|reason| format!("\n    {}", field(reason)))
                .unwrap_or_default(),
        )
    };
    if let Some(receipt) = &record.receipt {
        let basis = record.receipt_basis.as_deref().unwrap_or("unknown basis");
        let _ = writeln!(words, "    receipt: {receipt} ({basis})");
    }
    if style == Style::Log {
        let _ = writeln!(words, "    text: {text}");
        for change in &record.timeline {
            let _ = writeln!(
                words,
                "    {}  {}{}",
                local_time(change.at_ms),
                change.state,
                change
                    .detail
                    .as_deref()
                    .map(|d| format!("  {}", field(d)))
                    .unwrap_or_default()
            );
        }
    }
    words
}
