//! `top --host`: the other hosts' sessions beside this machine's, each row with its host.
//! Each host is followed by its own `watch` over ssh (as `watch --host` follows it, again
//! after a drop), and a message to one of its sessions is sent by that host's own
//! `send`, the message on its stdin, its receipt the host's.

use std::sync::mpsc::Sender;

use claude_peer_remote::Host;
use claude_peer_watch::Event;
use serde_json::Value;

use super::LoopInput;
use super::board::Fate;
use super::state::State;
use crate::cmd::watch::{Running, follow};
use crate::ops::remote::{self, Hosts};

/// What a host told the dashboard.
#[derive(Debug)]
pub(crate) enum Told {
    /// An event of its `watch` (a session's, or `unreachable` / `reachable`).
    Event { host: usize, event: Value },
    /// What became of a message sent to one of its sessions.
    Sent {
        session_id: String,
        fate: Fate,
        status: String,
    },
}

/// The other hosts (not `local`), in the order asked: host `i + 1` of the board.
pub(crate) fn others(hosts: &Hosts) -> Vec<Host> {
    hosts
        .list
        .iter()
        .filter(|host| **host != Host::Local)
        .cloned()
        .collect()
}

/// Follows every other host on a thread of its own; their processes, to stop at the end.
pub(crate) fn follow_all(hosts: &Hosts, to: &Sender<LoopInput>) -> Running {
    let running = Running::default();
    for (at, host) in others(hosts).into_iter().enumerate() {
        let (hosts, to, running) = (hosts.clone(), to.clone(), running.clone());
        std::thread::spawn(move || {
            let tell = |event| {
                let told = Told::Event {
                    host: at + 1,
                    event,
                };
                to.send(LoopInput::Host(told)).is_ok()
            };
            follow(&hosts, &host, false, &tell, &running);
        });
    }
    running
}

/// Applies what a host told; the sessions that started waiting (for `--bell`).
pub(crate) fn apply(state: &mut State, told: Told) -> usize {
    match told {
        Told::Event { host, event } => {
            let name = state.board.host_name(host).to_owned();
            let session = || remote::live_session(&event["session"]);
            let applied = match event["event"].as_str() {
                Some("appeared") => session().map(Event::Appeared),
                Some("changed") => session().map(Event::Changed),
                Some("vanished") => session().map(Event::Vanished),
                Some("unreachable") => {
                    state.status = format!(
                        "{name} is unreachable: {}",
                        event["message"].as_str().unwrap_or_default()
                    );
                    None
                }
                Some("reachable") => {
                    state.status = format!("{name} is reachable again");
                    None
                }
                _ => None,
            };
            applied.map_or(0, |event| state.board.apply_on(host, [event]))
        }
        Told::Sent {
            session_id,
            fate,
            status,
        } => {
            state.board.set_fate(&session_id, fate);
            state.status = status;
            0
        }
    }
}

/// Sends `text` to `session_id` on `host` by that host's own `send`, from `from`, on a
/// thread of its own; what became of it reaches the dashboard.
pub(crate) fn send(
    hosts: &Hosts,
    host: Host,
    session_id: String,
    text: String,
    from: &str,
    to: &Sender<LoopInput>,
) {
    let (hosts, to) = (hosts.clone(), to.clone());
    let words = [
        "send".into(),
        session_id.clone().into(),
        format!("--from={from}").into(),
    ];
    std::thread::spawn(move || {
        let asked = hosts.ask(&host, &words, text.as_bytes());
        let (fate, status) = match remote::succeeded(&host, asked) {
            Ok(sent) => {
                let outcome = sent["receipt"].as_str().unwrap_or("accepted").to_owned();
                let msg_id = sent["msg_id"].as_str().unwrap_or_default().to_owned();
                let status = format!("sent on {host}: {outcome}");
                (Fate::Sent { msg_id, outcome }, status)
            }
            Err(err) => {
                let name = match &err {
                    remote::HostError::Way(way) => way.as_str().to_owned(),
                    remote::HostError::Said { value, .. } => remote::said_name(value).to_owned(),
                };
                (Fate::Failed(name), format!("not sent: {err}"))
            }
        };
        let _ = to.send(LoopInput::Host(Told::Sent {
            session_id,
            fate,
            status,
        }));
    });
}
