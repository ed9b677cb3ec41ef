//! What hands a message over once the gate allowed it and the store claimed it: a relay
//! for each sender name, or one warm sender each ([`WarmSenders`], the mailbox service).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use claude_peer_deliver::{Courier, Delivered, Error as Refused, Refusal, RefusalKind, Relay};
use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;
use claude_peer_sender::{Job, Mailbox, MailboxEvent, MailboxHandle, Reply, Wait, Waiting};

/// How long a warm sender stays without work before it is stopped (started again at
/// the next message from its name).
pub const SENDER_IDLE: Duration = Duration::from_secs(60);

/// A send about to be handed over, for the store to claim first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handing<'a> {
    /// The receiving session, as the gate resolved it.
    pub session_id: &'a str,
    /// The sender process that will hand it over (its pid, leader of its own process
    /// group), when the carrier knows it beforehand, and its address `uds:<socket>`
    /// once known.
    pub sender: Option<(u32, Option<&'a str>)>,
}

/// What became of [`Carrier::carry`].
#[derive(Debug)]
pub enum Carried {
    /// Refused before the claim: nothing was sent.
    NotNow(Refused),
    /// The claim was turned down: nothing was sent.
    Unclaimed,
    /// Claimed and handed over: what Claude Code said.
    HandedOver(Result<Box<Delivered>, Refused>),
}

/// Something a sender heard after a send returned: a later receipt, a reply, its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The sender name it was heard under.
    pub from: String,
    /// What was heard.
    pub event: MailboxEvent,
}

/// Where a carrier tells what its senders hear; called on their threads.
pub type Hearer = Arc<dyn Fn(Heard) + Send + Sync>;

/// Hands messages over for the post office.
pub trait Carrier: Send {
    /// Carries `text` from the sender name `from` to the live session `session_id`
    /// through the gate, calling `claim` once the gate allowed it and right before the
    /// hand-over; `claim` returning `false` sends nothing. With [`Wait::Receipt`], the
    /// receiver's word is waited for as a one-shot send waits for it.
    fn carry(
        &mut self,
        from: &str,
        session_id: &str,
        text: &str,
        wait: Wait,
        claim: &mut dyn FnMut(Handing<'_>) -> bool,
    ) -> Carried;

    /// Where to tell what senders hear later. By default, nothing is heard.
    fn listen(&mut self, hearer: Hearer) {
        drop(hearer);
    }

    /// Stops senders without work since [`SENDER_IDLE`] unless `keep` says their name
    /// still awaits word; when to ask again (`None`: nothing runs). By default, `None`.
    fn tidy(&mut self, keep: &dyn Fn(&str) -> bool) -> Option<Instant> {
        let _ = keep;
        None
    }
}

/// A relay for each sender name, through the gate of a [`Courier`]: one-shot relays
/// (a `claude -p` each) or any other [`Relay`], which wait for the receipt as they do.
/// The sender is not known before the hand-over, so a message a killed post office was
/// handing over is left `unknown`.
pub struct Relays<R, P = OsProcessTable, F = OsRegistryFs> {
    courier: Courier<P, F>,
    home: ClaudeHome,
    relay_for: Box<dyn Fn(&str) -> R + Send>,
}

impl<R, P, F> std::fmt::Debug for Relays<R, P, F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relays")
            .field("home", &self.home)
            .finish_non_exhaustive()
    }
}

impl<R: Relay, P: ProcessTable, F: RegistryFs> Relays<R, P, F> {
    /// Relays `relays` gives for each sender name, to sessions of `home` through
    /// `courier`'s gate.
    pub fn new(
        courier: Courier<P, F>,
        home: ClaudeHome,
        relays: impl Fn(&str) -> R + Send + 'static,
    ) -> Self {
        Self {
            courier,
            home,
            relay_for: Box::new(relays),
        }
    }
}

impl<R: Relay, P: ProcessTable + Send, F: RegistryFs + Send> Carrier for Relays<R, P, F> {
    fn carry(
        &mut self,
        from: &str,
        session_id: &str,
        text: &str,
        _wait: Wait,
        claim: &mut dyn FnMut(Handing<'_>) -> bool,
    ) -> Carried {
        let prepared = match self.courier.prepare(&self.home, session_id, text) {
            Ok(prepared) => prepared,
            Err(err) => return Carried::NotNow(err),
        };
        let handing = Handing {
            session_id: &prepared.session().record.session_id,
            sender: None,
        };
        if !claim(handing) {
            return Carried::Unclaimed;
        }
        Carried::HandedOver(prepared.hand_over(&(self.relay_for)(from)).map(Box::new))
    }
}

/// Starts a warm sender for a sender name.
pub type OpenSender = Arc<dyn Fn(&str) -> Result<Mailbox, claude_peer_sender::Error> + Send + Sync>;

/// One warm sender for each sender name (the mailbox service), started at its first
/// message and stopped after [`SENDER_IDLE`] without work: a send costs a running
/// sender's turn, not a fresh Claude Code, and later receipts are heard.
pub struct WarmSenders {
    open: OpenSender,
    running: HashMap<String, Warm>,
    hearer: Hearer,
}

struct Warm {
    handle: Arc<MailboxHandle>,
    last_used: Instant,
}

impl std::fmt::Debug for WarmSenders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&String> = self.running.keys().collect();
        f.debug_struct("WarmSenders")
            .field("running", &names)
            .finish_non_exhaustive()
    }
}

