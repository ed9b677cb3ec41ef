//! `outbox`: the messages the post office still holds, oldest first; `outbox cancel` and
//! `outbox retry`. Also how `log` prints records.

use std::fmt::Write as _;
use std::io::{self, Write};

use claude_peer_post::protocol::{Record, Request};

use crate::args::ClaudeArg;
use crate::error::{Exit, Failure};
use crate::ops::post::{self, Start};
use crate::ops::{self, Context};
use crate::output::{JsonArray, Output};
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
            let mut printer = Printer::new(out, Timeline::Hidden);
            client
                .request(&Request::Outbox, |record| printer.print(&record))
                .map_err(ops::Error::from)?;
            printer.end()?;
            return Ok(Exit::Success);
        }
        Some(Action::Cancel { ids }) => (ids, |id| Request::Cancel { id }),
        Some(Action::Retry { ids }) => (ids, |id| Request::Retry { id }),
    };
    let mut printer = Printer::new(out, Timeline::Hidden);
    let mut failed = false;
    for id in ids {
        match client.request(&step(id), |_| {}) {
            Ok(done) => {
                if let Some(record) = done.record {
                    printer.print(&record);
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

/// Whether records are printed with their timelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timeline {
    Shown,
    Hidden,
}

/// Prints records as they arrive: one JSON array (`--json`), or a line each.
pub(crate) struct Printer<'a> {
    out: &'a Output,
    timeline: Timeline,
    stdout: io::BufWriter<io::StdoutLock<'static>>,
    json: JsonArray,
    printed: usize,
    failed: Option<io::Error>,
}

impl<'a> Printer<'a> {
    pub(crate) fn new(out: &'a Output, timeline: Timeline) -> Self {
        Self {
            out,
            timeline,
            stdout: io::BufWriter::new(io::stdout().lock()),
            json: JsonArray::default(),
            printed: 0,
            failed: None,
        }
    }

    pub(crate) fn print(&mut self, record: &Record) {
        if self.failed.is_some() {
            return;
        }
        let written = if self.out.is_json() {
            self.json.push(&mut self.stdout, record)
        } else {
            self.stdout
                .write_all(human(record, self.timeline).as_bytes())
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

/// One record in words: its id, state, address, attempts and reason; then, when shown,
/// every change with its local time.
fn human(record: &Record, timeline: Timeline) -> String {
    let mut text = format!(
        "{}  {:<9}  {} {}  from {}  {} attempt{}  expires {}{}\n",
        record.id,
        record.state,
        record.to_kind,
        field(&record.to),
        field(&record.from),
        record.attempts,
        if record.attempts == 1 { "" } else { "s" },
        local_time(record.expires_at_ms),
        record
            .reason
            .as_deref()
            .map(|reason| format!("\n    {}", field(reason)))
            .unwrap_or_default(),
    );
    if let Some(receipt) = &record.receipt {
        let basis = record.receipt_basis.as_deref().unwrap_or("unknown basis");
        let _ = writeln!(text, "    receipt: {receipt} ({basis})");
    }
    if timeline == Timeline::Shown {
        let _ = writeln!(text, "    text: {}", field(&record.text));
        for change in &record.timeline {
            let _ = writeln!(
                text,
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
    text
}
