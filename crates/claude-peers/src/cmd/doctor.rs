//! `doctor`: a checklist of everything on the path of a message, with the fix under each
//! failure.

use std::fmt::Write as _;

use crate::args::{ClaudeArg, ManagedSettingsArg};
use crate::error::{Exit, Failure};
use crate::json::{CheckJson, DoctorJson};
use crate::ops::Context;
use crate::ops::doctor::{Check, doctor};
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
        out.styled(&checklist(&checks, out))?;
    }
    Ok(if ok { Exit::Success } else { Exit::Error })
}

fn checklist(checks: &[Check], out: &Output) -> String {
    let mut text = String::new();
    for check in checks {
        let mark = if check.ok {
            out.style.paint("32", "ok  ")
        } else {
            out.style.paint("31", "FAIL")
        };
        let _ = writeln!(text, "{mark} {}: {}", check.name, field(&check.detail));
        if let Some(fix) = &check.fix {
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
