//! One function per subcommand.

use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_registry::{ClaudeHome, Liveness};
use claude_peer_resolve::{Discovery, Refusal, RefusalKind, Scan, Scope, Session};
use claude_peer_settings::{InboundPolicy, Revision, SettingsStore, Snapshot, effective_policy};
use serde::Serialize;

use crate::cli::{Cli, Command, Policy, SettingsAction, Shell};
use crate::output::{Exit, Failure, Output};
use crate::view::{Columns, SessionDetailJson, SessionJson, now_ms, status_text, table};
use crate::{mailbox, mcp, send, watch};

pub(crate) type Os = Discovery<OsProcessTable, OsRegistryFs>;

pub(crate) fn run(cli: Cli, out: &Output) -> Result<Exit, Failure> {
    let home = home(cli.home)?;
    let result = match cli.command {
        Command::List { all } => list(&home, all, out),
        Command::Show { target } => show(&home, &target, out),
        Command::Resolve { session_id } => resolve(&home, &session_id, out),
        Command::Settings { action } => settings(&home, action, out),
        Command::Watch { poll } => watch::run(&home, poll, out),
        Command::Send {
            session_id,
            message,
            from,
            claude,
            timeout,
            managed_settings,
            relay,
        } => send::run(
            &home,
            &session_id,
            send::How {
                message,
                from,
                claude,
                timeout,
                managed_settings,
                relay,
            },
            out,
        ),
        Command::Mailbox {
            from,
            claude,
            timeout,
            managed_settings,
        } => send::claude_relay(claude, from, timeout)
            .map_err(Fail::from)
            .and_then(|relay| mailbox::run(&home, &relay, managed_settings)),
        Command::Mcp {
            claude,
            managed_settings,
        } => mcp::run(mcp::Config {
            home,
            claude,
            managed_settings,
        })
        .map_err(Fail::Failure),
        Command::Completions { shell } => completions(shell),
    };
    match result {
        // The reader of stdout has gone: nothing left to say to anyone.
        Err(Fail::Io(err)) if err.kind() == io::ErrorKind::BrokenPipe => Ok(Exit::Success),
        Err(Fail::Io(err)) => Err(Failure::error(
            "output_failed",
            format!("cannot write to stdout: {err}"),
        )),
        Err(Fail::Failure(failure)) => Err(failure),
        Ok(exit) => Ok(exit),
    }
}

/// A command's failure: a reported one, or stdout going away.
#[derive(Debug)]
pub(crate) enum Fail {
    Failure(Failure),
    Io(io::Error),
}

impl From<io::Error> for Fail {
    fn from(err: io::Error) -> Self {
        Self::Io(err)
    }
}

impl From<Failure> for Fail {
    fn from(failure: Failure) -> Self {
        Self::Failure(failure)
    }
}

impl From<claude_peer_resolve::Error> for Fail {
    fn from(err: claude_peer_resolve::Error) -> Self {
        Self::Failure(err.into())
    }
}

impl From<claude_peer_relay::Error> for Fail {
    fn from(err: claude_peer_relay::Error) -> Self {
        Self::Failure(err.into())
    }
}

impl From<claude_peer_settings::Error> for Fail {
    fn from(err: claude_peer_settings::Error) -> Self {
        Self::Failure(err.into())
    }
}

fn home(flag: Option<PathBuf>) -> Result<ClaudeHome, Failure> {
    flag.map(ClaudeHome::new)
        .or_else(|| {
            ClaudeHome::from_env_values(
                std::env::var_os("CLAUDE_CONFIG_DIR"),
                std::env::var_os("HOME"),
            )
        })
        .ok_or_else(|| {
            Failure::error(
                "no_home",
                "no Claude home: pass --home, or set CLAUDE_CONFIG_DIR or HOME",
            )
        })
}

/// Scans and reports the registry directory's warnings on stderr.
pub(crate) fn scan(
    discovery: &Os,
    home: &ClaudeHome,
    scope: Scope,
    out: &Output,
) -> Result<Scan, Failure> {
    let scan = discovery.scan(home, scope)?;
    for warning in &scan.warnings {
        out.warn(&warning.to_string());
    }
    Ok(scan)
}

/// How many rows of a human `list` set its column widths: every row of any real
/// listing, while `list --all` over a huge registry of leftovers still prints as it goes.
const WIDTH_SAMPLE: usize = 1000;

