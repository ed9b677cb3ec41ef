//! The command line, as clap sees it.
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use claude_peer_settings::MANAGED_SETTINGS_PATH;

const AFTER_HELP: &str = "\
Exit codes:
  0  success
  1  error (unreadable registry or settings, invalid settings file, …)
  2  usage error
  3  refusal: the session cannot be resolved safely (not_live, identity_mismatch, not_addressable),
     or a send was refused (inbound_refused) or not delivered (delivery_failed)
  4  conflict: the settings file changed since the expected revision; nothing was written

The Claude home is --home, else $CLAUDE_CONFIG_DIR, else ~/.claude. With --json, stdout
holds exactly the documented JSON and diagnostics go to stderr.";

/// Find and inspect the live Claude Code sessions on this machine, resolve one safely
/// for messaging, and manage the crossSessionInbound policy.
#[derive(Debug, Parser)]
#[command(name = "claude-peers", version, after_help = AFTER_HELP, propagate_version = true)]
pub(crate) struct Cli {
    /// Claude home directory [default: $CLAUDE_CONFIG_DIR, else ~/.claude]
    #[arg(long, global = true, value_name = "DIR")]
    pub(crate) home: Option<PathBuf>,

    /// Print JSON on stdout (one value, or JSON lines for watch)
    #[arg(long, global = true)]
    pub(crate) json: bool,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the live sessions (with --all, every record and its verdict)
    List {
        /// Every record in the registry, each with its liveness verdict and reason
        #[arg(long)]
        all: bool,
    },
    /// Show one session in full, by session id or name
    Show {
        /// A session id, or the name of exactly one live session
        #[arg(value_name = "SESSION_ID|NAME")]
        target: String,
    },
    /// Resolve a session id or name to exactly one live, addressable session, or refuse (exit 3)
    Resolve {
        /// A session id, or the name of exactly one live session
        #[arg(value_name = "SESSION_ID|NAME")]
        session_id: String,
    },
    /// Read or change crossSessionInbound in the user's settings.json
    Settings {
        #[command(subcommand)]
        action: Option<SettingsAction>,
    },
    /// Send one message to live sessions (exit 3 when any refused or not delivered)
    ///
    /// Each session is resolved afresh, its inbound policy checked (refuse: nothing is
    /// sent), and the same process confirmed again just before sending. Several targets
    /// (or --all-live, --cwd) are sent to once each, in pid order, by one sender, and
    /// answered {"results":[…],"delivered":K,"failed":F}. By default a
    /// headless Claude Code sends it with its own SendMessage, driven by a scripted local
    /// model (no API key, no model cost), and reports what the receiver did, as its own
    /// transcript shows: read, queued (busy) or held; accepted when nothing could be
    /// learnt. After --, a relay program of yours sends it instead: it gets the target in
    /// CLAUDE_PEERS_TARGET_{SESSION_ID,NAME,PID,SOCKET,CWD}, the message on stdin, and
    /// confirms by exiting 0 after printing {"sent":true}.
    Send(SendArgs),
    /// Keep one Claude Code sender running: send many messages, hear every later outcome
    ///
    /// Requests on stdin, one JSON line each:
    /// {"id":"r1","send":{"session_id":"…","message":"…","notify_when_idle":false}}.
    /// "session_id" is a session id, or the name of exactly one live session.
    /// With "session_ids":["…",…] instead of "session_id", each session is sent to once,
    /// in pid order, and each target answered by its own event carrying "target".
    /// Events on stdout, one JSON line each: sent, refused, receipt (queued, read, held,
    /// released, denied, expired, refused, accepted), message (replies to the mailbox's address),
    /// idle, error, and closed last. End of stdin, SIGINT or SIGTERM close it cleanly.
    Mailbox {
        /// The sender's name, which receivers see
        #[arg(long, value_name = "NAME", default_value = claude_peer_sender::DEFAULT_SENDER_NAME)]
        from: String,
        /// The Claude Code that sends [default: claude on PATH]
        #[arg(long, value_name = "PATH")]
        claude: Option<PathBuf>,
        /// Seconds one send may take before the sender is killed
        #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = seconds)]
        timeout: Duration,
        /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
        #[arg(long, value_name = "FILE", default_value = MANAGED_SETTINGS_PATH)]
        managed_settings: PathBuf,
    },
    /// Print an event whenever the live set or a live session changes, until interrupted
    Watch {
        /// Poll the registry instead of using inotify (for file systems without it)
        #[arg(long)]
        poll: bool,
    },
    /// A live dashboard of every session, those waiting on their user first
    ///
    /// One row per live session: name, status and for how long, whether it can be
    /// messaged (or what became of the last message sent from here), when its record
    /// last changed, tmux pane, cwd. Keys: j/k or arrows move, Enter details, m message
    /// (sent as send sends it, its receipt shown on the row), / filter, p change
    /// crossSessionInbound, ? help, q quit. Needs a terminal.
    Top {
        /// Ring the terminal's bell when a session starts waiting on its user
        #[arg(long)]
        bell: bool,
        /// The name messages sent from the dashboard are from
        #[arg(long, value_name = "NAME", default_value = claude_peer_sender::DEFAULT_SENDER_NAME)]
        from: String,
        /// The Claude Code that sends them [default: claude on PATH]
        #[arg(long, value_name = "PATH")]
        claude: Option<PathBuf>,
        /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
        #[arg(long, value_name = "FILE", default_value = MANAGED_SETTINGS_PATH)]
        managed_settings: PathBuf,
    },
    /// The live Claude Code session this command runs under (through its parent processes)
    Whoami,
    /// Serve the sessions as MCP tools on stdin and stdout, for any MCP client
    ///
    /// Tools: list_sessions, show_session, inbound_policy (read-only) and send_message
    /// (through Claude Code, as send does); the resource claude-peers://sessions, which a
    /// client can subscribe to. No tool changes settings. Diagnostics go to stderr.
    Mcp {
        /// The Claude Code that send_message sends with [default: claude on PATH]
        #[arg(long, value_name = "PATH")]
        claude: Option<PathBuf>,
        /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
        #[arg(long, value_name = "FILE", default_value = MANAGED_SETTINGS_PATH)]
        managed_settings: PathBuf,
    },
    /// Check everything on the path of a message, and say what to do about each failure
    ///
    /// Checks: claude (which binary, found where, its version), messaging (it can
    /// message other sessions: probed), registry, runtime_dir (the sender's socket
    /// directory is the receivers'), hooks (no managed setting switches the guard hooks
    /// off), endpoint (a loopback port can be bound); with SESSION also target (live,
    /// addressable) and inbound (its effective crossSessionInbound). Exit 0 when all
    /// pass, 1 otherwise.
    Doctor {
        /// A session id or the name of one live session, to check the way to it too
        #[arg(value_name = "SESSION_ID|NAME")]
        session: Option<String>,
        /// The Claude Code to check [default: claude on PATH, else ~/.local/bin/claude,
        /// else ~/.claude/local/claude]
        #[arg(long, value_name = "PATH")]
        claude: Option<PathBuf>,
        /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
        #[arg(long, value_name = "FILE", default_value = MANAGED_SETTINGS_PATH)]
        managed_settings: PathBuf,
    },
    /// Print a shell completion script
    Completions {
        /// The shell
        shell: Shell,
    },
    /// Print the manual page (roff), made from the same definitions as --help
    Man,
}

