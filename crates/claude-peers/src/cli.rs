//! The command line, as clap sees it.
// Doc comments here are the --help text people read, not rustdoc: no Markdown backticks.
#![allow(clippy::doc_markdown)]

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::args::{ClaudeArg, ManagedSettingsArg, SenderArgs, TimeoutArg};
use crate::cmd;

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

    /// Ask this machine: an ssh destination (dev1, ada@box) or local; repeatable (list,
    /// show, send, watch, top, doctor, outbox, log)
    #[arg(long = "host", global = true, value_name = "HOST")]
    pub(crate) hosts: Vec<String>,

    /// Ask every host of $XDG_CONFIG_HOME/claude-peers/hosts (one a line, # comments)
    #[arg(long = "hosts", global = true)]
    pub(crate) every_host: bool,

    /// The claude-peers program on other hosts [default: claude-peers on their PATH]
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) remote_bin: Option<std::ffi::OsString>,

    /// The remote protocol of the claude-peers asking over ssh (the handshake)
    #[arg(long, global = true, hide = true, value_name = "N")]
    pub(crate) peer_protocol: Option<u32>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// List the live sessions (with --all, every record and its verdict)
    List(cmd::list::Args),
    /// Show one session in full, by session id or name
    Show(cmd::show::Args),
    /// Resolve a session id or name to exactly one live, addressable session, or refuse (exit 3)
    Resolve(cmd::resolve::Args),
    /// Read or change crossSessionInbound in the user's settings.json
    Settings(cmd::settings::Args),
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
    Send(cmd::send::Args),
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
        #[command(flatten)]
        sender: SenderArgs,
        #[command(flatten)]
        timeout: TimeoutArg,
        #[command(flatten)]
        managed_settings: ManagedSettingsArg,
    },
    /// Print an event whenever the live set or a live session changes, until interrupted
    Watch(cmd::watch::Args),
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
        #[command(flatten)]
        sender: SenderArgs,
        #[command(flatten)]
        managed_settings: ManagedSettingsArg,
    },
    /// The live Claude Code session this command runs under (through its parent processes)
    Whoami,
    /// Run the post office in the foreground: keep messages until their receiver can
    /// take them
    ///
    /// One per user (a second exits 1 naming the first). It keeps its store (SQLite) at
    /// $XDG_STATE_HOME/claude-peers/post.db and its lock and socket (JSON lines, this user
    /// only) in its runtime directory; each waiting message goes, through the same gate
    /// as send, as soon as its address resolves, in order per address, retried with
    /// backoff after a failure. It exits after --idle-exit with nothing waiting and no
    /// client, and on SIGINT or SIGTERM.
    Serve(cmd::serve::Args),
    /// The messages the post office still holds (waiting, sending, unknown), oldest first
    ///
    /// With --json, an array of message records. outbox cancel ID… cancels waiting or
    /// unknown ones; outbox retry ID… tries unknown ones again. A post office is started
    /// when none runs.
    Outbox(cmd::outbox::Args),
    /// The history: every message out and in, newest first, with its timeline
    ///
    /// Read from the store (no post office needed). --with TARGET is the conversation
    /// with one session, --search TEXT a full-text search, --thread ID a message and
    /// its replies; --in / --out pick a direction. --export writes the records as JSON
    /// lines, --import FILE reads them back (all, or at a bad line none).
    Log(cmd::log::Args),
    /// Answer a message that came in (log --in lists them), linked to it
    ///
    /// To the session it came from while that lives (as send sends); else queued in the
    /// post office for whichever session holds its name.
    Reply(cmd::reply::Args),
    /// Serve the sessions as MCP tools on stdin and stdout, for any MCP client
    ///
    /// Tools: list_sessions, show_session, whoami, inbound_policy, history (read-only),
    /// send_message and reply (through one long-lived Claude Code sender, as mailbox
    /// sends), outbox, and wait_for_messages (its replies and later receipts); the resource
    /// claude-peers://sessions, which a client can subscribe to. No tool changes
    /// settings. Diagnostics go to stderr. mcp install / mcp uninstall register it in
    /// Claude Code (claude mcp add / remove).
    Mcp {
        #[command(subcommand)]
        action: Option<cmd::mcp::Action>,
        #[command(flatten)]
        claude: ClaudeArg,
        #[command(flatten)]
        managed_settings: ManagedSettingsArg,
    },
    /// Check everything on the path of a message, and say what to do about each failure
    ///
    /// Checks: claude (which binary, found where, its version), messaging (it can
    /// message other sessions: probed), registry, runtime_dir (the sender's socket
    /// directory is the receivers'), hooks (no managed setting switches the guard hooks
    /// off), endpoint (a loopback port can be bound); with SESSION also target (live,
    /// addressable) and inbound (its effective crossSessionInbound). Exit 0 when all
    /// pass, 1 otherwise.
    Doctor(cmd::doctor::Args),
    /// Print a shell completion script
    Completions(cmd::completions::Args),
    /// Print the manual page (roff), made from the same definitions as --help
    Man,
}
