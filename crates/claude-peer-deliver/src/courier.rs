//! Deciding whether a send may happen, to whom exactly, and reporting what happened.

use std::path::{Path, PathBuf};

use claude_peer_probe::{OsProcessTable, OsRegistryFs, ProcessTable, RegistryFs};
use claude_peer_registry::ClaudeHome;
use claude_peer_resolve::{AddressableSession, Discovery};
use claude_peer_settings::{
    EffectivePolicy, EffectiveValue, MANAGED_SETTINGS_PATH, effective_policy,
};

use crate::{Error, Recipient, Refusal, RefusalKind, Relay};

/// The largest message that is relayed: 64 KiB (65,536 bytes).
pub const MAX_MESSAGE_BYTES: usize = 65_536;

/// What the receiving session does with a relayed message, as far as files show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Inbound {
    /// Its `crossSessionInbound` is `accept`: the message is delivered automatically.
    Automatic,
    /// Its `crossSessionInbound` is `hold`, or unset (Claude Code's default, which holds
    /// messages between sessions of different permission modes): the message may wait
    /// for its user's approval.
    MayHold,
}

impl Inbound {
    /// The stable wire name: `automatic` or `may_hold`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Automatic => "automatic",
            Self::MayHold => "may_hold",
        }
    }
}

/// A delivered message: the relay confirmed the send.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    /// The session it went to, as confirmed immediately before the hand-over.
    pub session: AddressableSession,
    /// Whether it is read automatically or may wait for approval.
    pub inbound: Inbound,
    /// The policy that decided `inbound`, with every settings layer read and the note
    /// of what files cannot show (a `--settings` flag on the receiving process).
    pub policy: EffectivePolicy,
    /// What the relay said about the send.
    pub detail: Option<String>,
    /// What the receiver did with it and how that is known, when the relay can tell.
    pub receipt: Option<crate::Receipt>,
    /// Claude Code's id of the sent message, when the relay knows it.
    pub msg_id: Option<String>,
}

/// Delivers messages: resolves the target, checks its inbound policy, confirms it again
/// immediately before the hand-over, and hands the message to a relay.
///
/// [`Courier::deliver`] does it all; [`Courier::prepare`] and [`Prepared::hand_over`]
/// are its two halves, for harnesses that want to show the target (or tests that want
/// to act) between deciding and sending.
#[derive(Debug, Clone)]
pub struct Courier<P = OsProcessTable, F = OsRegistryFs> {
    discovery: Discovery<P, F>,
    managed_settings: PathBuf,
}

impl Courier {
    /// A courier on this machine's real process table and files, reading managed
    /// settings at [`MANAGED_SETTINGS_PATH`].
    #[must_use]
    pub fn os() -> Self {
        Self::new(Discovery::os())
    }
}

impl<P: ProcessTable, F: RegistryFs> Courier<P, F> {
    /// A courier over `discovery`, reading managed settings at [`MANAGED_SETTINGS_PATH`].
    pub fn new(discovery: Discovery<P, F>) -> Self {
        Self {
            discovery,
            managed_settings: PathBuf::from(MANAGED_SETTINGS_PATH),
        }
    }

    /// Reads managed settings at `path` (and the `managed-settings.d` drop-ins beside it)
    /// instead (tests point it into a temporary directory).
    #[must_use]
    pub fn with_managed_settings(mut self, path: impl Into<PathBuf>) -> Self {
        self.managed_settings = path.into();
        self
    }

    /// The discovery it resolves with.
    pub const fn discovery(&self) -> &Discovery<P, F> {
        &self.discovery
    }

    /// The managed settings file it reads.
    pub fn managed_settings(&self) -> &Path {
        &self.managed_settings
    }

    /// Delivers `message` to the live session `session_id` through `relay`:
    /// [`Courier::prepare`], then [`Prepared::hand_over`].
    pub fn deliver(
        &self,
        home: &ClaudeHome,
        session_id: &str,
        message: &str,
        relay: &impl Relay,
    ) -> Result<Delivered, Error> {
        self.prepare(home, session_id, message)?.hand_over(relay)
    }

