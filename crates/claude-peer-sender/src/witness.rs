//! A receiver's transcript, followed on a thread of its own: its facts reach whoever
//! waits on the sender's lines, beside the sender's own output.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender as Channel;
use std::thread;
use std::time::Duration;

use claude_peer_registry::ClaudeHome;
use claude_peer_transcript::Follower;

use crate::channel::{Heard, Line};

/// How long the thread waits for the transcript before it looks whether it should stop.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// Follows the transcript of one receiving session until dropped.
#[derive(Debug)]
pub(crate) struct Witness {
    stop: Arc<AtomicBool>,
}

impl Witness {
    /// Starts following the transcript of `session_id` in `home` from its end now (so
    /// call it before the send), each fact sent to `lines` as [`Line::Transcript`].
    pub(crate) fn start(home: &Path, session_id: &str, lines: Channel<Line>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let session = session_id.to_owned();
        let tell = move |heard| {
            let line = Line::Transcript {
                session_id: session.clone(),
                heard,
            };
            lines.send(line).is_ok()
        };
        let follower = Follower::start(&ClaudeHome::new(home), session_id);
        let stopped = Arc::clone(&stop);
        // Without a thread (none can be made) no fact comes: the receipt rests on
        // notices and silence.
        let _ =
            thread::Builder::new()
                .name("transcript".to_owned())
                .spawn(move || match follower {
                    Ok(follower) => follow(follower, &stopped, &tell),
                    Err(err) => {
                        tell(Heard::Lost(err.to_string()));
                    }
                });
        Self { stop }
    }
}

/// The thread ends within [`STOP_CHECK`]; nobody waits for it, so a send never does.
impl Drop for Witness {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

/// Tells every fact until stopped, nobody listens, or the transcript is lost.
fn follow(mut follower: Follower, stop: &AtomicBool, tell: &impl Fn(Heard) -> bool) {
    while !stop.load(Ordering::Acquire) {
        match follower.next(STOP_CHECK) {
            Ok(facts) => {
                for fact in facts {
                    if !tell(Heard::Fact(fact)) {
                        return;
                    }
                }
            }
            Err(err) => {
                tell(Heard::Lost(err.to_string()));
                return;
            }
        }
    }
}
