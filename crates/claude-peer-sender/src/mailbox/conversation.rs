//! A sender's conversation started afresh between sends, so its turns stay cheap.

use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use claude_peer_probe::{ProcessTable, RegistryFs};

use super::Mailbox;
use crate::channel::Line;
use crate::stream::Printed;

/// How many sends a sender's conversation holds before it is cleared. Each send stays in
/// it, and every later turn costs more for it (2.1.332: about 230 ms a send at first,
/// 1 s after 800); `/clear` starts a fresh conversation in the same process, at the same
/// address, so replies and notices still reach it.
pub(super) const SENDS_PER_CONVERSATION: u32 = 25;
/// How long a `/clear` may take before the send goes on without it.
const CLEAR_WITHIN: Duration = Duration::from_secs(5);

impl<P: ProcessTable, F: RegistryFs> Mailbox<P, F> {
    /// Starts the sender's conversation afresh (`/clear`, between sends: no job is in
    /// it), hearing every line meanwhile. A clear that does not come within
    /// [`CLEAR_WITHIN`] is tried again a conversation later; the send goes on.
    pub(super) fn clear_conversation(&mut self) {
        self.conversation_sends = 0;
        if self.sender.prompt("/clear").is_err() {
            return;
        }
        let deadline = Instant::now() + CLEAR_WITHIN;
        let mut reset = false;
        while !self.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.sender.lines.recv_timeout(left) {
                Ok(Line::Printed(Printed::Reset)) => reset = true,
                Ok(Line::Printed(Printed::Result)) if reset => return,
                // A wake is for the caller, which looks at its inputs after the send.
                Ok(Line::Wake) => self.wake_pending.store(false, Ordering::Release),
                Ok(line) => self.observe(line),
                Err(RecvTimeoutError::Timeout) => return,
                Err(RecvTimeoutError::Disconnected) => self.observe(Line::Closed),
            }
        }
    }
}
