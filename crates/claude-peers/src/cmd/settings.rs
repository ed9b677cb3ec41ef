//! `settings`: the user's `crossSessionInbound`, read, set, reset or explained.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use claude_peer_settings::{InboundPolicy, LayerState, Snapshot};

use crate::args::ManagedSettingsArg;
use crate::error::{Exit, Failure};
use crate::json::{EffectivePolicyJson, SettingsJson};
use crate::ops::settings::Change;
use crate::ops::{Context, policy, settings};
use crate::output::Output;
use crate::table::{Column, Style, table};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    action: Option<Action>,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Set crossSessionInbound (a compare-and-swap with --expect-revision)
    Set {
        /// The policy: accept delivers automatically, hold asks the user, refuse drops
        policy: Policy,
        /// Write only if the file still has this revision (from `settings`); else exit 4
        #[arg(long, value_name = "REV")]
        expect_revision: Option<String>,
    },
    /// Remove crossSessionInbound, back to Claude Code's default (which is not accept)
    Reset {
        /// Write only if the file still has this revision (from `settings`); else exit 4
        #[arg(long, value_name = "REV")]
        expect_revision: Option<String>,
    },
    /// The policy a session in DIR gets, as far as files show, and every layer read
    Effective {
        /// The session's working directory [default: the current directory]
        #[arg(long, value_name = "DIR")]
        cwd: Option<PathBuf>,
        #[command(flatten)]
        managed_settings: ManagedSettingsArg,
    },
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Policy {
    Accept,
    Hold,
    Refuse,
}

pub(crate) fn exec(ctx: Context, args: Args, out: &Output) -> Result<Exit, Failure> {
    let snapshot = match args.action {
        None => settings::read(&ctx)?,
        Some(Action::Set {
            policy,
            expect_revision,
        }) => {
            let policy = match policy {
                Policy::Accept => InboundPolicy::Accept,
                Policy::Hold => InboundPolicy::Hold,
                Policy::Refuse => InboundPolicy::Refuse,
            };
            settings::change(&ctx, Change::Set(policy), expect_revision.as_deref())?
        }
        Some(Action::Reset { expect_revision }) => {
            settings::change(&ctx, Change::Reset, expect_revision.as_deref())?
        }
        Some(Action::Effective {
            cwd,
            managed_settings,
        }) => {
            let report = policy::effective(&ctx.with_managed_settings(managed_settings.path), cwd)?;
            if out.is_json() {
                out.json(&EffectivePolicyJson::new(&report))?;
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
    if out.is_json() {
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
    let mut text = format!(
        "effective crossSessionInbound: {} (decided by {})\n",
        report.value.as_str(),
        report.decider()
    );
    // The managed layer shows each of its documents (the file, then its drop-ins).
    let rows: Vec<Vec<String>> = report
        .layers
        .iter()
        .flat_map(|layer| {
            let documents: Vec<(&Path, &LayerState)> = if layer.documents.is_empty() {
                vec![(&layer.path, &layer.state)]
            } else {
                layer
                    .documents
                    .iter()
                    .map(|d| (d.path.as_path(), &d.state))
                    .collect()
            };
            documents.into_iter().map(|(path, state)| {
                vec![
                    layer.layer.as_str().to_owned(),
                    held(state),
                    path.display().to_string(),
                ]
            })
        })
        .collect();
    text.push_str(&table(
        &[
            Column::plain("LAYER"),
            Column::plain("HOLDS"),
            Column::plain("FILE"),
        ],
        &rows,
        Style::PLAIN,
    ));
    if !report.complete {
        text.push_str("warning: a layer could not be read, so the value may be wrong\n");
    }
    let _ = writeln!(text, "note: {}", report.note);
    text
}

fn held(state: &LayerState) -> String {
    match state {
        LayerState::Missing => "missing".to_owned(),
        LayerState::Unset => "unset".to_owned(),
        LayerState::Set { value } => value.as_str().to_owned(),
        LayerState::Invalid { raw, counts_as } => {
            format!("invalid {raw} (counts as {})", counts_as.as_str())
        }
        LayerState::Error { message, .. } => message.clone(),
    }
}
