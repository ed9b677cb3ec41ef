//! `doctor`: a checklist of everything on the path of a message, with the fix under each
//! failure.

use std::fmt::Write as _;

use claude_peer_remote::Host;
use serde_json::{Value, json};

use crate::args::{ClaudeArg, ManagedSettingsArg};
use crate::error::{Exit, Failure};
use crate::json::{CheckJson, DoctorJson};
use crate::ops::Context;
use crate::ops::doctor::doctor;
use crate::ops::remote::{self, Hosts};
use crate::output::Output;
use crate::table::field;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// A session id or the name of one live session, to check the way to it too
    #[arg(value_name = "SESSION_ID|NAME")]
    session: Option<String>,
    #[command(flatten)]
    claude: ClaudeArg,
    #[command(flatten)]
    managed_settings: ManagedSettingsArg,
}

pub(crate) fn exec(ctx: &Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let ctx = ctx
        .clone()
        .with_managed_settings(args.managed_settings.path);
    let checks = doctor(&ctx, args.session.as_deref(), args.claude.path);
    let ok = checks.iter().all(|check| check.ok);
    if out.is_json() {
        out.json(&DoctorJson {
            ok,
            checks: checks
                .iter()
                .map(|c| CheckJson {
                    check: c.name,
                    ok: c.ok,
                    detail: &c.detail,
                    fix: c.fix.as_deref(),
                })
                .collect(),
        })?;
    } else {
        let lines: Vec<Line<'_>> = checks
            .iter()
            .map(|c| Line {
                host: None,
                check: c.name,
                ok: c.ok,
                detail: &c.detail,
                fix: c.fix.as_deref(),
            })
            .collect();
        out.styled(&checklist(&lines, out))?;
    }
    Ok(if ok { Exit::Success } else { Exit::Error })
}

/// `doctor --host`: for each host, whether ssh reaches it, the `claude-peers` there, and
/// then that one's own checks, each line with its host.
pub(crate) fn exec_hosts(hosts: &Hosts, args: &Args, out: &Output) -> Result<Exit, Failure> {
    let session = args.session.as_deref();
    let checks: Vec<Value> = std::thread::scope(|scope| {
        let each: Vec<_> = hosts
            .list
            .iter()
            .map(|host| scope.spawn(move || host_checks(hosts, host, session)))
            .collect();
        each.into_iter()
            .flat_map(|checks| checks.join().unwrap_or_default())
            .collect()
    });
    let ok = checks.iter().all(|c| c["ok"] == true);
    if out.is_json() {
        out.json(&json!({"ok": ok, "checks": checks}))?;
    } else {
        let lines: Vec<Line<'_>> = checks
            .iter()
            .map(|c| Line {
                host: c["host"].as_str(),
                check: c["check"].as_str().unwrap_or_default(),
                ok: c["ok"] == true,
                detail: c["detail"].as_str().unwrap_or_default(),
                fix: c["fix"].as_str(),
            })
            .collect();
        out.styled(&checklist(&lines, out))?;
    }
    Ok(if ok { Exit::Success } else { Exit::Error })
}

/// One host's checks: the way there, its `claude-peers`, then its `doctor`'s.
fn host_checks(hosts: &Hosts, host: &Host, session: Option<&str>) -> Vec<Value> {
    let check = |name: &str, ok: bool, detail: String, fix: Option<String>| json!({"host": host.as_str(), "check": name, "ok": ok, "detail": detail, "fix": fix});
    let version = match hosts.ask_text(host, &["--version".into()], b"") {
        Ok(answer) if answer.exit == 0 => String::from_utf8_lossy(&answer.stdout).trim().to_owned(),
        Ok(answer) => {
            return vec![check(
                "remote claude-peers",
                false,
                answer.stderr.trim().to_owned(),
                None,
            )];
        }
        Err(
            err @ (claude_peer_remote::Error::NotInstalled { .. }
            | claude_peer_remote::Error::Incompatible { .. }),
        ) => {
            let fix = if matches!(err, claude_peer_remote::Error::NotInstalled { .. }) {
                format!("install claude-peers on {host}, or pass --remote-bin PATH")
            } else {
                format!("install the same claude-peers on {host} as here")
            };
            return vec![
                check("ssh", true, format!("{host} answers over ssh"), None),
                check("remote claude-peers", false, err.to_string(), Some(fix)),
            ];
        }
        Err(err) => {
            return vec![check(
                "ssh",
                false,
                err.to_string(),
                Some(format!(
                    "make `ssh {host} true` work without a prompt (keys, known_hosts)"
                )),
            )];
        }
    };
    let mut checks = vec![
        check("ssh", true, format!("{host} answers over ssh"), None),
        check("remote claude-peers", true, version, None),
    ];
    let mut words = vec!["doctor".into()];
    words.extend(session.map(|s| hosts.split(s).map_or(s, |(_, rest)| rest).into()));
    match hosts.ask(host, &words, b"") {
        Ok(reply) => {
            for mut item in reply.value["checks"]
                .as_array()
                .cloned()
                .unwrap_or_default()
            {
                remote::mark(&mut item, host);
                checks.push(item);
            }
        }
        Err(err) => checks.push(check("remote doctor", false, err.to_string(), None)),
    }
    checks
}

/// One line of the checklist: a check of this machine's, or of a host's.
struct Line<'a> {
    host: Option<&'a str>,
    check: &'a str,
    ok: bool,
    detail: &'a str,
    fix: Option<&'a str>,
}

fn checklist(checks: &[Line<'_>], out: &Output) -> String {
    let mut text = String::new();
    for check in checks {
        let mark = if check.ok {
            out.style.paint("32", "ok  ")
        } else {
            out.style.paint("31", "FAIL")
        };
        let host = check
            .host
            .map(|h| format!("{} ", field(h)))
            .unwrap_or_default();
        let _ = writeln!(
            text,
            "{mark} {host}{}: {}",
            field(check.check),
            field(check.detail)
        );
        if let Some(fix) = check.fix {
            let _ = writeln!(text, "     fix: {}", field(fix));
        }
    }
    let failed = checks.iter().filter(|c| !c.ok).count();
    if failed == 0 {
        text.push_str("Every check passed: a message can reach its receiver.\n");
    } else {
        let _ = writeln!(text, "{failed} of {} checks failed.", checks.len());
    }
    text
}
