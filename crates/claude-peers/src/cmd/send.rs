//! `send`: one message to one live session, through Claude Code's own `SendMessage`
//! or the user's relay program.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::PathBuf;

use claude_peer_deliver::{Basis, DEFAULT_TIMEOUT, Delivered, Inbound, Outcome};
use claude_peer_post::DEFAULT_EXPIRY;
use claude_peer_resolve::Target;
use claude_peer_sender::DEFAULT_READ_WAIT;

use crate::args::{ManagedSettingsArg, SenderArgs, Span, TimeoutArg, expiry, positive_span, span};
use crate::cmd::outbox::no_host;
use crate::cmd::queue;
use claude_peer_remote::Host;
use serde_json::Value;

use crate::error::{Exit, Failure};
use crate::json::{BroadcastJson, DeliveredJson};
use crate::ops::broadcast::{Outcomes, Targets, broadcast};
use crate::ops::remote::{self, Hosts};
use crate::ops::send::{self, Relayed, Via};
use crate::ops::{self, Context, absolute, post, sessions};
use crate::output::{Output, host_failed};
use crate::signals::Interrupt;
use crate::table::field;

// `send`'s flags (its help is the command's, in `cli.rs`).
#[derive(Debug, clap::Args)]
#[allow(
    clippy::doc_markdown,
    reason = "doc comments here are the --help text people read, not rustdoc"
)]
pub(crate) struct Args {
    /// Session ids, or names of exactly one live session each
    #[arg(value_name = "TARGET")]
    targets: Vec<String>,
    /// Every live session too
    #[arg(long)]
    all_live: bool,
    /// Every live session whose working directory is DIR or below it too
    #[arg(long, value_name = "DIR")]
    cwd: Option<PathBuf>,
    /// How long to wait for a target that is not live yet before it is refused
    /// not_live: 90, 90s, 10m, 2h
    #[arg(long, value_name = "DURATION", value_parser = positive_span)]
    wait_live: Option<Span>,
    /// The message [default: read from stdin]
    #[arg(long, value_name = "TEXT")]
    message: Option<String>,
    #[command(flatten)]
    sender: SenderArgs,
    #[command(flatten)]
    timeout: TimeoutArg,
    /// How long a queued message (its receiver is busy) is waited for to be read; 0
    /// returns at queued
    #[arg(
        long,
        value_name = "DURATION",
        default_value_t = Span(DEFAULT_READ_WAIT),
        value_parser = span
    )]
    read_wait: Span,
    #[command(flatten)]
    managed_settings: ManagedSettingsArg,
    /// Keep it in the post office until its receiver can take it, and return at once
    /// (a post office is started when none runs); --cwd DIR then means the one session
    /// working in DIR itself
    #[arg(long, conflicts_with_all = ["relay", "wait_live", "all_live"])]
    queue: bool,
    /// With --queue: how long it may wait: 90s, 10m, 2h, 3d (at most 30d)
    #[arg(long, value_name = "DURATION", requires = "queue", value_parser = expiry)]
    expire: Option<Span>,
    /// With --queue: its idempotency key; the same key from the same --from again is
    /// the same message, sent once
    #[arg(long, value_name = "KEY", requires = "queue")]
    id: Option<String>,
    /// A relay program and its arguments, passed as given (no shell)
    #[arg(last = true, value_name = "PROGRAM [ARGS]", conflicts_with = "claude")]
    relay: Vec<OsString>,
    /// The message this one answers (`reply`), by post id.
    #[arg(skip)]
    in_reply_to: Option<String>,
}

impl Args {
    /// `reply`'s send: `message` to the one `target`, answering `in_reply_to`, queued
    /// when `queue`.
    pub(crate) fn reply(
        target: String,
        message: Option<String>,
        sender: SenderArgs,
        timeout: TimeoutArg,
        managed_settings: ManagedSettingsArg,
        queue: bool,
        in_reply_to: String,
    ) -> Self {
        Self {
            targets: vec![target],
            all_live: false,
            cwd: None,
            wait_live: None,
            message,
            sender,
            timeout,
            read_wait: Span(DEFAULT_READ_WAIT),
            managed_settings,
            queue,
            expire: None,
            id: None,
            relay: Vec::new(),
            in_reply_to: Some(in_reply_to),
        }
    }
}

