//! The post office's deliverer: each waiting message tried through the gate once its
//! address resolves, first in, first out per address.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use claude_peer_deliver::{Courier, Error as Refused, RefusalKind, Relay};
use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{Roster, Scope};

use crate::{Address, Error, Message, State, Step, Store};

/// How many waiting messages a pass reads from the store at a time.
const PAGE: usize = 256;

/// The first wait after a failed attempt; each further failure doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(2);

/// The longest wait between attempts.
pub const LONGEST_BACKOFF: Duration = Duration::from_secs(300);

/// What one [`PostOffice::pass`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pass {
    /// Messages Claude Code took.
    pub delivered: usize,
    /// Messages their receiver's policy refuses, now final.
    pub refused: usize,
    /// Messages whose expiry passed, now final.
    pub expired: usize,
    /// Messages still waiting: their address does not resolve, an earlier message to the
    /// same address waits, or a failed attempt's backoff has not passed.
    pub waiting: usize,
}

/// Delivers what a [`Store`] holds through the gate (`Courier`) and a relay for each
/// message's sender name.
pub struct PostOffice<R, P = OsProcessTable, F = OsRegistryFs> {
    store: Store,
    courier: Courier<P, F>,
    home: ClaudeHome,
    relays: Box<dyn Fn(&str) -> R + Send>,
}

impl<R, P, F> std::fmt::Debug for PostOffice<R, P, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostOffice")
            .field("store", &self.store)
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

/// What became of one attempt.
enum Tried {
    Delivered,
    Refused,
    Waits,
    /// It changed meanwhile (cancelled through another connection): not this pass's.
    Gone,
}

impl<R: Relay, P: ProcessTable, F: RegistryFs> PostOffice<R, P, F> {
    /// A post office delivering `store`'s messages to the sessions of `home`, through
    /// `courier`'s gate and the relay `relays` gives for each message's sender name (the
    /// name its receiver sees).
    pub fn new(
        store: Store,
        courier: Courier<P, F>,
        home: ClaudeHome,
        relays: impl Fn(&str) -> R + Send + 'static,
    ) -> Self {
        Self {
            store,
            courier,
            home,
            relays: Box::new(relays),
        }
    }

    /// The Claude home whose sessions it delivers to.
    pub const fn home(&self) -> &ClaudeHome {
        &self.home
    }

    /// The store it delivers from.
    pub const fn store(&mut self) -> &mut Store {
        &mut self.store
    }

    /// Marks every message a stopped post office left `sending` as `unknown`: it may
    /// have been delivered, so it is never sent again by itself (`outbox retry` sends it
    /// again when its sender says so). Call once, before the first pass; their ids.
    pub fn recover(&mut self) -> Result<Vec<String>, Error> {
        let mut sending = Vec::new();
        self.store.outbox(|message| {
            if message.state == State::Sending {
                sending.push(message.id);
            }
            std::ops::ControlFlow::Continue(())
        })?;
        let why =
            "the post office stopped during its attempt: whether Claude Code took it is not known"
                .to_owned();
        for id in &sending {
            self.store.step(id, &Step::Unknown(why.clone()), now_ms())?;
        }
        Ok(sending)
    }

    /// Expires what is due, then tries every waiting message, oldest first, whose
    /// address resolves now; a message waits while an earlier one to the same address
    /// waits, so messages to one address arrive in the order they were posted. The
    /// registry is read once a pass to tell which addresses resolve, and again by the
    /// gate for each message that goes.
    pub fn pass(&mut self) -> Result<Pass, Error> {
        let Self {
            store,
            courier,
            home,
            relays,
        } = self;
        let mut pass = Pass {
            expired: store.expire_due(now_ms())?.len(),
            ..Pass::default()
        };
        let mut page = store.waiting_after(0, PAGE)?;
        if page.is_empty() {
            return Ok(pass);
        }
        let roster = courier
            .discovery()
            .roster(home, Scope::Live)
            .map_err(Error::Registry)?;
        let mut held: HashSet<Address> = HashSet::new();
        while let Some(last) = page.last().map(|m| m.seq) {
            for message in page {
                let tried = if held.contains(&message.to) || message.not_before_ms > now_ms() {
                    Tried::Waits
                } else {
                    let Some(target) = resolved(store, &roster, &message)? else {
                        pass.waiting += 1;
                        held.insert(message.to);
                        continue;
                    };
                    attempt(store, courier, home, relays, &message, &target)?
                };
                match tried {
                    Tried::Delivered => pass.delivered += 1,
                    Tried::Refused => pass.refused += 1,
                    Tried::Waits => {
                        pass.waiting += 1;
                        held.insert(message.to);
                    }
                    Tried::Gone => {}
                }
            }
            page = store.waiting_after(last, PAGE)?;
        }
        Ok(pass)
    }
}

