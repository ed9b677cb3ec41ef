//! Sending one message to several sessions: whom the targets name (ids, unique names,
//! every live session, those under a directory), the ones not live yet waited for, and
//! one send per session through the same gate and, for Claude Code, one sender.

use std::time::{Duration, Instant};

use claude_peer_deliver::RefusalKind::Unresolved;
use claude_peer_deliver::{Delivered, Relay};
use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_resolve::{Discovery, LiveSession, RefusalKind, Roster, Scope, Target};
use claude_peer_watch::Watcher;

use crate::ops::send::{self, Relayed};
use crate::ops::{Context, Error};

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

impl Targets {
    /// Refuses a send to nobody, before anything starts.
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.given.is_empty() && self.select.is_none() {
            return Err(Error::NoTarget);
        }
        Ok(())
    }
}

/// What became of every target, in the order they were given, then the sessions chosen
/// by `--all-live` or `--cwd`, by pid.
#[derive(Debug)]
pub(crate) struct Outcomes {
    /// Each target, and the session it named (its place in `sent`) or why it named none.
    targets: Vec<(String, Result<usize, Error>)>,
    /// Each session's send, one per session, shared by the targets naming it.
    sent: Vec<Result<Delivered, Error>>,
}

/// What became of one target.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outcome<'a> {
    /// The target as given (a session id for the sessions `--all-live` or `--cwd` chose).
    pub(crate) target: &'a str,
    pub(crate) result: Result<&'a Delivered, &'a Error>,
}

impl Outcomes {
    /// Every target's outcome.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Outcome<'_>> {
        self.targets.iter().map(|(target, chosen)| Outcome {
            target,
            result: match chosen {
                Ok(sent) => self.sent[*sent].as_ref(),
                Err(err) => Err(err),
            },
        })
    }

    /// How many targets were delivered to.
    pub(crate) fn delivered(&self) -> usize {
        self.iter().filter(|o| o.result.is_ok()).count()
    }

    /// How many targets were not.
    pub(crate) fn failed(&self) -> usize {
        self.iter().filter(|o| o.result.is_err()).count()
    }

    /// The first target's outcome: a single send's.
    pub(crate) fn into_first(mut self) -> Result<Delivered, Error> {
        if self.targets.is_empty() {
            return Err(Error::NoTarget);
        }
        let (_, chosen) = self.targets.swap_remove(0);
        chosen.and_then(|sent| self.sent.swap_remove(sent))
    }
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
) -> Result<Outcomes, Error> {
    let order = SendOrder::new(ctx, targets)?;
    send::with_relay(ctx, relay, order.by_pid.len(), |relay: &dyn Relay| {
        order.send(ctx, |session_id| {
            ctx.courier()
                .deliver(&ctx.home, session_id, message, &relay)
        })
    })
}

/// [`broadcast`] with each session sent to by `send` (a mailbox's, say): the same
/// targets, order and outcomes.
pub(crate) fn broadcast_with<E>(
    ctx: &Context,
    targets: &Targets,
    send_to: impl FnMut(&str) -> Result<Delivered, E>,
) -> Result<Outcomes, Error>
where
    Error: From<E>,
{
    Ok(SendOrder::new(ctx, targets)?.send(ctx, send_to))
}

/// The targets resolved, and the sessions to send to in the order of their pids.
pub(crate) struct SendOrder {
    resolved: Vec<(String, Result<Chosen, Error>)>,
    by_pid: Vec<Chosen>,
    /// How long the targets not live yet are waited for, once the live ones are sent to.
    wait_live: Option<Duration>,
}

impl SendOrder {
    /// Resolves every target against one scan of the registry; each send still
    /// resolves its session again at the gate.
    pub(crate) fn new(ctx: &Context, targets: &Targets) -> Result<Self, Error> {
        let discovery = Discovery::os();
        let roster = discovery.roster(&ctx.home, Scope::Live)?;
        let mut resolved: Vec<(String, Result<Chosen, Error>)> = targets
            .given
            .iter()
            .map(|target| (target.clone(), chosen(&roster, target)))
            .collect();
        if let Some(select) = &targets.select {
            // By pid, as a roster has them.
            for session in &roster.select(select)? {
                let chosen = Chosen::of(session);
                resolved.push((chosen.session_id.clone(), Ok(chosen)));
            }
        }
        // One send per session, in the order of their pids.
        let mut by_pid: Vec<Chosen> = Vec::new();
        for chosen in resolved.iter().filter_map(|(_, r)| r.as_ref().ok()) {
            if !by_pid.iter().any(|c| c.session_id == chosen.session_id) {
                by_pid.push(chosen.clone());
            }
        }
        by_pid.sort_by_key(|c| c.pid);
        Ok(Self {
            resolved,
            by_pid,
            wait_live: targets.wait_live,
        })
    }

