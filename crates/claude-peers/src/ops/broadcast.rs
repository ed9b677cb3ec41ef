//! Sending one message to several sessions: whom the targets name (ids, unique names,
//! every live session, those under a directory), the ones not live yet waited for, and
//! one send per session through the same gate and, for Claude Code, one sender.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use claude_peer_deliver::{Delivered, Relay};
use claude_peer_resolve::{Discovery, RefusalKind};
use claude_peer_watch::Watcher;

use crate::error::Failure;
use crate::ops::Context;
use crate::ops::send::{self, Relayed};

/// Whom one send is for.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    /// Session ids or names of exactly one live session, as given.
    pub(crate) given: Vec<String>,
    /// Every live session.
    pub(crate) all_live: bool,
    /// Every live session whose working directory is this one or below it.
    pub(crate) cwd: Option<PathBuf>,
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
    pub(crate) fn new(ctx: &Context, targets: &Targets) -> Result<Self, Failure> {
        let mut resolved: Vec<(String, Result<Chosen, Failure>)> = targets
            .given
            .iter()
            .map(|target| (target.clone(), resolve(ctx, target)))
            .collect();
        if let Some(limit) = targets.wait_live {
            wait_live(ctx, &mut resolved, limit)?;
        }
        if targets.all_live || targets.cwd.is_some() {
            let mut live = Discovery::os().live(&ctx.home)?.sessions;
            live.sort_by_key(|s| s.pid.get());
            for session in live {
                let under = |dir: &Path| {
                    session
                        .record
                        .cwd
                        .as_deref()
                        .is_some_and(|cwd| Path::new(cwd).starts_with(dir))
                };
                if targets.cwd.as_deref().is_none_or(under) {
                    let session_id = session.record.session_id.clone();
                    let chosen = Chosen {
                        session_id: session_id.clone(),
                        pid: session.pid.get(),
                    };
                    resolved.push((session_id, Ok(chosen)));
                }
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

/// The live session `target` names: its id, else the name of exactly one live session;
/// the refusal a single send would give otherwise.
fn resolve(ctx: &Context, target: &str) -> Result<Chosen, Failure> {
    let discovery = Discovery::os();
    let by_id = discovery.resolve_live_session(&ctx.home, target);
    let session = match by_id {
        Err(err)
            if err
                .refusal()
                .is_some_and(|r| r.kind == RefusalKind::NotLive) =>
        {
            discovery
                .resolve_by_name(&ctx.home, target)
                .map_err(|by_name| match by_name.refusal().map(|r| r.kind) {
                    // Neither an id nor a name: the id's own words.
                    Some(RefusalKind::NotLive) => err,
                    _ => by_name,
                })?
        }
        other => other?,
    };
    Ok(Chosen {
        session_id: session.record.session_id.clone(),
        pid: session.pid.get(),
    })
}

/// Waits up to `limit` for the targets not live yet to become live and addressable,
/// following the registry with the watch engine; the others are left as they are.
fn wait_live(
    ctx: &Context,
    resolved: &mut [(String, Result<Chosen, Failure>)],
    limit: Duration,
) -> Result<(), Failure> {
    let waiting = |result: &Result<Chosen, Failure>| {
        result.as_ref().is_err_and(|failure| {
            failure.name == RefusalKind::NotLive.as_str()
                || failure.name == RefusalKind::NotAddressable.as_str()
        })
    };
    if !resolved.iter().any(|(_, r)| waiting(r)) {
        return Ok(());
    }
    let deadline = Instant::now() + limit;
    let mut watcher = Watcher::os(ctx.home.clone())?;
    loop {
        for (target, result) in resolved.iter_mut().filter(|(_, r)| waiting(r)) {
            *result = resolve(ctx, target);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || !resolved.iter().any(|(_, r)| waiting(r)) {
            return Ok(());
        }
        // An event, or a short while: a socket appears without a registry event.
        watcher.next_event(left.min(RETRY_EVERY))?;
    }
}

/// How often targets still waited for are resolved again without an event.
const RETRY_EVERY: Duration = Duration::from_millis(250);