/// Prints the entries as they are judged: JSON element by element, or a table whose
/// widths come from its first [`WIDTH_SAMPLE`] rows. Nothing else is held.
fn list(home: &ClaudeHome, all: bool, out: &Output) -> Result<Exit, Fail> {
    let scope = if all { Scope::All } else { Scope::Live };
    // One scan and gone: pinning live processes would only cost a pidfd each.
    let discovery = Discovery::new(OsProcessTable::with_pin_limit(0), OsRegistryFs);
    let entries = discovery.entries(home, scope)?;
    for warning in entries.warnings() {
        out.warn(&warning.to_string());
    }
    let mut stdout = io::BufWriter::new(io::stdout().lock());
    if out.json {
        json_list(&mut stdout, entries)?;
    } else {
        human_list(&mut stdout, home, entries, all, out)?;
    }
    stdout.flush()?;
    Ok(Exit::Success)
}

/// Writes `sessions` as one JSON array and a newline, element by element: the very
/// bytes `serde_json` writes for the whole array collected.
fn json_list(to: &mut impl Write, sessions: impl Iterator<Item = Session>) -> io::Result<()> {
    to.write_all(b"[")?;
    for (i, session) in sessions.enumerate() {
        if i > 0 {
            to.write_all(b",")?;
        }
        serde_json::to_writer(&mut *to, &SessionJson::new(&session))?;
    }
    to.write_all(b"]\n")
}

fn human_list(
    to: &mut impl Write,
    home: &ClaudeHome,
    sessions: impl Iterator<Item = Session>,
    all: bool,
    out: &Output,
) -> io::Result<()> {
    let now = now_ms();
    let mut header = vec!["NAME", "STATUS", "CWD", "PID", "TMUX", "MSG"];
    if all {
        header.extend(["VERDICT", "REASON"]);
    }
    let (mut records, mut live) = (0_usize, 0_usize);
    let mut rows = sessions.map(|s| {
        records += 1;
        live += usize::from(s.verdict.liveness == Liveness::Live);
        row(&s, all, now)
    });
    let sample: Vec<Vec<String>> = rows.by_ref().take(WIDTH_SAMPLE).collect();
    if sample.is_empty() {
        let dir = home.sessions_dir();
        let sentence = if dir.exists() {
            format!(
                "No live Claude Code sessions (registry: {}).\n",
                dir.display()
            )
        } else {
            format!(
                "No Claude Code sessions: {} does not exist.\n",
                dir.display()
            )
        };
        return to.write_all(sentence.as_bytes());
    }
    let columns = Columns::measure(&header, &sample, out.style);
    to.write_all(columns.header(&header).as_bytes())?;
    for row in &sample {
        to.write_all(columns.row(row).as_bytes())?;
    }
    for row in rows {
        to.write_all(columns.row(&row).as_bytes())?;
    }
    if all {
        writeln!(to, "{records} records, {live} live.")
    } else {
        let plural = if live == 1 { "" } else { "s" };
        writeln!(to, "{live} live session{plural}.")
    }
}

/// One session's cells in `list`'s table.
fn row(s: &Session, all: bool, now: u64) -> Vec<String> {
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
    if all {
        row.push(s.verdict.liveness.as_str().to_owned());
        row.push(or_dash(s.verdict.reason.as_deref()));
    }
    row
}

fn show(home: &ClaudeHome, target: &str, out: &Output) -> Result<Exit, Fail> {
    let scan = scan(&Discovery::os(), home, Scope::All, out)?;
    let session = find_session(&scan, target)?;
    if out.json {
        out.json(&SessionDetailJson::new(session))?;
    } else {
        out.text(&human_show(session))?;
    }
    Ok(Exit::Success)
}