pub(crate) fn exec(ctx: Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let ctx = ctx.with_managed_settings(args.managed_settings.path.clone());
    if args.queue {
        return queued(&ctx, args, out);
    }
    let targets = Targets {
        select: select(args.cwd, args.all_live),
        given: args.targets,
        wait_live: args.wait_live.map(|s| s.0),
    };
    targets.check()?;
    let single = targets.given.len() == 1 && targets.select.is_none();
    // One target, Claude Code sending, as a running post office's sender sends (its
    // timeout and read wait): through it, a running sender's turn.
    let by_post_office = single
        && args.relay.is_empty()
        && targets.wait_live.is_none()
        && args.timeout.span.0 == DEFAULT_TIMEOUT
        && args.read_wait.0 == DEFAULT_READ_WAIT;
    let from = args.sender.from.clone();
    let in_reply_to = args.in_reply_to.clone();
    // Before a sender starts: a signal then stops a send that has not started, and one
    // under way (a relay program's whole group killed: a terminal's Ctrl-C reaches only
    // ours).
    let interrupt = Interrupt::watch()?;
    let relay = Relayed::program_or(args.relay, args.timeout.span.0, interrupt.stopped(), || {
        let relay = send::claude(
            args.sender.claude.path,
            args.sender.from,
            args.timeout.span.0,
        )?
        .read_wait(args.read_wait.0);
        Ok(relay.cancel_with(interrupt.cancel()))
    })?;
    let message = match args.message {
        Some(message) => message,
        None => send::message_from_stdin()?,
    };
    out.warn_all(&sessions::registry_warnings(&ctx));
    let letter = post::Letter {
        from: &from,
        text: &message,
        in_reply_to: in_reply_to.as_deref(),
    };
    if by_post_office && let Some(sent) = post::send_now(&ctx, &targets.given[0], &letter) {
        return single_answer(&sent?, relay.via(), out);
    }
    let outcomes = broadcast(&ctx, &targets, &message, &relay);
    if let Ok(outcomes) = &outcomes {
        record(outcomes, &letter, out);
    }
    if let Some(exit) = interrupt.exit() {
        let err = match outcomes {
            Err(err) => Some(err),
            Ok(outcomes) if single => outcomes.into_first().err(),
            Ok(_) => None,
        };
        if let Some(err) = err {
            out.fail(&err.into());
        }
        return Ok(exit);
    }
    if single {
        return single_answer(&outcomes?.into_first()?, relay.via(), out);
    }
    let outcomes = outcomes?;
    let failed = outcomes.failed();
    if out.is_json() {
        out.json(&BroadcastJson::new(&outcomes, relay.via()))?;
    } else {
        let mut text = String::new();
        for outcome in outcomes.iter() {
            let what = match outcome.result {
                Ok(delivered) => sentence(delivered),
                Err(err) => {
                    let failure = Failure::from(err);
                    format!("{}: {}\n", failure.name, field(&failure.message))
                }
            };
            let _ = write!(text, "{}: {what}", field(outcome.target));
        }
        let _ = writeln!(text, "{} delivered, {failed} not.", outcomes.delivered());
        out.text(&text)?;
    }
    Ok(if failed == 0 {
        Exit::Success
    } else {
        Exit::Refusal
    })
}

