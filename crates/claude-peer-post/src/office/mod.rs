//! The post office's deliverer: each waiting message tried through the gate once its
//! address resolves, first in, first out per address.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use claude_peer_deliver::{Courier, Delivered, Error as Refused, Receipt, RefusalKind};
use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::{ClaudeHome, Pid};
use claude_peer_resolve::{Roster, Scope};
use claude_peer_sender::{MailboxEvent, Wait};

use crate::carrier::{Carried, Carrier, Heard, Hearer};
use crate::{
    Address, Attempt, Error, Inbound, Message, Retention, SenderProcess, State, Step, Store,
};

mod recover;

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

/// Delivers what a [`Store`] holds through the gate (`Courier`) and a [`Carrier`].
pub struct PostOffice<C, P = OsProcessTable, F = OsRegistryFs> {
    store: Store,
    courier: Courier<P, F>,
    home: ClaudeHome,
    carrier: C,
    /// Messages to send at once, ahead of the queue, and whom to tell what became of them.
    now: Vec<(String, WhenSent)>,
    /// How much history to keep.
    retention: Retention,
}

/// Told what became of a message sent at once: see [`PostOffice::send_now`].
pub type WhenSent = Box<dyn FnOnce(Result<SentNow, Error>) + Send>;

/// What became of a message sent at once.
#[derive(Debug)]
pub struct SentNow {
    /// The message as recorded after the attempt.
    pub message: Message,
    /// What was delivered, its receipt decided as a one-shot send decides it; or why
    /// it was not.
    pub sent: Result<Box<Delivered>, Refused>,
}

impl<C, P, F> std::fmt::Debug for PostOffice<C, P, F> {
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

/// How long after its posting a delivered message's `queued` or `held` receipt keeps
/// its sender running to hear the rest.
const RECEIPT_WATCH: Duration = Duration::from_secs(3600);

impl<C: Carrier, P: ProcessTable, F: RegistryFs> PostOffice<C, P, F> {
    /// A post office delivering `store`'s messages to the sessions of `home` through
    /// `carrier`, telling which addresses resolve with `courier`'s registry reads.
    pub const fn new(store: Store, courier: Courier<P, F>, home: ClaudeHome, carrier: C) -> Self {
        Self {
            store,
            courier,
            home,
            carrier,
            now: Vec::new(),
            retention: Retention::DEFAULT,
        }
    }

    /// Keeps the history within `retention` [default: [`Retention::DEFAULT`]].
    #[must_use]
    pub const fn with_retention(mut self, retention: Retention) -> Self {
        self.retention = retention;
        self
    }

    /// Sends the waiting message `id` at the next [`PostOffice::pass`], before the
    /// queue and past any backoff, waiting for its receipt, then tells `answer`: a send
    /// that does not queue. Any refusal is final for it (`refused`, with the gate's
    /// words): it was never meant to wait.
    pub fn send_now(&mut self, id: String, answer: WhenSent) {
        self.now.push((id, answer));
    }

    /// The Claude home whose sessions it delivers to.
    pub const fn home(&self) -> &ClaudeHome {
        &self.home
    }

    /// The store it delivers from.
    pub const fn store(&mut self) -> &mut Store {
        &mut self.store
    }

    /// Where its senders tell what they hear later: each [`Heard`] is then recorded by
    /// [`PostOffice::hear`], on the caller's thread.
    pub fn listen(&mut self, hearer: Hearer) {
        self.carrier.listen(hearer);
    }

    /// Settles every message a stopped post office left `sending`; call once, before
    /// the first pass, with that post office gone (its lock taken). Its sender is
    /// stopped first (its process group killed when its leader is still the process
    /// recorded), then the receiver's transcript since the attempt began tells: our
    /// sender's address and the exact text there → `delivered`, with its `msg_id` and
    /// receipt when written; not there → `waiting`, to be sent again. A message whose
    /// sender or transcript cannot be told about is `unknown`, never sent again by
    /// itself. The messages as settled.
    pub fn recover(&mut self) -> Result<Vec<Message>, Error> {
        let mut sending = Vec::new();
        self.store.outbox(|message| {
            if message.state == State::Sending {
                sending.push(message);
            }
            std::ops::ControlFlow::Continue(())
        })?;
        let mut settled = Vec::new();
        for message in sending {
            let step = recover::reconcile(&self.store, &self.home, &message)?;
            settled.push(self.store.step(&message.id, &step, now_ms())?);
        }
        Ok(settled)
    }

