//! `doctor`: every check on the path of a message, each with what to do when it fails.

use std::io::Read;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use claude_peer_deliver::Inbound;
use claude_peer_deliver::child::{ChildGroup, Ended};
use claude_peer_resolve::{AddressableSession, Discovery, LiveSession, RefusalKind, Scan};
use claude_peer_sender::{Capabilities, DEFAULT_SENDER_NAME};

use crate::ops::Context;
use crate::ops::send::{self, ClaudeBinary};

/// How long `claude --version` may take.
const VERSION_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the probe of what Claude Code can do may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a loopback connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// One check: its stable name, whether it passed, what was found, and what to do.
#[derive(Debug, Clone)]
pub(crate) struct Check {
    pub(crate) name: &'static str,
    pub(crate) ok: bool,
    pub(crate) detail: String,
    pub(crate) fix: Option<String>,
}

impl Check {
    fn pass(name: &'static str, detail: impl Into<String>) -> Self {
        Self {
            name,
            ok: true,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            name,
            ok: false,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Runs every check, in the order a message meets them; `session` adds the way to it.
pub(crate) fn doctor(ctx: &Context, session: Option<&str>, claude: Option<PathBuf>) -> Vec<Check> {
    let mut checks = Vec::new();
    let found = send::find_claude(claude);
    checks.push(match &found {
        Ok(binary) => claude_check(binary),
        Err(err) => Check::fail(
            "claude",
            err.to_string(),
            "install Claude Code (the native installer puts it in ~/.local/bin), or name it with --claude PATH",
        ),
    });
    let probed = match found {
        Ok(binary) => probe(ctx, &binary),
        Err(_) => Probed::NoClaude,
    };
    checks.push(messaging_check(&probed));
    let live = Discovery::os().live(&ctx.home);
    checks.push(registry_check(ctx, &live));
    checks.push(runtime_dir_check(&probed, &live));
    checks.push(hooks_check(&ctx.managed_settings));
    checks.push(endpoint_check());
    if let Some(session) = session {
        match target(ctx, session) {
            Ok(target) => {
                checks.push(Check::pass(
                    "target",
                    format!(
                        "{} (pid {}) is live and addressable at `{}`",
                        target.record.display_name().unwrap_or(session),
                        target.pid,
                        target.socket.display()
                    ),
                ));
                checks.push(inbound_check(ctx, &target));
            }
            Err(err) => {
                checks.push(Check::fail("target", err.to_string(), target_fix(&err)));
                checks.push(Check::fail(
                    "inbound",
                    "no target to read the policy of",
                    "fix the target first",
                ));
            }
        }
    }
    checks
}

fn claude_check(binary: &ClaudeBinary) -> Check {
    let path = binary.path.display();
    let where_ = binary.found.describe();
    match version(&binary.path) {
        Ok(version) => Check::pass("claude", format!("`{path}` ({where_}), {version}")),
        Err(why) => Check::fail(
            "claude",
            format!("`{path}` ({where_}) does not run: {why}"),
            "reinstall Claude Code, or name a working one with --claude PATH",
        ),
    }
}

/// `claude --version`, its first line; bounded in time and size.
fn version(claude: &Path) -> Result<String, String> {
    let mut child = Command::new(claude)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|err| err.to_string())?;
    let stdout = child.stdout.take();
    let mut group = ChildGroup::new(child);
    let status = group.wait_then_kill(VERSION_TIMEOUT);
    let mut out = Vec::new();
    if let Some(stdout) = stdout {
        let _ = stdout.take(4096).read_to_end(&mut out);
    }
    match status {
        Ended::Exited(status) if status.success() => Ok(String::from_utf8_lossy(&out)
            .lines()
            .next()
            .unwrap_or("version unknown")
            .trim()
            .to_owned()),
        Ended::Exited(status) => Err(format!("`--version` ended with {status}")),
        Ended::Killed => Err(format!(
            "`--version` did not finish within {} s",
            VERSION_TIMEOUT.as_secs()
        )),
    }
}

/// What probing Claude Code found.
#[derive(Debug)]
enum Probed {
    /// No Claude Code to probe.
    NoClaude,
    /// It could not be started as a sender, for this reason.
    Failed(String),
    /// What its first turn said it can do.
    Ran(Capabilities),
}

/// What the found Claude Code can do, probed as a send would start it: under the same
/// managed settings, so hooks they switch off stop the probe as they stop a send.
fn probe(ctx: &Context, binary: &ClaudeBinary) -> Probed {
    let relay = send::claude(
        Some(binary.path.clone()),
        DEFAULT_SENDER_NAME.to_owned(),
        PROBE_TIMEOUT,
    );
    match relay.map(|relay| relay.managed_settings(&ctx.managed_settings).probe()) {
        Ok(Ok(capabilities)) => Probed::Ran(capabilities),
        Ok(Err(err)) => Probed::Failed(err.to_string()),
        Err(err) => Probed::Failed(err.to_string()),
    }
}

fn messaging_check(probed: &Probed) -> Check {
    const UPGRADE: &str = "use a Claude Code that messages other sessions (2.1.332 does): upgrade it, or name one with --claude PATH";
    let capabilities = match probed {
        Probed::NoClaude => {
            return Check::fail(
                "messaging",
                "no Claude Code to probe",
                "fix the claude check first",
            );
        }
        Probed::Failed(why) => {
            return Check::fail(
                "messaging",
                format!("Claude Code could not be started as a sender: {why}"),
                "see the claude check; a Claude Code that starts headless (`claude -p`) is needed",
            );
        }
        Probed::Ran(capabilities) => capabilities,
    };
    let version = capabilities
        .version
        .as_deref()
        .unwrap_or("of unknown version");
    match (&capabilities.messaging_socket, capabilities.send_message) {
        (Some(socket), true) => Check::pass(
            "messaging",
            format!(
                "Claude Code {version} offers SendMessage and opened its messaging socket `{}`",
                socket.display()
            ),
        ),
        (None, true) => Check::fail(
            "messaging",
            format!(
                "Claude Code {version} offers SendMessage but opened no messaging socket: it cannot message other sessions"
            ),
            UPGRADE,
        ),
        (_, false) => Check::fail(
            "messaging",
            format!("Claude Code {version} offers no SendMessage tool"),
            UPGRADE,
        ),
    }
}

type Live = Result<Scan<LiveSession>, claude_peer_resolve::Error>;

fn registry_check(ctx: &Context, live: &Live) -> Check {
    let dir = ctx.home.sessions_dir();
    match live {
        Ok(scan) if scan.warnings.is_empty() => Check::pass(
            "registry",
            format!(
                "`{}`: {} live session{}",
                dir.display(),
                scan.entries.len(),
                if scan.entries.len() == 1 { "" } else { "s" }
            ),
        ),
        Ok(scan) => Check::fail(
            "registry",
            scan.warnings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            format!(
                "make `{}` a directory of yours that nobody else can write (`chmod 700`)",
                dir.display()
            ),
        ),
        Err(err) => Check::fail(
            "registry",
            err.to_string(),
            "check --home (or CLAUDE_CONFIG_DIR): it must be the Claude home your sessions run in",
        ),
    }
}

fn runtime_dir_check(probed: &Probed, live: &Live) -> Check {
    let Probed::Ran(Capabilities {
        messaging_socket: Some(ours),
        ..
    }) = probed
    else {
        return Check::fail(
            "runtime_dir",
            "the sender's socket directory is unknown: no messaging socket was probed",
            "fix the messaging check first",
        );
    };
    let ours = ours.parent().unwrap_or(Path::new("/"));
    let Ok(scan) = live else {
        return Check::fail(
            "runtime_dir",
            "the registry cannot be read",
            "fix the registry check first",
        );
    };
    let elsewhere: Vec<String> = scan
        .entries
        .iter()
        .filter_map(|s| {
            let socket = Path::new(s.record.messaging_socket_path.as_deref()?);
            let dir = socket.parent()?;
            (dir != ours).then(|| {
                format!(
                    "{} (pid {}) in `{}`",
                    s.record.display_name().unwrap_or("a session"),
                    s.pid,
                    dir.display()
                )
            })
        })
        .collect();
    if elsewhere.is_empty() {
        Check::pass(
            "runtime_dir",
            format!(
                "the sender's socket directory `{}` is every live session's",
                ours.display()
            ),
        )
    } else {
        Check::fail(
            "runtime_dir",
            format!(
                "the sender's sockets are in `{}`, but these sessions' are elsewhere: {}; their notices (held, refused, released) never reach it",
                ours.display(),
                elsewhere.join(", ")
            ),
            "run claude-peers with the XDG_RUNTIME_DIR your Claude Code sessions have (set it alike, or unset it in both)",
        )
    }
}

fn hooks_check(managed: &Path) -> Check {
    let found = claude_peer_settings::ManagedSettings::read(managed);
    let off = found.hooks_off();
    if !off.is_empty() {
        let off: Vec<String> = off
            .iter()
            .map(|off| format!("`{}` sets {}", off.path.display(), off.setting))
            .collect();
        return Check::fail(
            "hooks",
            format!(
                "managed settings keep the hooks that guard every send from running ({}), so no send is made",
                off.join("; ")
            ),
            "ask whoever manages this machine to drop that setting",
        );
    }
    let unreadable: Vec<String> = found.unreadable().map(ToString::to_string).collect();
    if !unreadable.is_empty() {
        return Check::fail(
            "hooks",
            format!(
                "what managed settings switch off cannot be told: {}",
                unreadable.join("; ")
            ),
            "make the managed settings readable JSON; until then every send proves its guard runs before sending",
        );
    }
    let read: Vec<String> = found
        .read_documents()
        .map(|path| format!("`{}`", path.display()))
        .collect();
    if read.is_empty() {
        Check::pass(
            "hooks",
            format!("no managed settings at `{}`", managed.display()),
        )
    } else {
        Check::pass(
            "hooks",
            format!("the managed settings {} leave hooks on", read.join(", ")),
        )
    }
}

/// The sender's scripted model listens on 127.0.0.1 and Claude Code connects to it: a
/// port is bound and connected to, as they will be.
fn endpoint_check() -> Check {
    let reached = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).and_then(|listener| {
        let addr = listener.local_addr()?;
        TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
        Ok(addr.port())
    });
    match reached {
        Ok(port) => Check::pass(
            "endpoint",
            format!("the scripted model can listen on 127.0.0.1 and be reached (port {port} was)"),
        ),
        Err(err) => Check::fail(
            "endpoint",
            format!("no loopback port can be listened on and reached: {err}"),
            "the sender's scripted model listens on 127.0.0.1: bring up the loopback interface, or allow its ports",
        ),
    }
}

/// The session `session` names, by the rule every target follows (its id, or else the
/// name of one live session), or the refusal, whose words say why it is not live, which
/// sessions share it, or why it cannot be messaged.
fn target(ctx: &Context, session: &str) -> Result<AddressableSession, claude_peer_resolve::Error> {
    Discovery::os().resolve_live_session(&ctx.home, session)
}

/// What to do about a target that does not resolve, for each refusal.
fn target_fix(err: &claude_peer_resolve::Error) -> &'static str {
    match err.refusal().map(|r| r.kind) {
        Some(RefusalKind::NotAddressable) => {
            "it runs but takes no messages as it is: `claude-peers list` shows which sessions can be messaged (a foreground session of a Claude Code with peer messaging, its socket owned by this user)"
        }
        Some(RefusalKind::IdentityMismatch) => {
            "name the session by its id from `claude-peers list`, or rename one of the sessions that share the name"
        }
        _ => {
            "check the id or name with `claude-peers list`; a /clear or resume gives a session a new id"
        }
    }
}

/// The gate's own decision ([`claude_peer_deliver::Courier::inbound_of`]): a refusal
/// there is a refusal here, in the same words.
fn inbound_check(ctx: &Context, target: &AddressableSession) -> Check {
    match ctx.courier().inbound_of(&ctx.home, target) {
        Err(err) => Check::fail(
            "inbound",
            err.to_string(),
            "set its crossSessionInbound to accept (or hold) in the file named, or make that file readable; for the user's own settings: claude-peers settings set accept",
        ),
        Ok((inbound, policy)) => {
            let what = match inbound {
                Inbound::Automatic => "messages are read at once",
                Inbound::MayHold => "a message may wait for its user's approval",
            };
            Check::pass(
                "inbound",
                format!(
                    "crossSessionInbound is `{}`, decided by {}: {what}",
                    policy.value.as_str(),
                    policy.decider()
                ),
            )
        }
    }
}
