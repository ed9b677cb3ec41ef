//! Sending one message to several sessions: whom the targets name (ids, unique names,
//! every live session, those under a directory), the ones not live yet waited for, and
//! one send per session through the same gate and, for Claude Code, one sender.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use claude_peer_deliver::{Delivered, Relay};
use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_resolve::{Discovery, LiveSession, RefusalKind, Roster, Scope, Target};
use claude_peer_watch::Watcher;

use crate::error::Failure;
use crate::ops::Context;
use crate::ops::send::{self, Relayed};

/// Whom one send is for.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    /// Session ids or names of exactly one live session, as given.
    pub(crate) given: Vec<String>,
    /// Every live session (`--all-live`), or those under a directory (`--cwd`).
    pub(crate) select: Option<Target>,
    /// How long a given target that is not live yet is waited for.
    pub(crate) wait_live: Option<Duration>,
}

/// What became of one target.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// The target as given (a session id for the sessions `--all-live` or `--cwd` chose).
    pub(crate) target: String,
    pub(crate) result: Result<Delivered, Failure>,
}

/// A session a target resolved to: where it stands in the order of sends.
#[derive(Debug, Clone)]
struct Chosen {
    session_id: String,
    pid: u32,
}

/// Sends `message` to every session `targets` name, each once, in the order of their
/// pids, through `relay` (one Claude Code sender for all of them); each gets every check
/// of a single send. The outcomes are in the order the targets were given, then the
/// sessions chosen by `--all-live` or `--cwd`, by pid.
pub(crate) fn broadcast(
    ctx: &Context,
    targets: &Targets,
    message: &str,
    relay: &Relayed,
) -> Result<Vec<Outcome>, Failure> {
    let plan = Plan::new(ctx, targets)?;
    send::with_relay(ctx, relay, plan.order.len(), |relay: &dyn Relay| {
        plan.send(|session_id| {
            ctx.courier()
                .deliver(&ctx.home, session_id, message, &relay)
                .map_err(Failure::from)
        })
    })
}

/// [`broadcast`] with each session sent to by `send` (a mailbox's, say): the same
/// targets, order and outcomes.
pub(crate) fn broadcast_with(
    ctx: &Context,
    targets: &Targets,
    send_to: impl FnMut(&str) -> Result<Delivered, Failure>,
) -> Result<Vec<Outcome>, Failure> {
    Ok(Plan::new(ctx, targets)?.send(send_to))
}

/// The targets resolved, and the sessions to send to in the order of their pids.
pub(crate) struct Plan {
    resolved: Vec<(String, Result<Chosen, Failure>)>,
    order: Vec<Chosen>,
}

impl Plan {
    /// Resolves every target against one scan of the registry (another only while
    /// `--wait-live` waits); each send still resolves its session again at the gate.
    pub(crate) fn new(ctx: &Context, targets: &Targets) -> Result<Self, Failure> {
        let discovery = Discovery::os();
        let mut roster = discovery.roster(&ctx.home, Scope::Live)?;
        let mut resolved: Vec<(String, Result<Chosen, Failure>)> = targets
            .given
            .iter()
            .map(|target| (target.clone(), chosen(&roster, target)))
            .collect();
        if let Some(limit) = targets.wait_live {
            roster = wait_live(ctx, &discovery, roster, &mut resolved, limit)?;
        }
        if let Some(select) = &targets.select {
            // By pid, as a roster has them.
            for session in &roster.select(select)? {
                let chosen = Chosen::of(session);
                resolved.push((chosen.session_id.clone(), Ok(chosen)));
            }
        }
        // One send per session, in the order of their pids.
        let mut order: Vec<Chosen> = Vec::new();
        for chosen in resolved.iter().filter_map(|(_, r)| r.as_ref().ok()) {
            if !order.iter().any(|c| c.session_id == chosen.session_id) {
                order.push(chosen.clone());
            }
        }
        order.sort_by_key(|c| c.pid);
        Ok(Self { resolved, order })
    }