/// The session `show` means by `target`: a session id (its live record over leftovers),
/// else the name of exactly one live session.
pub(crate) fn find_session<'a>(scan: &'a Scan, target: &str) -> Result<&'a Session, Failure> {
    let by_id = |s: &&Session| s.record.as_ref().is_some_and(|r| r.session_id == target);
    // A session id names one conversation; prefer its live record over leftovers.
    let found = scan
        .sessions
        .iter()
        .filter(by_id)
        .find(|s| s.is_live())
        .or_else(|| scan.sessions.iter().find(by_id));
    if let Some(session) = found {
        return Ok(session);
    }
    let named: Vec<&Session> = scan
        .sessions
        .iter()
        .filter(|s| {
            s.is_live() && s.record.as_ref().and_then(|r| r.name.as_deref()) == Some(target)
        })
        .collect();
    match named.as_slice() {
        [one] => Ok(*one),
        [] => Err(Failure::error(
            "not_found",
            format!("no record has session id `{target}` and no live session is named `{target}`"),
        )),
        several => {
            let holders: Vec<String> = several
                .iter()
                .map(|s| {
                    format!(
                        "pid {} (session {})",
                        s.pid.map_or(0, claude_peer_registry::Pid::get),
                        s.record.as_ref().map_or("?", |r| r.session_id.as_str())
                    )
                })
                .collect();
            let refusal = Refusal {
                kind: RefusalKind::IdentityMismatch,
                message: format!(
                    "{} live sessions are named `{target}`: {}",
                    several.len(),
                    holders.join(", ")
                ),
            };
            Err(claude_peer_resolve::Error::Refused(refusal).into())
        }
    }
}

fn human_show(session: &Session) -> String {
    let now = now_ms();
    let record = session.record.as_ref();
    let text = |value: Option<&str>| value.map(str::to_owned);
    let ms =
        |value: Option<u64>| value.map(|at| format!("{at} ({} ago)", crate::view::ago(now, at)));
    let list = |items: Vec<String>| (!items.is_empty()).then(|| items.join(", "));
    let addressable = match &session.addressability {
        claude_peer_resolve::Addressability::Addressable => "yes".to_owned(),
        claude_peer_resolve::Addressability::NotAddressable(why) => format!("no: {why}"),
    };
    let fields: Vec<(&str, Option<String>)> = vec![
        ("name", text(record.and_then(|r| r.name.as_deref()))),
        (
            "name source",
            text(
                record
                    .and_then(|r| r.name_source.as_ref())
                    .map(claude_peer_registry::NameSource::as_str),
            ),
        ),
        (
            "former names",
            list(
                record
                    .and_then(|r| r.former_names.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .map(|f| f.name)
                    .collect(),
            ),
        ),
        ("session id", text(record.map(|r| r.session_id.as_str()))),
        ("status", Some(status_text(record, now))),
        (
            "liveness",
            Some(session.verdict.liveness.as_str().to_owned()),
        ),
        ("reason", session.verdict.reason.clone()),
        ("addressable", Some(addressable)),
        ("pid", session.pid.map(|p| p.to_string())),
        ("cwd", text(record.and_then(|r| r.cwd.as_deref()))),
        ("tmux", text(record.and_then(|r| r.tmux.as_deref()))),
        (
            "socket",
            text(record.and_then(|r| r.messaging_socket_path.as_deref())),
        ),
        (
            "kind",
            text(
                record
                    .and_then(|r| r.kind.as_ref())
                    .map(claude_peer_registry::Kind::as_str),
            ),
        ),
        (
            "entrypoint",
            text(record.and_then(|r| r.entrypoint.as_deref())),
        ),
        ("version", text(record.and_then(|r| r.version.as_deref()))),
        (
            "peer features",
            list(
                record
                    .and_then(|r| r.peer_features.clone())
                    .unwrap_or_default(),
            ),
        ),
        ("started", ms(record.and_then(|r| r.started_at))),
        ("updated", ms(record.and_then(|r| r.updated_at))),
        ("file", Some(session.file.display().to_string())),
    ];
    let rows: Vec<Vec<String>> = fields
        .into_iter()
        .filter_map(|(field, value)| Some(vec![field.to_owned(), value?]))
        .collect();
    table(
        &["FIELD", "VALUE"],
        &rows,
        crate::view::Style { color: false },
    )
}

fn resolve(home: &ClaudeHome, session_id: &str, out: &Output) -> Result<Exit, Fail> {
    let session = Discovery::os().resolve_live_session(home, session_id)?;
    if out.json {
        out.json(&SessionJson::new(&session))?;
    } else {
        let record = session.record.as_ref();
        out.text(&format!(
            "{} is live and addressable: pid {}, name {}, socket {}.\n",
            session_id,
            session.pid.map_or(0, claude_peer_registry::Pid::get),
            record.and_then(|r| r.name.as_deref()).unwrap_or("(none)"),
            record
                .and_then(|r| r.messaging_socket_path.as_deref())
                .unwrap_or("(none)"),
        ))?;
    }
    Ok(Exit::Success)
}

#[derive(Debug, Serialize)]
struct SettingsJson<'a> {
    path: &'a Path,
    revision: &'a str,
    cross_session_inbound: Option<&'static str>,
}