/// The session id `message`'s address names in `roster`, by the one target rule (an id or
/// the name of one live session; the one session working in a directory); `None` when it
/// names none now, recorded as the message's reason for waiting.
fn resolved<P: ProcessTable, F: RegistryFs>(
    store: &mut Store,
    roster: &Roster<'_, P, F>,
    message: &Message,
) -> Result<Option<String>, Error> {
    let one = match &message.to {
        Address::SessionId(given) | Address::Name(given) => roster.resolve(given),
        Address::Cwd(dir) => roster.resolve_cwd(Path::new(dir)),
    };
    match one {
        Ok(session) => Ok(Some(session.record.session_id)),
        Err(err) => not_now(store, message, err.into()).map(|_| None),
    }
}

/// One attempt at `message`, to the live session `session_id`: allowed by the gate
/// (which resolves it afresh), claimed in the store (`sending`, on disk before the relay
/// is asked), handed over, and the outcome recorded.
fn attempt<R: Relay, P: ProcessTable, F: RegistryFs>(
    store: &mut Store,
    courier: &Courier<P, F>,
    home: &ClaudeHome,
    relays: &(dyn Fn(&str) -> R + Send),
    message: &Message,
    session_id: &str,
) -> Result<Tried, Error> {
    let prepared = match courier.prepare(home, session_id, &message.text) {
        Ok(prepared) => prepared,
        Err(err) => return not_now(store, message, err),
    };
    let claimed = match store.step(&message.id, &Step::Send, now_ms()) {
        Ok(claimed) => claimed,
        Err(Error::NotNow { .. }) => return Ok(Tried::Gone),
        Err(err) => return Err(err),
    };
    let step = match prepared.hand_over(&relays(&message.from)) {
        Ok(delivered) => Step::Deliver {
            session_id: delivered.session.record.session_id,
            msg_id: delivered.msg_id,
            receipt: delivered.receipt,
        },
        // After the hand-over, the receiver itself refused or declined it.
        Err(Refused::Refused(refusal)) if refusal.kind == RefusalKind::InboundRefused => {
            Step::Refuse(refusal.to_string())
        }
        // It may have gone: never sent again by itself.
        Err(Refused::Refused(refusal)) if refusal.uncertain => Step::Unknown(refusal.to_string()),
        Err(err) => Step::Fail {
            reason: err.to_string(),
            retry_at_ms: now_ms().saturating_add(millis(backoff(claimed.attempts))),
        },
    };
    let tried = match step {
        Step::Deliver { .. } => Tried::Delivered,
        Step::Refuse(_) => Tried::Refused,
        _ => Tried::Waits,
    };
    store.step(&message.id, &step, now_ms())?;
    Ok(tried)
}

/// Records why `message` cannot go now, before anything was claimed or handed over: a
/// standing refusal (its receiver's policy is `refuse`) is final; every other waits with
/// the gate's words as its reason. A registry that cannot be read stops the pass.
fn not_now(store: &mut Store, message: &Message, err: Refused) -> Result<Tried, Error> {
    let (step, tried) = match err {
        Refused::Refused(refusal) if refusal.standing => {
            (Step::Refuse(refusal.to_string()), Tried::Refused)
        }
        Refused::Refused(refusal) => (Step::Wait(refusal.to_string()), Tried::Waits),
        Refused::Discovery(err) => return Err(Error::Registry(err)),
        // Checked when it was posted; a limit lowered since makes it final.
        err => (Step::Refuse(err.to_string()), Tried::Refused),
    };
    match store.step(&message.id, &step, now_ms()) {
        Ok(_) => Ok(tried),
        Err(Error::NotNow { .. }) => Ok(Tried::Gone),
        Err(err) => Err(err),
    }
}

/// The wait before the attempt after `attempts` failed ones: 2 s, doubled each time, at
/// most 5 min.
#[must_use]
pub fn backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(LONGEST_BACKOFF)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Now, in ms since the epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, millis)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::backoff;

    #[test]
    fn the_backoff_doubles_from_two_seconds_up_to_five_minutes() {
        let waits: Vec<u64> = (1..=10).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
        assert_eq!(backoff(0), Duration::from_secs(2));
    }
}