/// What a warm sender's thread tells the carrier about one message.
enum Step {
    Claim {
        session_id: String,
        pid: u32,
        address: Option<String>,
    },
    Done(Reply),
}

impl WarmSenders {
    /// Senders `open` starts (one for each sender name, the name given).
    #[must_use]
    pub fn new(open: OpenSender) -> Self {
        Self {
            open,
            running: HashMap::new(),
            hearer: Arc::new(|_| {}),
        }
    }

    /// The running sender of `from`, started when there is none.
    fn sender(&mut self, from: &str) -> Result<Arc<MailboxHandle>, Refused> {
        if let Some(warm) = self.running.get_mut(from) {
            warm.last_used = Instant::now();
            return Ok(Arc::clone(&warm.handle));
        }
        let (open, name) = (Arc::clone(&self.open), from.to_owned());
        let (hearer, heard_as) = (Arc::clone(&self.hearer), from.to_owned());
        let handle =
            MailboxHandle::spawn(None, Some(Box::new(move || open(&name))), move |event| {
                hearer(Heard {
                    from: heard_as.clone(),
                    event,
                });
            })
            .map_err(|err| failed(format!("cannot start a sender thread: {err}")))?;
        let handle = Arc::new(handle);
        self.running.insert(
            from.to_owned(),
            Warm {
                handle: Arc::clone(&handle),
                last_used: Instant::now(),
            },
        );
        Ok(handle)
    }
}

impl Carrier for WarmSenders {
    fn carry(
        &mut self,
        from: &str,
        session_id: &str,
        text: &str,
        wait: Wait,
        claim: &mut dyn FnMut(Handing<'_>) -> bool,
    ) -> Carried {
        let sender = match self.sender(from) {
            Ok(sender) => sender,
            Err(err) => return Carried::NotNow(err),
        };
        let (steps, told) = mpsc::channel();
        let (answer, answered) = mpsc::channel();
        let claims = steps.clone();
        let job = Job::new(session_id, text, move |reply| {
            let _ = steps.send(Step::Done(reply));
        })
        .wait(wait)
        .claim_with(move |handing| {
            let step = Step::Claim {
                session_id: handing.session_id.to_owned(),
                pid: handing.sender_pid,
                address: handing.sender_socket.map(|socket| format!("uds:{socket}")),
            };
            claims.send(step).is_ok() && answered.recv() == Ok(true)
        });
        sender.send(job);
        let mut claimed = false;
        // The job's reply always comes: its thread answers every job it takes, and one
        // it cannot take is answered at once.
        while let Ok(step) = told.recv() {
            match step {
                Step::Claim {
                    session_id,
                    pid,
                    address,
                } => {
                    let handing = Handing {
                        session_id: &session_id,
                        sender: Some((pid, address.as_deref())),
                    };
                    claimed = claim(handing);
                    let _ = answer.send(claimed);
                }
                Step::Done(Reply::Cancelled) => return Carried::Unclaimed,
                Step::Done(Reply::Sent(sent)) => {
                    let sent = sent.map_err(refusal);
                    return match sent {
                        Err(err) if !claimed => Carried::NotNow(err),
                        sent => Carried::HandedOver(sent),
                    };
                }
            }
        }
        Carried::NotNow(failed("the sender's thread ended".to_owned()))
    }

    fn listen(&mut self, hearer: Hearer) {
        self.hearer = hearer;
    }

    fn tidy(&mut self, keep: &dyn Fn(&str) -> bool) -> Option<Instant> {
        let now = Instant::now();
        let idle: Vec<String> = self
            .running
            .iter()
            .filter(|(name, warm)| now.duration_since(warm.last_used) >= SENDER_IDLE && !keep(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in idle {
            if let Some(warm) = self.running.remove(&name) {
                // Closing waits out the last receipt windows: not on the deliverer's time.
                let _ = std::thread::Builder::new()
                    .name("post-sender-close".to_owned())
                    .spawn(move || warm.handle.close(Waiting::Send));
            }
        }
        for warm in self.running.values_mut() {
            if now.duration_since(warm.last_used) >= SENDER_IDLE {
                // Kept for the word it awaits: looked at again a sender-idle later.
                warm.last_used = now;
            }
        }
        self.running
            .values()
            .map(|warm| warm.last_used + SENDER_IDLE)
            .min()
    }
}

/// A sender's error as the gate's: its refusals as they are; a sender that could not
/// start or ended before the send, a failed delivery it certainly did not make.
fn refusal(err: claude_peer_sender::Error) -> Refused {
    match err {
        claude_peer_sender::Error::Delivery(err) => err,
        err => failed(err.to_string()),
    }
}

fn failed(message: String) -> Refused {
    Refused::Refused(Refusal {
        kind: RefusalKind::DeliveryFailed,
        message,
        standing: false,
        uncertain: false,
    })
}