    /// The targets that name no session to send to, as given, and why.
    pub(crate) fn refused(&self) -> impl Iterator<Item = (&str, &Failure)> {
        self.resolved
            .iter()
            .filter_map(|(target, chosen)| chosen.as_ref().err().map(|f| (target.as_str(), f)))
    }

    /// The sessions to send to, in the order of their pids, each with the targets (as
    /// given) that name it.
    pub(crate) fn sessions(&self) -> impl Iterator<Item = (&str, Vec<&str>)> {
        self.order.iter().map(|session| {
            let named = self.resolved.iter().filter(|(_, chosen)| {
                chosen
                    .as_ref()
                    .is_ok_and(|c| c.session_id == session.session_id)
            });
            let targets = named.map(|(target, _)| target.as_str()).collect();
            (session.session_id.as_str(), targets)
        })
    }

    /// Sends to each session once with `send`; every target's outcome.
    fn send(self, mut send_to: impl FnMut(&str) -> Result<Delivered, Failure>) -> Vec<Outcome> {
        let mut sent: HashMap<String, Result<Delivered, Failure>> = HashMap::new();
        for chosen in &self.order {
            sent.insert(chosen.session_id.clone(), send_to(&chosen.session_id));
        }
        self.resolved
            .into_iter()
            .map(|(target, chosen)| {
                let result = chosen.and_then(|chosen| {
                    sent.get(&chosen.session_id).cloned().unwrap_or_else(|| {
                        Err(Failure::error(
                            "internal",
                            "a chosen session was not sent to",
                        ))
                    })
                });
                Outcome { target, result }
            })
            .collect()
    }
}

impl Chosen {
    fn of(session: &LiveSession) -> Self {
        Self {
            session_id: session.record.session_id.clone(),
            pid: session.pid.get(),
        }
    }
}

/// The live session `target` names in `roster`: its id, else the name of exactly one
/// live session; the refusal a single send would give otherwise.
fn chosen(roster: &Os<'_>, target: &str) -> Result<Chosen, Failure> {
    let session = roster.resolve(target)?;
    Ok(Chosen::of(&session.into()))
}

/// A roster of this machine's registry.
type Os<'d> = Roster<'d, OsProcessTable, OsRegistryFs>;

/// Waits up to `limit` for the targets not live yet to become live and addressable,
/// following the registry with the watch engine; the others are left as they are. The
/// registry as last read is handed back, for the selectors to choose from.
fn wait_live<'d>(
    ctx: &Context,
    discovery: &'d Discovery<OsProcessTable, OsRegistryFs>,
    mut roster: Os<'d>,
    resolved: &mut [(String, Result<Chosen, Failure>)],
    limit: Duration,
) -> Result<Os<'d>, Failure> {
    let waiting = |result: &Result<Chosen, Failure>| {
        result.as_ref().is_err_and(|failure| {
            failure.name == RefusalKind::NotLive.as_str()
                || failure.name == RefusalKind::NotAddressable.as_str()
        })
    };
    if !resolved.iter().any(|(_, r)| waiting(r)) {
        return Ok(roster);
    }
    let deadline = Instant::now() + limit;
    let mut watcher = Watcher::os(ctx.home.clone())?;
    loop {
        roster = discovery.roster(&ctx.home, Scope::Live)?;
        for (target, result) in resolved.iter_mut().filter(|(_, r)| waiting(r)) {
            *result = chosen(&roster, target);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !resolved.iter().any(|(_, r)| waiting(r)) {
            return Ok(roster);
        }
        // An event, or a short while: a socket appears without a registry event.
        watcher.next_event(left.min(RETRY_EVERY))?;
    }
}

/// How often targets still waited for are resolved again without an event.
const RETRY_EVERY: Duration = Duration::from_millis(250);