    /// Decides whether `message` may go to `session_id`, relaying nothing:
    ///
    /// 1. the message must not be empty (or only whitespace) nor above
    ///    [`MAX_MESSAGE_BYTES`];
    /// 2. the session is resolved afresh: refusals `not_live`, `identity_mismatch`
    ///    (another live session holds its id or name), `not_addressable`;
    /// 3. its inbound policy is read from managed (the file and its drop-ins), user and
    ///    its project's settings:
    ///    `refuse` is refused as `inbound_refused`, and so is a policy that cannot be
    ///    told (a settings layer that cannot be read or parsed, or a record without an
    ///    absolute cwd), because a message sent then might be dropped while reported
    ///    delivered.
    pub fn prepare<'a>(
        &'a self,
        home: &ClaudeHome,
        session_id: &str,
        message: &'a str,
    ) -> Result<Prepared<'a, P, F>, Error> {
        check_message(message)?;
        let session = self.discovery.resolve_live_session(home, session_id)?;
        let allowed = self.inbound(home, &session)?;
        Ok(Prepared {
            courier: self,
            home: home.clone(),
            session,
            allowed,
            message,
        })
    }

    /// The receiving session's inbound policy as far as files show, refusing `refuse`
    /// and a policy in doubt.
    fn inbound(&self, home: &ClaudeHome, session: &AddressableSession) -> Result<Allowed, Error> {
        let (inbound, policy, cwd) = self.decide_inbound(home, session)?;
        Ok(Allowed {
            cwd,
            policy,
            inbound,
        })
    }

    /// Whether `session` of `home` takes messages, by the gate's own rule: its inbound
    /// policy as far as files show, and the policy that decided it; a policy that
    /// refuses, or cannot be told, is the refusal `inbound_refused` naming why (the
    /// layer that refuses, or the file that cannot be read). Nothing is sent.
    pub fn inbound_of(
        &self,
        home: &ClaudeHome,
        session: &AddressableSession,
    ) -> Result<(Inbound, EffectivePolicy), Error> {
        self.decide_inbound(home, session)
            .map(|(inbound, policy, _)| (inbound, policy))
    }

    fn decide_inbound(
        &self,
        home: &ClaudeHome,
        session: &AddressableSession,
    ) -> Result<(Inbound, EffectivePolicy, PathBuf), Error> {
        let id = session.record.session_id.as_str();
        let cwd = session.record.cwd.as_deref();
        let Some(cwd) = cwd.map(Path::new).filter(|cwd| cwd.is_absolute()) else {
            return Err(Error::refused(
                RefusalKind::InboundRefused,
                format!(
                    "the inbound policy of session {id} cannot be told: its record names no absolute working directory (`{}`), so its project settings, which can refuse messages, cannot be read; nothing was relayed",
                    cwd.unwrap_or("")
                ),
            ));
        };
        let policy = effective_policy(&home.user_settings(), &self.managed_settings, cwd);
        if policy.value == EffectiveValue::Refuse {
            return Err(Error::Refused(Refusal {
                kind: RefusalKind::InboundRefused,
                message: format!(
                    "session {id} refuses messages from other sessions: crossSessionInbound is `refuse` in {}; nothing was relayed",
                    policy.decider()
                ),
                standing: true,
                uncertain: false,
            }));
        }
        if !policy.complete {
            return Err(Error::refused(
                RefusalKind::InboundRefused,
                format!(
                    "the inbound policy of session {id} cannot be told, so it might refuse the message: {}; nothing was relayed",
                    policy.unreadable().join("; ")
                ),
            ));
        }
        let inbound = match policy.value {
            EffectiveValue::Accept => Inbound::Automatic,
            EffectiveValue::Hold | EffectiveValue::Default | EffectiveValue::Refuse => {
                Inbound::MayHold
            }
        };
        Ok((inbound, policy, cwd.to_path_buf()))
    }
}

