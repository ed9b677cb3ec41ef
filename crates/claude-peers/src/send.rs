//! `send`: one message to one live session, through Claude Code's own `SendMessage`
//! or the user's relay program.

use std::ffi::OsString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use claude_peer_registry::ClaudeHome;
use claude_peer_relay::{
    ClaudeRelay, CommandRelay, Courier, Delivered, Inbound, MAX_MESSAGE_BYTES, Outcome,
};
use serde::Serialize;

use crate::commands::Fail;
use crate::output::{Exit, Failure, Output};
use crate::view::SessionJson;

/// How to send, from the command line.
#[derive(Debug)]
pub(crate) struct How {
    pub(crate) message: Option<String>,
    pub(crate) from: String,
    pub(crate) claude: Option<PathBuf>,
    pub(crate) timeout: Duration,
    pub(crate) managed_settings: PathBuf,
    pub(crate) relay: Vec<OsString>,
}

#[derive(Debug, Serialize)]
pub(crate) struct DeliveredJson<'a> {
    delivered: bool,
    session: SessionJson<'a>,
    inbound: &'static str,
    via: &'static str,
    receipt: Option<&'static str>,
    msg_id: Option<&'a str>,
}

impl<'a> DeliveredJson<'a> {
    /// `via` is `claude` or `program`.
    pub(crate) fn new(delivered: &'a Delivered, via: &'static str) -> Self {
        Self {
            delivered: true,
            session: SessionJson::new(&delivered.session),
            inbound: delivered.inbound.as_str(),
            via,
            receipt: delivered.receipt.map(Outcome::as_str),
            msg_id: delivered.msg_id.as_deref(),
        }
    }
}

pub(crate) fn run(
    home: &ClaudeHome,
    session_id: &str,
    how: How,
    out: &Output,
) -> Result<Exit, Fail> {
    let courier = Courier::os().with_managed_settings(&how.managed_settings);
    let mut relay = how.relay.into_iter();
    let (delivered, via) = if let Some(program) = relay.next() {
        let message = message(how.message)?;
        let relay = CommandRelay::new(program).args(relay).timeout(how.timeout);
        (
            courier.deliver(home, session_id, &message, &relay)?,
            "program",
        )
    } else {
        let relay = claude_relay(how.claude, how.from, how.timeout)?;
        let message = message(how.message)?;
        (
            courier.deliver(home, session_id, &message, &relay)?,
            "claude",
        )
    };
    if out.json {
        out.json(&DeliveredJson::new(&delivered, via))?;
    } else {
        out.text(&sentence(&delivered))?;
    }
    Ok(Exit::Success)
}

/// The Claude sender of `send` and `mailbox`: the Claude Code found by
/// [`find_claude`], with this program as its hook.
pub(crate) fn claude_relay(
    claude: Option<PathBuf>,
    from: String,
    timeout: Duration,
) -> Result<ClaudeRelay, Failure> {
    let claude = find_claude(claude)?;
    let hook = std::env::current_exe().map_err(|err| {
        Failure::error(
            "no_hook_program",
            format!("cannot find this program to run as the sender's hook: {err}"),
        )
    })?;
    Ok(
        ClaudeRelay::new(claude, vec![hook.into(), crate::HOOK.into()])
            .from(from)
            .timeout(timeout),
    )
}

/// The Claude Code to send with: `--claude`, else `claude` on `PATH`.
fn find_claude(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    if let Some(path) = flag {
        return if path.is_file() {
            Ok(path)
        } else {
            Err(Failure::error(
                "claude_not_found",
                format!(
                    "no Claude Code at `{}` (--claude); nothing was sent",
                    path.display()
                ),
            ))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join("claude"))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            Failure::error(
                "claude_not_found",
                "no Claude Code to send with: --claude was not given and no `claude` is on PATH; nothing was sent",
            )
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

fn message(flag: Option<String>) -> Result<String, Failure> {
    flag.map_or_else(read_stdin, Ok)
}

fn sentence(delivered: &Delivered) -> String {
    let record = delivered.session.record.as_ref();
    let name = record
        .and_then(claude_peer_registry::Record::display_name)
        .unwrap_or("the session");
    let pid = delivered
        .session
        .pid
        .map_or(0, claude_peer_registry::Pid::get);
    let msg_id = delivered
        .msg_id
        .as_deref()
        .map_or_else(String::new, |id| format!(" (msg_id {id})"));
    match delivered.receipt {
        Some(Outcome::Held) => format!(
            "Sent to {name} (pid {pid}) and held: the receiving user must approve it{msg_id}.\n"
        ),
        Some(_) => {
            format!("Delivered to {name} (pid {pid}): it accepted the message{msg_id}.\n")
        }
        None => {
            let how = match delivered.inbound {
                Inbound::Automatic => "it accepts messages automatically",
                Inbound::MayHold => "it may hold the message until its user approves it",
            };
            let detail = delivered
                .detail
                .as_deref()
                .map_or_else(String::new, |d| format!(" Relay: {d}."));
            format!("Delivered to {name} (pid {pid}); {how}.{detail}\n")
        }
    }
}

/// The message from stdin: at most one byte past the limit is read, and it must be UTF-8.
fn read_stdin() -> Result<String, Failure> {
    let mut bytes = Vec::new();
    io::stdin()
        .take(MAX_MESSAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|err| {
            Failure::error(
                "stdin_unreadable",
                format!("cannot read the message from stdin: {err}"),
            )
        })?;
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(Failure::error(
            "message_too_large",
            format!(
                "the message on stdin is above the limit of {MAX_MESSAGE_BYTES} bytes (64 KiB); nothing was relayed"
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        Failure::error(
            "message_not_utf8",
            "the message on stdin is not UTF-8; nothing was relayed",
        )
    })
}