/// The sessions `--cwd DIR` or `--all-live` pick; `--cwd` as the sessions report theirs
/// (links resolved, where the directory exists).
/// `send` across hosts: each host's targets (`HOST:TARGET`, or every target of the one
/// host asked; `--all-live` and `--cwd` on every host) sent by that host's own `send`,
/// the message on its stdin, never in its command line. One target answers as a single
/// send does, marked with its host; several as a broadcast does, each result with its
/// host, and a host that could not be asked in `hosts`.
pub(crate) fn exec_hosts(hosts: &Hosts, args: &Args, out: &Output) -> Result<Exit, Failure> {
    if !args.relay.is_empty() {
        return Err(Failure::usage(
            "no_host",
            "a relay program sends from this machine: it takes no --host",
        ));
    }
    let mut per_host: Vec<(Host, Vec<&str>)> = hosts.group(&args.targets).map_err(no_host)?;
    let everywhere = args.all_live || args.cwd.is_some();
    if everywhere {
        for host in &hosts.list {
            if !per_host.iter().any(|(h, _)| h == host) {
                per_host.push((host.clone(), Vec::new()));
            }
        }
    }
    if per_host.is_empty() {
        return Err(ops::Error::NoTarget.into());
    }
    let message = match &args.message {
        Some(message) => message.clone(),
        None => send::message_from_stdin()?,
    };
    let flags = remote_flags(args);
    let chosen: Vec<Host> = per_host.iter().map(|(h, _)| h.clone()).collect();
    let asked = hosts.ask_each(&chosen, |host| {
        let targets = per_host
            .iter()
            .find(|(h, _)| h == host)
            .map_or(&[][..], |(_, targets)| targets);
        let mut words: Vec<OsString> = vec!["send".into()];
        words.extend(targets.iter().map(OsString::from));
        words.extend(flags.iter().cloned());
        (words, message.clone().into_bytes())
    });
    let mut asked = asked;
    if asked.len() == 1
        && per_host[0].1.len() == 1
        && !everywhere
        && let Some((host, asked)) = asked.pop()
    {
        return match remote::succeeded(&host, asked) {
            Ok(mut result) => {
                remote::mark(&mut result, &host);
                answer_of_host(out, &result, &host, per_host[0].1[0])?;
                Ok(Exit::Success)
            }
            Err(err) => host_failed(out, err),
        };
    }
    let mut merged = remote::Merged::default();
    for ((host, asked), (_, targets)) in asked.into_iter().zip(&per_host) {
        merged.add(&host, targets, asked);
    }
    if out.is_json() {
        out.json(&merged.json())?;
    } else {
        let mut text = String::new();
        for result in &merged.results {
            answer_line(&mut text, result);
        }
        for failed in &merged.hosts {
            let _ = writeln!(
                text,
                "{}: {}",
                field(failed["host"].as_str().unwrap_or_default()),
                field(failed["message"].as_str().unwrap_or_default())
            );
        }
        let _ = writeln!(
            text,
            "{} delivered, {} not.",
            merged.delivered, merged.failed
        );
        out.text(&text)?;
    }
    // 1 when a host could not be asked, else 3 when any target was not delivered.
    Ok(if !merged.hosts.is_empty() {
        Exit::Error
    } else if merged.failed > 0 {
        Exit::Refusal
    } else {
        Exit::Success
    })
}

/// The flags a host's `send` takes as given here (not `--claude`, `--managed-settings`:
/// those are this machine's paths).
fn remote_flags(args: &Args) -> Vec<OsString> {
    let secs = |span: Span| format!("{}s", span.0.as_secs_f64());
    let mut pairs: Vec<(&str, String)> = vec![
        ("--from", args.sender.from.clone()),
        ("--timeout", secs(args.timeout.span)),
        ("--read-wait", secs(args.read_wait)),
    ];
    if let Some(cwd) = &args.cwd {
        pairs.push(("--cwd", cwd.display().to_string()));
    }
    if let Some(wait) = args.wait_live {
        pairs.push(("--wait-live", secs(wait)));
    }
    if let Some(expire) = args.expire {
        pairs.push(("--expire", secs(expire)));
    }
    if let Some(id) = &args.id {
        pairs.push(("--id", id.clone()));
    }
    // `--flag=value`: a value that starts with `-` stays a value.
    let mut flags: Vec<OsString> = pairs
        .into_iter()
        .map(|(name, value)| format!("{name}={value}").into())
        .collect();
    for (given, name) in [(args.all_live, "--all-live"), (args.queue, "--queue")] {
        if given {
            flags.push(name.into());
        }
    }
    flags
}

