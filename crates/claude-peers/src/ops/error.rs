//! What can stop an operation, typed: the libraries' errors as they come, and the
//! command's own. How each is reported (exit code, JSON) is the view's (`error.rs`).

use std::io;
use std::path::{Path, PathBuf};

use claude_peer_deliver::{MAX_MESSAGE_BYTES, Refusal};

/// Why an operation did not succeed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Error {
    #[error(transparent)]
    Resolve(#[from] claude_peer_resolve::Error),
    #[error(transparent)]
    Deliver(#[from] claude_peer_deliver::Error),
    #[error(transparent)]
    Sender(#[from] claude_peer_sender::Error),
    #[error(transparent)]
    Settings(#[from] claude_peer_settings::Error),
    #[error(transparent)]
    Watch(#[from] claude_peer_watch::Error),
    #[error(transparent)]
    Post(#[from] claude_peer_post::Error),
    /// No `--home`, `CLAUDE_CONFIG_DIR` or `HOME` to find the Claude home by.
    #[error("no Claude home: pass --home, or set CLAUDE_CONFIG_DIR or HOME")]
    NoHome,
    /// The working directory a policy is read for cannot be read.
    #[error("cannot read the current directory: {0}")]
    NoCwd(#[source] io::Error),
    /// This program cannot be found to run as the sender's hook.
    #[error("cannot find this program to run as the sender's hook: {0}")]
    NoHookProgram(#[source] io::Error),
    /// `--claude` names no file.
    #[error("no Claude Code at `{}` (--claude); nothing was sent", .0.display())]
    ClaudeNotAt(PathBuf),
    /// No Claude Code on `PATH` nor where the installers put it (these places).
    #[error(
        "no Claude Code to send with: --claude was not given, no `claude` is on PATH, and none is at {}; nothing was sent",
        places(.looked)
    )]
    NoClaude { looked: Vec<PathBuf> },
    /// Nobody to send to: no target, `--all-live` or `--cwd`.
    #[error("name a session (its id or name), or pass --all-live or --cwd DIR; nothing was sent")]
    NoTarget,
    #[error("cannot read the message from stdin: {0}")]
    StdinUnreadable(#[source] io::Error),
    #[error(
        "the message on stdin is above the limit of {limit} bytes (64 KiB); nothing was relayed",
        limit = MAX_MESSAGE_BYTES
    )]
    MessageTooLarge,
    #[error("the message on stdin is not UTF-8; nothing was relayed")]
    MessageNotUtf8,
    /// `reply`: the message was one of ours, going out.
    #[error("message {id} was sent from here (to {to}): a reply answers a message that came in")]
    NotAMessageIn { id: String, to: String },
    /// `reply`: the message came from a session that is gone and gave no name.
    #[error(
        "message {id} came from session {from}, which is not live and gave no name: nothing can reach it"
    )]
    NoReplyAddress { id: String, from: String },
    /// `show`: the target is no record's session id and no live session's name.
    #[error("no record has session id `{0}` and no live session is named `{0}`")]
    NotFound(String),
    /// `whoami`: no ancestor of the process is a live session of this Claude home.
    #[error(
        "no parent process of this one is a live Claude Code session of {} (run it from a session's Bash tool, or as its MCP server)",
        .0.display()
    )]
    NotInASession(PathBuf),
    /// An MCP call was cancelled by its client while it waited for its turn.
    #[error("the call was cancelled before its turn to send; nothing was sent")]
    Cancelled,
    /// The running post office delivers to another Claude home.
    #[error(
        "the post office running{} delivers to the Claude home `{}`, not to `{}`; stop it to start one for this home",
        .pid.map(|pid| format!(" (pid {pid})")).unwrap_or_default(),
        .theirs.display(),
        .ours.display()
    )]
    OtherHome {
        pid: Option<u32>,
        theirs: PathBuf,
        ours: PathBuf,
    },
    /// The post office answered a post without the message's record.
    #[error("the post office answered without the message's record")]
    NoRecord,
    /// No post office could be started.
    #[error("cannot start the post office (claude-peers serve): {0}")]
    PostOfficeStart(#[source] io::Error),
    /// The MCP server's mailbox ended before a call's turn came.
    #[error("the server's mailbox ended before the message was sent; nothing was sent")]
    MailboxEnded,
}

impl Error {
    /// The refusal, when this error is one, in the gate's terms (whichever library said
    /// it).
    pub(crate) fn refusal(&self) -> Option<Refusal> {
        match self {
            Self::Resolve(err) | Self::Watch(claude_peer_watch::Error::Scan(err)) => {
                err.refusal().cloned().map(Refusal::from)
            }
            Self::Deliver(err) | Self::Sender(claude_peer_sender::Error::Delivery(err)) => {
                deliver_refusal(err)
            }
            _ => None,
        }
    }

    /// The stable machine name: a refusal's kind, the library's own name, or the
    /// command's.
    pub(crate) fn as_str(&self) -> &'static str {
        if let Some(refusal) = self.refusal() {
            return refusal.kind.as_str();
        }
        match self {
            Self::Resolve(_)
            | Self::Watch(claude_peer_watch::Error::Scan(_))
            | Self::Deliver(claude_peer_deliver::Error::Discovery(_))
            | Self::Sender(claude_peer_sender::Error::Delivery(
                claude_peer_deliver::Error::Discovery(_),
            )) => "registry_unreadable",
            Self::Deliver(err) | Self::Sender(claude_peer_sender::Error::Delivery(err)) => {
                err.as_str()
            }
            Self::Sender(err) => err.as_str(),
            Self::Settings(err) => err.as_str(),
            Self::Watch(_) => "watch_failed",
            Self::Post(err) => err.as_str(),
            Self::NoHome => "no_home",
            Self::NoCwd(_) => "no_cwd",
            Self::NoHookProgram(_) => "no_hook_program",
            Self::ClaudeNotAt(_) | Self::NoClaude { .. } => "claude_not_found",
            Self::NoTarget => "no_target",
            Self::StdinUnreadable(_) => "stdin_unreadable",
            Self::MessageTooLarge => "message_too_large",
            Self::MessageNotUtf8 => "message_not_utf8",
            Self::NotFound(_) => "not_found",
            Self::NotAMessageIn { .. } => "not_a_message_in",
            Self::NoReplyAddress { .. } => "no_reply_address",
            Self::NotInASession(_) => "not_in_a_session",
            Self::Cancelled => "cancelled",
            Self::MailboxEnded => "mailbox_ended",
            Self::OtherHome { .. } => "post_office_other_home",
            Self::NoRecord => "post_office_failed",
            Self::PostOfficeStart(_) => "post_office_start_failed",
        }
    }
}

/// A delivery's refusal, the registry's own included.
fn deliver_refusal(err: &claude_peer_deliver::Error) -> Option<Refusal> {
    match err {
        claude_peer_deliver::Error::Discovery(err) => err.refusal().cloned().map(Refusal::from),
        err => err.refusal().cloned(),
    }
}

/// The installers' places looked in, for [`Error::NoClaude`].
fn places(looked: &[PathBuf]) -> String {
    if looked.is_empty() {
        return "the installers' places (HOME is not set)".to_owned();
    }
    let quoted: Vec<String> = looked.iter().map(|p| quote(p)).collect();
    quoted.join(" or ")
}

fn quote(path: &Path) -> String {
    format!("`{}`", path.display())
}
