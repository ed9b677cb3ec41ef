//! `mcp install` and `mcp uninstall`: this MCP server registered in Claude Code, or no
//! longer, through Claude Code's own `claude mcp add` / `claude mcp remove`, so Claude
//! Code writes its own configuration (`~/.claude.json`, or `.mcp.json` for a project).
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use claude_peer_deliver::child::{ChildGroup, Ended};
use serde_json::json;

use crate::args::ClaudeArg;
use crate::error::{Exit, Failure};
use crate::ops::Context;
use crate::ops::send::find_claude;
use crate::output::Output;

/// The name the server is registered under.
const NAME: &str = "claude-peers";

/// The longest `claude mcp add` or `remove` may take.
const WITHIN: Duration = Duration::from_secs(30);

#[derive(Debug, clap::Subcommand)]
pub(crate) enum Action {
    /// Register this server in Claude Code (claude mcp add), for every session of the
    /// scope; again replaces an earlier registration
    Install(Place),
    /// Remove the registration (claude mcp remove)
    Uninstall(Place),
}

#[derive(Debug, clap::Args)]
pub(crate) struct Place {
    /// Where Claude Code keeps it: user (every project), project (.mcp.json here, shared
    /// through the repository) or local (this project, this user)
    #[arg(long, value_enum, default_value_t = Scope::User)]
    scope: Scope,
    /// The Claude Code that registers it, and sends for the server [default: claude on
    /// PATH, else ~/.local/bin/claude, else ~/.claude/local/claude]
    #[command(flatten)]
    claude: ClaudeArg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Scope {
    User,
    Project,
    Local,
}

impl Scope {
    const fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Project => "project",
            Self::Local => "local",
        }
    }
}

pub(crate) fn exec(ctx: &Context, action: Action, out: &Output) -> Result<Exit, Failure> {
    let (install, place) = match action {
        Action::Install(place) => (true, place),
        Action::Uninstall(place) => (false, place),
    };
    let given = place.claude.path.is_some();
    let claude = find_claude(place.claude.path)?;
    let scope = place.scope.as_str();
    // Installing again replaces what was there: Claude Code refuses a second `add`.
    let removed = claude_mcp(ctx, &claude.path, &["remove", "--scope", scope, NAME]);
    if !install {
        let (ok, said) = removed?;
        if !ok {
            return Err(Failure::error("mcp_uninstall_failed", said));
        }
        return done(
            out,
            &json!({"uninstalled": true, "name": NAME, "scope": scope}),
            &said,
        );
    }
    let program = std::env::current_exe().map_err(|err| {
        Failure::error(
            "mcp_install_failed",
            format!("cannot find this program: {err}"),
        )
    })?;
    let mut command: Vec<OsString> = vec![program.into(), "mcp".into()];
    if given {
        command.extend(["--claude".into(), claude.path.clone().into()]);
    }
    let mut args: Vec<OsString> = ["add", "--scope", scope, NAME, "--"]
        .map(OsString::from)
        .to_vec();
    args.extend(command.iter().cloned());
    let (ok, said) = claude_mcp(ctx, &claude.path, &args)?;
    if !ok {
        return Err(Failure::error("mcp_install_failed", said));
    }
    let words: Vec<String> = command
        .iter()
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    done(
        out,
        &json!({"installed": true, "name": NAME, "scope": scope, "command": words}),
        &said,
    )
}

fn done(out: &Output, answer: &serde_json::Value, said: &str) -> Result<Exit, Failure> {
    if out.is_json() {
        out.json(answer)?;
    } else {
        out.text(&format!("{}\n", said.trim()))?;
    }
    Ok(Exit::Success)
}

/// `claude mcp ARGS` for this Claude home: whether it succeeded, and what it said.
fn claude_mcp(
    ctx: &Context,
    claude: &std::path::Path,
    args: &[impl AsRef<std::ffi::OsStr>],
) -> Result<(bool, String), Failure> {
    let failed = |err: std::io::Error| {
        Failure::error(
            "mcp_install_failed",
            format!("cannot run `{} mcp`: {err}", claude.display()),
        )
    };
    let mut command = Command::new(claude);
    command.arg("mcp").args(args);
    // Claude Code keeps its config in `~/.claude.json` for the default home, but in
    // `$CLAUDE_CONFIG_DIR/.claude.json` once that is set: set only for another home.
    let default_home =
        std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".claude"));
    if std::env::var_os("CLAUDE_CONFIG_DIR").is_none()
        && default_home.as_deref() != Some(ctx.home.root())
    {
        command.env("CLAUDE_CONFIG_DIR", ctx.home.root());
    }
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(failed)?;
    let mut group = ChildGroup::new(child);
    let pipes = (
        group.child_mut().stdout.take(),
        group.child_mut().stderr.take(),
    );
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(pipe) = pipe {
                let _ = pipe.take(64 * 1024).read_to_string(&mut text);
            }
            text
        })
    };
    let stdout = read(pipes.0.map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read(pipes.1.map(|p| Box::new(p) as Box<dyn Read + Send>));
    let ended = group.wait_then_kill(WITHIN);
    let said = [stdout, stderr]
        .into_iter()
        .filter_map(|t| t.join().ok())
        .collect::<String>()
        .trim()
        .to_owned();
    match ended {
        Ended::Exited(status) => Ok((status.success(), said)),
        Ended::Killed => Err(Failure::error(
            "mcp_install_failed",
            format!("`claude mcp` did not finish within {} s", WITHIN.as_secs()),
        )),
    }
}