    /// Records what a sender heard: a later receipt of a message it delivered, a message
    /// to it (a reply), a receiver's idle notice. Receipts of messages the store does
    /// not hold (sent by others) are passed over.
    pub fn hear(&mut self, heard: &Heard) -> Result<(), Error> {
        record_heard(&mut self.store, &heard.from, &heard.event).map(drop)
    }

    /// Prunes the history beyond its retention: how many messages.
    pub fn prune(&mut self) -> Result<u64, Error> {
        self.store.prune(&self.retention, now_ms())
    }

    /// Stops the senders without work, keeping those whose messages still await their
    /// receiver's word; when to look again.
    pub fn tidy(&mut self) -> Option<Instant> {
        let store = &self.store;
        let since = now_ms().saturating_sub(millis(RECEIPT_WATCH));
        self.carrier
            .tidy(&|from| store.awaits_receipt(from, since).unwrap_or(true))
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
            carrier,
            now,
            ..
        } = self;
        if !now.is_empty() {
            let roster = courier
                .discovery()
                .roster(home, Scope::Live)
                .map_err(Error::Registry)?;
            for (id, answer) in now.drain(..) {
                answer(send_one(store, &roster, carrier, home, &id));
            }
        }
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
                    let target = match resolve(&roster, &message) {
                        Ok(target) => target,
                        Err(err) => {
                            not_now(store, &message, err, Mode::Queued)?;
                            pass.waiting += 1;
                            held.insert(message.to);
                            continue;
                        }
                    };
                    attempt(store, carrier, home, &message, &target, Mode::Queued)?.0
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

/// Records in `store` what the sender named `from` heard (see [`PostOffice::hear`]):
/// the message in as recorded, for a message to it.
pub fn record_heard(
    store: &mut Store,
    from: &str,
    event: &MailboxEvent,
) -> Result<Option<Message>, Error> {
    let receipt = match event {
        MailboxEvent::Receipt(receipt) => receipt,
        MailboxEvent::Message {
            from: address,
            from_name,
            session_id,
            text,
        } => {
            let inbound = Inbound {
                to: from.to_owned(),
                from_name: from_name.clone(),
                from_address: address.clone(),
                session_id: session_id.clone(),
                text: text.clone(),
            };
            return store.receive(&inbound, now_ms()).map(Some);
        }
        MailboxEvent::Idle {
            session_id: Some(session_id),
            ..
        } => {
            if let Some(id) = store.latest_delivered(from, session_id)? {
                let note = Step::Note("its receiver finished its turn (idle)".to_owned());
                match store.step(&id, &note, now_ms()) {
                    Ok(_) | Err(Error::NotNow { .. }) => {}
                    Err(err) => return Err(err),
                }
            }
            return Ok(None);
        }
        _ => return Ok(None),
    };
    let step = Step::Receipt(Receipt {
        outcome: receipt.outcome,
        basis: receipt.basis,
    });
    for msg_id in &receipt.msg_ids {
        let Some(message) = store.by_msg_id(msg_id)? else {
            continue;
        };
        match store.step(&message.id, &step, now_ms()) {
            Ok(_) | Err(Error::NotNow { .. }) => {}
            Err(err) => return Err(err),
        }
    }
    Ok(None)
}

/// The session id `message`'s address names in `roster`, by the one target rule (an id or
/// the name of one live session; the one session working in a directory), or why it
/// names none now.
fn resolve<P: ProcessTable, F: RegistryFs>(
    roster: &Roster<'_, P, F>,
    message: &Message,
) -> Result<String, Refused> {
    let one = match &message.to {
        Address::SessionId(given) | Address::Name(given) => roster.resolve(given),
        Address::Cwd(dir) => roster.resolve_cwd(Path::new(dir)),
    };
    one.map(|session| session.record.session_id)
        .map_err(Refused::from)
}

/// Sends the message `id` at once (see [`PostOffice::send_now`]).
fn send_one<P: ProcessTable, F: RegistryFs>(
    store: &mut Store,
    roster: &Roster<'_, P, F>,
    carrier: &mut impl Carrier,
    home: &ClaudeHome,
    id: &str,
) -> Result<SentNow, Error> {
    let message = store
        .get(id)?
        .ok_or_else(|| Error::NoSuchMessage(id.to_owned()))?;
    let sent = match resolve(roster, &message) {
        Ok(target) => attempt(store, carrier, home, &message, &target, Mode::AtOnce)?.1,
        Err(err) => Some(Err(not_now(store, &message, err, Mode::AtOnce)?.1)),
    };
    let Some(sent) = sent else {
        return Err(Error::NotNow {
            id: id.to_owned(),
            state: message.state,
            step: "send",
        });
    };
    let message = store
        .get(id)?
        .ok_or_else(|| Error::NoSuchMessage(id.to_owned()))?;
    Ok(SentNow { message, sent })
}

/// How an attempt is made: queued (its receipt heard later; a failure waits for its
/// backoff) or at once (its receipt waited for; any refusal final).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Queued,
    AtOnce,
}

/// What an attempt ended in: how the pass counts it, and what Claude Code answered
/// (`None` when it changed meanwhile, through another connection).
type Attempted = (Tried, Option<Result<Box<Delivered>, Refused>>);

/// One attempt at `message`, to the live session `session_id`: carried through the gate
/// (which resolves it afresh), claimed in the store (`sending`, with what carries it, on
/// disk before the hand-over), handed over, and the outcome recorded.
fn attempt(
    store: &mut Store,
    carrier: &mut impl Carrier,
    home: &ClaudeHome,
    message: &Message,
    session_id: &str,
    mode: Mode,
) -> Result<Attempted, Error> {
    let wait = match mode {
        Mode::Queued => Wait::Sent,
        Mode::AtOnce => Wait::Receipt,
    };
    let mut claimed = None;
    let handed = carrier.carry(
        &message.from,
        session_id,
        &message.text,
        wait,
        &mut |handing| {
            let attempt = Attempt {
                session_id: handing.session_id.to_owned(),
                sender: handing
                    .sender
                    .and_then(|(pid, address)| sender_process(pid, address)),
                transcript_len: transcript_len(home, handing.session_id),
            };
            let result = store.step(&message.id, &Step::Send(attempt), now_ms());
            let ok = result.is_ok();
            claimed = Some(result);
            ok
        },
    );
    let (sent, claimed) = match (handed, claimed) {
        (Carried::HandedOver(sent), Some(Ok(claimed))) => (sent, claimed),
        // No sender to carry it (one that cannot start): an attempt that failed, tried
        // again after its backoff rather than at every registry change.
        (Carried::NotNow(Refused::Refused(refusal)), None)
            if refusal.kind == RefusalKind::DeliveryFailed =>
        {
            let claimed = store.step(&message.id, &Step::Send(Attempt::to(session_id)), now_ms());
            let claimed = match claimed {
                Ok(claimed) => claimed,
                Err(Error::NotNow { .. }) => return Ok((Tried::Gone, None)),
                Err(err) => return Err(err),
            };
            (Err(Refused::Refused(refusal)), claimed)
        }
        (Carried::NotNow(err), _) => {
            let (tried, err) = not_now(store, message, err, mode)?;
            return Ok((tried, Some(Err(err))));
        }
        (_, Some(Err(Error::NotNow { .. })) | None) | (Carried::Unclaimed, Some(Ok(_))) => {
            return Ok((Tried::Gone, None));
        }
        (_, Some(Err(err))) => return Err(err),
    };
    let step = match &sent {
        Ok(delivered) => Step::Deliver {
            session_id: delivered.session.record.session_id.clone(),
            session_name: delivered.session.record.name.clone(),
            msg_id: delivered.msg_id.clone(),
            receipt: delivered.receipt,
        },
        // After the hand-over, the receiver itself refused or declined it.
        Err(Refused::Refused(refusal)) if refusal.kind == RefusalKind::InboundRefused => {
            Step::Refuse(refusal.to_string())
        }
        // It may have gone: never sent again by itself.
        Err(Refused::Refused(refusal)) if refusal.uncertain => Step::Unknown(refusal.to_string()),
        Err(err) if mode == Mode::AtOnce => Step::Refuse(err.to_string()),
        Err(err) => Step::Fail {
            reason: err.to_string(),
            retry_at_ms: now_ms().saturating_add(millis(retry_after(err, claimed.attempts))),
        },
    };
    let tried = match step {
        Step::Deliver { .. } => Tried::Delivered,
        Step::Refuse(_) => Tried::Refused,
        _ => Tried::Waits,
    };
    store.step(&message.id, &step, now_ms())?;
    Ok((tried, Some(sent)))
}

/// The sender process `pid`, told apart from a later one by its start token; `None`
/// when that cannot be read (then a post office killed during the attempt leaves it
/// `unknown`).
fn sender_process(pid: u32, address: Option<&str>) -> Option<SenderProcess> {
    let table = OsProcessTable::new();
    let id = Pid::new(pid)?;
    let start_token = table.facts(id, table.signal(id)).start_token?;
    Some(SenderProcess {
        pid,
        start_token,
        address: address.map(str::to_owned),
    })
}

/// How long the transcript of `session_id` is now (0 when it has none); `None` when it
/// cannot be read.
fn transcript_len(home: &ClaudeHome, session_id: &str) -> Option<u64> {
    match claude_peer_transcript::find(home, session_id) {
        Ok(Some(path)) => std::fs::symlink_metadata(path).ok().map(|meta| meta.len()),
        Ok(None) => Some(0),
        Err(_) => None,
    }
}

/// Records why `message` cannot go now, before anything was claimed or handed over: a
/// standing refusal (its receiver's policy is `refuse`) is final, as is every refusal of
/// a message sent at once; every other waits with the gate's words as its reason. A
/// registry that cannot be read stops the pass. The refusal, given back.
fn not_now(
    store: &mut Store,
    message: &Message,
    err: Refused,
    mode: Mode,
) -> Result<(Tried, Refused), Error> {
    let err = match err {
        Refused::Discovery(err) => return Err(Error::Registry(err)),
        err => err,
    };
    let (step, tried) = match &err {
        Refused::Refused(refusal) if refusal.standing || mode == Mode::AtOnce => {
            (Step::Refuse(refusal.to_string()), Tried::Refused)
        }
        Refused::Refused(refusal) => (Step::Wait(refusal.to_string()), Tried::Waits),
        // Checked when it was posted; a limit lowered since makes it final.
        err => (Step::Refuse(err.to_string()), Tried::Refused),
    };
    match store.step(&message.id, &step, now_ms()) {
        Ok(_) => Ok((tried, err)),
        Err(Error::NotNow { .. }) => Ok((Tried::Gone, err)),
        Err(err) => Err(err),
    }
}

/// The wait before the next attempt after `err` ended the `attempts`th: the receiver's
/// pace when its rate limit turned the message away (it takes one more every 2 s, and
/// messages to it wait their turn meanwhile), else the [`backoff`].
fn retry_after(err: &Refused, attempts: u32) -> Duration {
    match err {
        Refused::Refused(refusal) if claude_peer_sender::paced_by_receiver(&refusal.message) => {
            claude_peer_sender::RECEIVER_PACE
        }
        _ => backoff(attempts),
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