fn settings(home: &ClaudeHome, action: Option<SettingsAction>, out: &Output) -> Result<Exit, Fail> {
    let store = SettingsStore::new(home.user_settings());
    let expect = |rev: Option<String>| rev.map(|r| r.parse::<Revision>()).transpose();
    let snapshot = match action {
        None => store.read()?,
        Some(SettingsAction::Set {
            policy,
            expect_revision,
        }) => {
            let policy = match policy {
                Policy::Accept => InboundPolicy::Accept,
                Policy::Hold => InboundPolicy::Hold,
                Policy::Refuse => InboundPolicy::Refuse,
            };
            store.set_inbound(policy, expect(expect_revision)?.as_ref())?
        }
        Some(SettingsAction::Reset { expect_revision }) => {
            store.reset_inbound(expect(expect_revision)?.as_ref())?
        }
        Some(SettingsAction::Effective {
            cwd,
            managed_settings,
        }) => {
            let cwd = match cwd {
                Some(cwd) => cwd,
                None => std::env::current_dir().map_err(|err| {
                    Failure::error(
                        "no_cwd",
                        format!("cannot read the current directory: {err}"),
                    )
                })?,
            };
            let report = effective_policy(&home.user_settings(), &managed_settings, &cwd);
            if out.json {
                out.json(&report)?;
            } else {
                out.text(&human_effective(&report))?;
            }
            return Ok(Exit::Success);
        }
    };
    print_snapshot(&snapshot, out)?;
    Ok(Exit::Success)
}

fn print_snapshot(snapshot: &Snapshot, out: &Output) -> io::Result<()> {
    let value = snapshot.inbound.map(InboundPolicy::as_str);
    if out.json {
        return out.json(&SettingsJson {
            path: &snapshot.path,
            revision: snapshot.revision.as_str(),
            cross_session_inbound: value,
        });
    }
    let what = value.map_or_else(
        || "unset (Claude Code's default: it decides from the permission modes of sender and receiver; not accept)".to_owned(),
        str::to_owned,
    );
    out.text(&format!(
        "crossSessionInbound: {what}\nfile:     {}{}\nrevision: {}\n",
        snapshot.path.display(),
        if snapshot.exists {
            ""
        } else {
            " (does not exist)"
        },
        snapshot.revision.as_str()
    ))
}

fn human_effective(report: &claude_peer_settings::EffectivePolicy) -> String {
    let value = serde_json::to_value(report).unwrap_or_default();
    let decided = report
        .decided_by
        .map_or("no layer sets it", claude_peer_settings::Layer::as_str);
    let mut text = format!(
        "effective crossSessionInbound: {} (decided by: {decided})\n",
        report.value.as_str()
    );
    let rows: Vec<Vec<String>> = value["layers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|layer| {
            let field = |k: &str| layer[k].as_str().map(str::to_owned).unwrap_or_default();
            let held = match field("state").as_str() {
                "set" => field("value"),
                "invalid" => format!(
                    "invalid {} (counts as {})",
                    field("raw"),
                    field("counts_as")
                ),
                "error" => field("message"),
                other => other.to_owned(),
            };
            vec![field("layer"), held, field("path")]
        })
        .collect();
    text.push_str(&table(
        &["LAYER", "HOLDS", "FILE"],
        &rows,
        crate::view::Style { color: false },
    ));
    if !report.complete {
        text.push_str("warning: a layer could not be read, so the value may be wrong\n");
    }
    let _ = writeln!(text, "note: {}", report.note);
    text
}

fn completions(shell: Shell) -> Result<Exit, Fail> {
    let shell = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    let mut command = Cli::command();
    let mut buffer = Vec::new();
    clap_complete::generate(shell, &mut command, "claude-peers", &mut buffer);
    io::Write::write_all(&mut io::stdout().lock(), &buffer)?;
    Ok(Exit::Success)
}

#[cfg(test)]
mod tests {
    use std::fs;

    use claude_peer_resolve::{Discovery, Scope};
    use claude_peer_testkit::registry::{Children, Machine, Registry};

    use super::json_list;
    use crate::view::SessionJson;

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
                scan.sessions.iter().map(SessionJson::new).collect();
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