/// One remote send's answer, in JSON or as a sentence.
fn answer_of_host(out: &Output, result: &Value, host: &Host, target: &str) -> Result<(), Failure> {
    if out.is_json() {
        out.json(result)?;
    } else {
        let mut text = String::new();
        let mut result = result.clone();
        if let Some(object) = result.as_object_mut() {
            object.insert("target".to_owned(), Value::from(format!("{host}:{target}")));
        }
        answer_line(&mut text, &result);
        out.text(&text)?;
    }
    Ok(())
}

/// `TARGET: delivered (receipt)` or `TARGET: reason: message`.
fn answer_line(text: &mut String, result: &Value) {
    let target = field(result["target"].as_str().unwrap_or_default()).into_owned();
    let what = if result["delivered"] == true {
        let receipt = result["receipt"].as_str().unwrap_or("accepted");
        format!("delivered ({receipt})")
    } else {
        let name = remote::said_name(result);
        format!(
            "{name}: {}",
            field(result["message"].as_str().unwrap_or_default())
        )
    };
    let _ = writeln!(text, "{target}: {what}");
}

fn select(cwd: Option<PathBuf>, all_live: bool) -> Option<Target> {
    let cwd = cwd.map(|dir| std::fs::canonicalize(&dir).unwrap_or_else(|_| absolute(dir)));
    match (cwd, all_live) {
        (Some(dir), _) => Some(Target::Cwd(dir)),
        (None, true) => Some(Target::AllLive),
        (None, false) => None,
    }
}

/// Records each target's send in the user's store, warning when it cannot: the send
/// itself stands either way.
fn record(outcomes: &Outcomes, letter: &post::Letter<'_>, out: &Output) {
    for outcome in outcomes.iter() {
        if let Err(err) = post::record_sent(
            letter,
            outcome.target,
            outcome.result.map_err(ops::Error::refusal),
        ) {
            out.warn(&format!("the send is not in the log: {err}"));
        }
    }
}

/// What one target's send prints.
fn single_answer(delivered: &Delivered, via: Via, out: &Output) -> Result<Exit, Failure> {
    if out.is_json() {
        out.json(&DeliveredJson::new(delivered, via))?;
    } else {
        out.text(&sentence(delivered))?;
    }
    Ok(Exit::Success)
}

/// `--queue`: handed to the post office, which keeps it until its receiver can take it.
fn queued(ctx: &Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let text = match args.message {
        Some(message) => message,
        None => send::message_from_stdin()?,
    };
    let order = queue::Order {
        targets: args.targets,
        cwd: args.cwd,
        from: args.sender.from,
        text,
        expire: args.expire.map_or(DEFAULT_EXPIRY, |span| span.0),
        key: args.id,
        in_reply_to: args.in_reply_to,
    };
    queue::exec(ctx, &order, args.sender.claude.path, out)
}

fn sentence(delivered: &Delivered) -> String {
    let session = &delivered.session;
    let name = field(session.record.display_name().unwrap_or("the session"));
    let pid = session.pid;
    let msg_id = delivered
        .msg_id
        .as_deref()
        .map_or_else(String::new, |id| format!(" (msg_id {id})"));
    let Some(receipt) = delivered.receipt else {
        let how = match delivered.inbound {
            Inbound::Automatic => "it accepts messages automatically",
            Inbound::MayHold => "it may hold the message until its user approves it",
        };
        let detail = delivered
            .detail
            .as_deref()
            .map_or_else(String::new, |d| format!(" Relay: {d}."));
        return format!("Delivered to {name} (pid {pid}); {how}.{detail}\n");
    };
    let what = match receipt.outcome {
        Outcome::Read => "it read the message",
        Outcome::Queued => "queued: it is busy and will read it after its current turn",
        Outcome::Held => "held: the receiving user must approve it",
        Outcome::Released => "released: its user approved it",
        _ => {
            return format!(
                "Sent to {name} (pid {pid}){msg_id}: no word from it within the receipt window, so it most likely took the message.\n"
            );
        }
    };
    let by = match receipt.basis {
        Basis::Transcript => "its transcript",
        _ => "its notice",
    };
    format!("Sent to {name} (pid {pid}): {what}{msg_id}, says {by}.\n")
}