    /// The targets that name no session to send to, as given, and why.
    pub(crate) fn refused(&self) -> impl Iterator<Item = (&str, &Error)> {
        self.resolved
            .iter()
            .filter_map(|(target, chosen)| chosen.as_ref().err().map(|f| (target.as_str(), f)))
    }

    /// The sessions to send to, in the order of their pids, each with the targets (as
    /// given) that name it.
    pub(crate) fn sessions(&self) -> impl Iterator<Item = (&str, Vec<&str>)> {
        self.by_pid.iter().map(|session| {
            let named = self.resolved.iter().filter(|(_, chosen)| {
                chosen
                    .as_ref()
                    .is_ok_and(|c| c.session_id == session.session_id)
            });
            let targets = named.map(|(target, _)| target.as_str()).collect();
            (session.session_id.as_str(), targets)
        })
    }

    /// Sends to each session once with `send`: the live ones in the order of their
    /// pids, then each target waited for (`--wait-live`) as soon as it is live; every
    /// target's outcome.
    fn send<E>(
        mut self,
        ctx: &Context,
        mut send_to: impl FnMut(&str) -> Result<Delivered, E>,
    ) -> Outcomes
    where
        Error: From<E>,
    {
        let mut sent: Vec<Result<Delivered, Error>> = self
            .by_pid
            .iter()
            .map(|chosen| send_to(&chosen.session_id).map_err(Error::from))
            .collect();
        if let Some(limit) = self.wait_live {
            let by_pid = &mut self.by_pid;
            // The registry unreadable or unwatchable while waiting: the targets still
            // waited for keep their refusal.
            let _ = wait_live(ctx, &mut self.resolved, limit, |chosen| {
                if !by_pid.iter().any(|c| c.session_id == chosen.session_id) {
                    by_pid.push(chosen.clone());
                    sent.push(send_to(&chosen.session_id).map_err(Error::from));
                }
            });
        }
        let order = &self.by_pid;
        let targets = self
            .resolved
            .into_iter()
            .map(|(target, chosen)| {
                let sent = chosen.map(|chosen| {
                    // Every chosen session is in the order: it was made from them.
                    order
                        .iter()
                        .position(|c| c.session_id == chosen.session_id)
                        .unwrap_or_default()
                });
                (target, sent)
            })
            .collect();
        Outcomes { targets, sent }
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
fn chosen(roster: &Os<'_>, target: &str) -> Result<Chosen, Error> {
    let session = roster.resolve(target)?;
    Ok(Chosen::of(&session.into()))
}

/// A roster of this machine's registry.
type Os<'d> = Roster<'d, OsProcessTable, OsRegistryFs>;

/// Waits up to `limit` for the targets not live yet to become live and addressable,
/// following the registry with the watch engine, and hands each to `live` as soon as it
/// is; the others are left as they are.
fn wait_live(
    ctx: &Context,
    resolved: &mut [(String, Result<Chosen, Error>)],
    limit: Duration,
    mut live: impl FnMut(&Chosen),
) -> Result<(), Error> {
    let waiting = |result: &Result<Chosen, Error>| {
        result.as_ref().is_err_and(|err| {
            err.refusal().is_some_and(|refusal| {
                matches!(
                    refusal.kind,
                    Unresolved(RefusalKind::NotLive | RefusalKind::NotAddressable)
                )
            })
        })
    };
    if !resolved.iter().any(|(_, r)| waiting(r)) {
        return Ok(());
    }
    let deadline = Instant::now() + limit;
    let discovery = Discovery::os();
    let mut watcher = Watcher::os(ctx.home.clone())?;
    loop {
        let roster = discovery.roster(&ctx.home, Scope::Live)?;
        for (target, result) in resolved.iter_mut().filter(|(_, r)| waiting(r)) {
            *result = chosen(&roster, target);
            if let Ok(chosen) = result {
                live(chosen);
            }
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