#[derive(Debug, Subcommand)]
pub(crate) enum SettingsAction {
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
        /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
        #[arg(long, value_name = "FILE", default_value = MANAGED_SETTINGS_PATH)]
        managed_settings: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Policy {
    Accept,
    Hold,
    Refuse,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// A positive, finite number of seconds.
fn seconds(text: &str) -> Result<Duration, String> {
    seconds_or_zero(text).and_then(|duration| {
        if duration.is_zero() {
            Err(format!("`{text}` is not a positive number of seconds"))
        } else {
            Ok(duration)
        }
    })
}

/// The longest wait a duration flag accepts: a day. Longer is a mistake, and far longer
/// would overflow the clock's deadlines.
const MAX_SECONDS: f64 = 86_400.0;

/// A number of seconds from zero to a day.
fn seconds_or_zero(text: &str) -> Result<Duration, String> {
    text.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && (0.0..=MAX_SECONDS).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!("`{text}` is not a number of seconds from 0 to {MAX_SECONDS} (a day)")
        })
}

// `send`'s arguments, handed to the subcommand whole (its help is the variant's).
#[derive(Debug, Args)]
pub(crate) struct SendArgs {
    /// Session ids, or names of exactly one live session each
    #[arg(value_name = "TARGET")]
    pub(crate) targets: Vec<String>,
    /// Every live session too
    #[arg(long)]
    pub(crate) all_live: bool,
    /// Every live session whose working directory is DIR or below it too
    #[arg(long, value_name = "DIR")]
    pub(crate) cwd: Option<PathBuf>,
    /// Seconds to wait for a target that is not live yet before it is refused not_live
    #[arg(long, value_name = "SECONDS", value_parser = seconds)]
    pub(crate) wait_live: Option<Duration>,
    /// The message [default: read from stdin]
    #[arg(long, value_name = "TEXT")]
    pub(crate) message: Option<String>,
    /// The sender's name, which the receiver sees
    #[arg(long, value_name = "NAME", default_value = claude_peer_sender::DEFAULT_SENDER_NAME)]
    pub(crate) from: String,
    /// The Claude Code that sends [default: claude on PATH]
    #[arg(long, value_name = "PATH", conflicts_with = "relay")]
    pub(crate) claude: Option<PathBuf>,
    /// Seconds to wait for the send (and its receipt) before killing the sender
    #[arg(long, value_name = "SECONDS", default_value = "60", value_parser = seconds)]
    pub(crate) timeout: Duration,
    /// Seconds a queued message (its receiver is busy) is waited for to be read; 0
    /// returns at queued
    #[arg(long, value_name = "SECONDS", default_value = "2", value_parser = seconds_or_zero)]
    pub(crate) read_wait: Duration,
    /// Managed settings file (the managed-settings.d/*.json drop-ins beside it are read too)
    #[arg(long, value_name = "FILE", default_value = MANAGED_SETTINGS_PATH)]
    pub(crate) managed_settings: PathBuf,
    /// A relay program and its arguments, passed as given (no shell)
    #[arg(last = true, value_name = "PROGRAM [ARGS]")]
    pub(crate) relay: Vec<OsString>,
}
