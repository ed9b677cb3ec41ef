//! `doctor`: a checklist of everything on the path of a message, with the fix under each
//! failure.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::error::{Exit, Failure};
use crate::json::{CheckJson, DoctorJson};
use crate::ops::Context;
use crate::ops::doctor::{Check, doctor};
use crate::output::Output;
use crate::table::field;

pub(crate) fn run(
    ctx: &Context,
    session: Option<&str>,
    claude: Option<PathBuf>,
    out: &Output,
) -> Result<Exit, Failure> {
    let checks = doctor(ctx, session, claude);
    let ok = checks.iter().all(|check| check.ok);
    if out.json {
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