/// What [`Courier::inbound`] allowed, and the working directory whose policy it read.
#[derive(Debug)]
struct Allowed {
    /// The session's working directory: absolute.
    cwd: PathBuf,
    policy: EffectivePolicy,
    inbound: Inbound,
}

/// A send that may happen: resolved and allowed by policy, nothing relayed yet.
///
/// [`Prepared::hand_over`] confirms the session again and relays; dropping it sends nothing.
#[derive(Debug)]
pub struct Prepared<'a, P = OsProcessTable, F = OsRegistryFs> {
    courier: &'a Courier<P, F>,
    home: ClaudeHome,
    session: AddressableSession,
    allowed: Allowed,
    message: &'a str,
}

impl<P: ProcessTable, F: RegistryFs> Prepared<'_, P, F> {
    /// The session as resolved.
    #[must_use]
    pub const fn session(&self) -> &AddressableSession {
        &self.session
    }

    /// What the receiver will do with the message, as far as files show now.
    #[must_use]
    pub const fn inbound(&self) -> Inbound {
        self.allowed.inbound
    }

    /// The policy that decided [`Prepared::inbound`].
    #[must_use]
    pub const fn policy(&self) -> &EffectivePolicy {
        &self.allowed.policy
    }

    /// The address the relay would be handed if nothing changes before the hand-over.
    #[must_use]
    pub fn recipient(&self) -> Recipient {
        Recipient::new(&self.home, &self.session, &self.allowed.cwd)
    }

    /// Confirms that the same pid, with the same start token, still runs the same
    /// session id (refusing `not_live`, or `identity_mismatch` / `not_addressable` when
    /// its name, socket or addressability changed), reads the policy again if its cwd
    /// changed, then hands the target and the message to `relay`.
    ///
    /// A relay that does not confirm the send is the refusal `delivery_failed`, with
    /// the relay's own words. Any refusal before it means the relay was never called.
    pub fn hand_over(self, relay: &impl Relay) -> Result<Delivered, Error> {
        let discovery = self.courier.discovery();
        let session = discovery.confirm(&self.home, &self.session)?;
        let allowed = if session.record.cwd == self.session.record.cwd {
            self.allowed
        } else {
            self.courier.inbound(&self.home, &session)?
        };
        let target = Recipient::new(&self.home, &session, &allowed.cwd);
        match relay.send(&target, self.message) {
            Ok(confirmation) => Ok(Delivered {
                session,
                inbound: allowed.inbound,
                policy: allowed.policy,
                detail: confirmation.detail,
                receipt: confirmation.receipt,
                msg_id: confirmation.msg_id,
            }),
            Err(failure) if failure.kind() == RefusalKind::DeliveryFailed => {
                Err(Error::Refused(Refusal {
                    kind: RefusalKind::DeliveryFailed,
                    message: format!(
                        "the relay did not confirm the send to session {} (pid {}): {failure}",
                        target.session_id, target.pid
                    ),
                    standing: false,
                    uncertain: failure.is_uncertain(),
                }))
            }
            Err(failure) => Err(Error::refused(failure.kind(), failure.message().to_owned())),
        }
    }
}

/// Delivers `message` to the live session `session_id` of `home` through `relay`, on
/// this machine's real processes and files: [`Courier::os`]`().deliver(…)`.
pub fn deliver(
    home: &ClaudeHome,
    session_id: &str,
    message: &str,
    relay: &impl Relay,
) -> Result<Delivered, Error> {
    Courier::os().deliver(home, session_id, message, relay)
}

/// The gate's first check, for front ends that answer a malformed call before any work:
/// an empty (or whitespace-only) message and one above [`MAX_MESSAGE_BYTES`] are errors.
pub fn check_message(message: &str) -> Result<(), Error> {
    if message.len() > MAX_MESSAGE_BYTES {
        return Err(Error::MessageTooLarge {
            len: message.len(),
            limit: MAX_MESSAGE_BYTES,
        });
    }
    if message.trim().is_empty() {
        return Err(Error::EmptyMessage);
    }
    Ok(())
}
