//! Sending: the relay a send goes through, the message, and the send itself; also the
//! mailbox, which sends through the same gate.

use std::ffi::OsString;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use claude_peer_deliver::{CommandRelay, MAX_MESSAGE_BYTES, Relay};
use claude_peer_sender::{ClaudeRelay, Mailbox, Open};

use crate::ops::{Context, Error};

/// The first argument that runs the Claude sender's hooks (see [`claude`]).
pub(crate) const HOOK: &str = "hook";

/// How a send went out: through Claude Code, or a relay program of the user's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    Claude,
    Program,
}

/// The relay a send goes through.
#[derive(Debug)]
pub(crate) enum Relayed {
    /// Claude Code's own `SendMessage`, from a headless sender of this project.
    Claude(ClaudeRelay),
    /// A relay program of the user's.
    Program(CommandRelay),
}

impl Relayed {
    /// A relay program and its arguments, when `words` names one; else `claude`.
    pub(crate) fn program_or(
        words: Vec<OsString>,
        timeout: Duration,
        stop: Arc<AtomicBool>,
        claude: impl FnOnce() -> Result<ClaudeRelay, Error>,
    ) -> Result<Self, Error> {
        let mut words = words.into_iter();
        match words.next() {
            Some(program) => Ok(Self::Program(
                CommandRelay::new(program)
                    .args(words)
                    .timeout(timeout)
                    .stop_when(stop),
            )),
            None => claude().map(Self::Claude),
        }
    }

    pub(crate) const fn via(&self) -> Via {
        match self {
            Self::Claude(_) => Via::Claude,
            Self::Program(_) => Via::Program,
        }
    }
}

/// Runs `work`, which makes `sends` sends, with the relay they go through: for Claude
/// Code, one sender for them all (a batch; a lone send's own sender, which then fails
/// at once when its turn ends without the call), refused before it starts when managed
/// settings keep its guard hooks from running.
pub(crate) fn with_relay<T>(
    ctx: &Context,
    relay: &Relayed,
    sends: usize,
    work: impl FnOnce(&dyn Relay) -> T,
) -> Result<T, Error> {
    match relay {
        Relayed::Claude(relay) => {
            let relay = guarded(ctx, relay)?;
            if sends > 1 {
                Ok(work(&relay.batch()))
            } else {
                Ok(work(&relay))
            }
        }
        Relayed::Program(relay) => Ok(work(relay)),
    }
}

/// Opens mailboxes that send with `relay`'s sender through the same gate as `send`: one
/// each call, the mailbox service's [`Open`] (a sender refuses to start, as in
/// [`guarded`], when managed settings keep its guard hooks from running).
pub(crate) fn mailboxes(ctx: &Context, relay: &ClaudeRelay) -> Open {
    let relay = relay.clone().managed_settings(&ctx.managed_settings);
    let ctx = ctx.clone();
    Box::new(move || Mailbox::with_courier(ctx.courier(), ctx.home.clone(), &relay))
}

/// `relay` under the managed settings of `ctx`, refused before anything starts when they
/// keep its guard hooks from running.
pub(crate) fn guarded(ctx: &Context, relay: &ClaudeRelay) -> Result<ClaudeRelay, Error> {
    let relay = relay.clone().managed_settings(&ctx.managed_settings);
    relay.check()?;
    Ok(relay)
}

/// The Claude sender of `send`, `mailbox` and the MCP `send_message`: the Claude Code
/// [`find_claude`] finds, with this program as its hook, sending as `from` (checked
/// first: a name receivers could misread stops everything).
pub(crate) fn claude(
    claude: Option<PathBuf>,
    from: String,
    timeout: Duration,
) -> Result<ClaudeRelay, Error> {
    claude_peer_sender::check_sender_name(&from)?;
    let claude = find_claude(claude)?;
    let hook = std::env::current_exe().map_err(Error::NoHookProgram)?;
    Ok(
        ClaudeRelay::new(claude.path, vec![hook.into(), HOOK.into()])
            .from(from)
            .timeout(timeout),
    )
}

/// Where a Claude Code was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// `--claude`.
    Flag,
    /// `claude` on `PATH`.
    Path,
    /// The native installer's `~/.local/bin/claude`.
    NativeInstaller,
    /// An older installer's `~/.claude/local/claude`.
    LocalInstall,
}

impl Found {
    pub(crate) const fn describe(self) -> &'static str {
        match self {
            Self::Flag => "given with --claude",
            Self::Path => "on PATH",
            Self::NativeInstaller => "in ~/.local/bin, where the native installer puts it",
            Self::LocalInstall => "in ~/.claude/local, where older installers put it",
        }
    }
}

/// A Claude Code binary and where it was found.
#[derive(Debug, Clone)]
pub(crate) struct ClaudeBinary {
    pub(crate) path: PathBuf,
    pub(crate) found: Found,
}

/// The Claude Code to send with: `--claude`, else `claude` on `PATH`, else the native
/// installer's `~/.local/bin/claude`, else `~/.claude/local/claude`. When there is none,
/// the error names every place looked in. Only absolute `PATH` entries count: an empty
/// or relative one would be looked up from wherever this runs, so a `./claude` planted in
/// a working directory never sends.
pub(crate) fn find_claude(flag: Option<PathBuf>) -> Result<ClaudeBinary, Error> {
    if let Some(path) = flag.map(super::absolute) {
        return if path.is_file() {
            Ok(ClaudeBinary {
                path,
                found: Found::Flag,
            })
        } else {
            Err(Error::ClaudeNotAt(path))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| (dir.join("claude"), Found::Path));
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute());
    let installed = home.iter().flat_map(|home| {
        [
            (home.join(".local/bin/claude"), Found::NativeInstaller),
            (home.join(".claude/local/claude"), Found::LocalInstall),
        ]
    });
    let candidates: Vec<(PathBuf, Found)> = on_path.chain(installed).collect();
    if let Some((path, found)) = candidates.iter().find(|(path, _)| is_executable(path)) {
        return Ok(ClaudeBinary {
            path: path.clone(),
            found: *found,
        });
    }
    let looked = candidates
        .into_iter()
        .filter(|(_, found)| *found != Found::Path)
        .map(|(path, _)| path)
        .collect();
    Err(Error::NoClaude { looked })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The message from stdin: at most one byte past the gate's limit is read (so a larger
/// one is known to be too large without reading it all), and it must be UTF-8.
pub(crate) fn message_from_stdin() -> Result<String, Error> {
    let mut bytes = Vec::new();
    io::stdin()
        .take(MAX_MESSAGE_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(Error::StdinUnreadable)?;
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(Error::MessageTooLarge);
    }
    String::from_utf8(bytes).map_err(|_| Error::MessageNotUtf8)
}
