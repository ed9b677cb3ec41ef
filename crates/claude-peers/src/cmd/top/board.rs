//! What `top` shows, apart from how it looks: the live sessions in the order an operator
//! wants them (waiting on their user first, then busy, then idle), the filter, the
//! selected row and the scroll position, and what became of the messages sent from here.

use std::collections::{BTreeMap, HashMap};

use claude_peer_registry::{Activity, Pid, Record};
use claude_peer_resolve::LiveSession;
use claude_peer_watch::Event;

/// What became of the last message sent to a session from the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fate {
    /// Handed to the sender; not sent yet.
    Sending,
    /// Sent; what the receiver did, as the latest receipt says (`accepted` until one).
    Sent { msg_id: String, outcome: String },
    /// Refused or not delivered: the stable reason.
    Failed(String),
}

impl Fate {
    /// The word shown in the row's message column.
    pub(crate) fn word(&self) -> &str {
        match self {
            Self::Sending => "sending",
            Self::Sent { outcome, .. } => outcome,
            Self::Failed(reason) => reason,
        }
    }
}

/// Where a session is: the index of its host (0 is this machine, then the other hosts
/// `top --host` asks, in their order), and its pid there.
type Key = (usize, Pid);

/// The live sessions and the operator's view of them.
#[derive(Debug, Default)]
pub(crate) struct Board {
    sessions: BTreeMap<Key, LiveSession>,
    /// The sessions shown, in display order: the filter applied, then sorted.
    shown: Vec<Key>,
    /// The other hosts' names, by index (`hosts[0]` is host 1); none without `--host`.
    hosts: Vec<String>,
    filter: String,
    selected: Option<Key>,
    /// Index in `shown` of the first row on screen.
    offset: usize,
    /// How many rows the screen has room for.
    height: usize,
    /// What became of the last message sent to each session, by session id.
    fates: HashMap<String, Fate>,
}

/// One end of the shown rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    First,
    Last,
}

/// Counts per status, for the header.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) waiting: usize,
    pub(crate) busy: usize,
    pub(crate) idle: usize,
    /// Starting, or a status this program does not know.
    pub(crate) other: usize,
}

impl Board {
    /// Shows the sessions of these other hosts too, each row with its host.
    pub(crate) fn with_hosts(mut self, hosts: Vec<String>) -> Self {
        self.hosts = hosts;
        self
    }

    /// Applies the watch engine's events of this machine; the order is made again once,
    /// after all. The sessions that started waiting (for `--bell`).
    pub(crate) fn apply(&mut self, events: impl IntoIterator<Item = Event>) -> usize {
        self.apply_on(0, events)
    }

    /// [`Board::apply`] for the events of host `host` (1 and up: the other hosts).
    pub(crate) fn apply_on(
        &mut self,
        host: usize,
        events: impl IntoIterator<Item = Event>,
    ) -> usize {
        let mut started_waiting = 0;
        for event in events {
            match event {
                Event::Appeared(session) | Event::Changed(session) => {
                    let key = (host, session.pid);
                    let was_waiting = self
                        .sessions
                        .get(&key)
                        .is_some_and(|s| is_waiting(&s.record));
                    if !was_waiting && is_waiting(&session.record) {
                        started_waiting += 1;
                    }
                    self.sessions.insert(key, session);
                }
                Event::Vanished(session) => {
                    self.sessions.remove(&(host, session.pid));
                }
            }
        }
        self.reorder();
        started_waiting
    }

    /// Whether rows show their host: other hosts are asked.
    pub(crate) fn has_hosts(&self) -> bool {
        !self.hosts.is_empty()
    }

    /// The host of the live session `session_id`, by its index (0: this machine).
    pub(crate) fn host_of(&self, session_id: &str) -> Option<usize> {
        self.sessions
            .iter()
            .find(|(_, s)| s.record.session_id == session_id)
            .map(|((host, _), _)| *host)
    }

    /// A host's name: `local` for this machine.
    pub(crate) fn host_name(&self, host: usize) -> &str {
        host.checked_sub(1)
            .and_then(|at| self.hosts.get(at))
            .map_or(claude_peer_remote::LOCAL, String::as_str)
    }

    pub(crate) fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for session in self.sessions.values() {
            match session.record.activity() {
                Some(Activity::Waiting) => counts.waiting += 1,
                Some(Activity::Busy) => counts.busy += 1,
                Some(Activity::Idle) => counts.idle += 1,
                None => counts.other += 1,
            }
        }
        counts
    }

    /// How many sessions are live, shown or not.
    pub(crate) fn live(&self) -> usize {
        self.sessions.len()
    }

    pub(crate) fn filter(&self) -> &str {
        &self.filter
    }

    /// Shows only the sessions whose name or cwd holds `filter` (any case).
    pub(crate) fn set_filter(&mut self, filter: String) {
        self.filter = filter;
        self.reorder();
    }

    /// The screen has room for `height` rows now (it was resized, or measured for a draw).
    pub(crate) fn set_height(&mut self, height: usize) {
        self.height = height;
        self.scroll();
    }

    /// Scrolls so that the selected row is among the `height` on screen: after every
    /// change of the rows, the selection or the height.
    fn scroll(&mut self) {
        let height = self.height;
        if let Some(at) = self.selected_index() {
            if at < self.offset {
                self.offset = at;
            } else if height > 0 && at >= self.offset + height {
                self.offset = at + 1 - height;
            }
        }
        self.offset = self
            .offset
            .min(self.shown.len().saturating_sub(height.max(1)));
    }

    /// The shown sessions from the first on screen, as many as there is room for, and
    /// the index among them of the selected one.
    pub(crate) fn visible(&self) -> (Vec<&LiveSession>, Option<usize>) {
        let rows = self
            .shown
            .iter()
            .skip(self.offset)
            .take(self.height)
            .filter_map(|key| self.sessions.get(key))
            .collect();
        let selected = self
            .selected_index()
            .and_then(|at| at.checked_sub(self.offset))
            .filter(|&at| at < self.height);
        (rows, selected)
    }

    fn selected_index(&self) -> Option<usize> {
        self.selected
            .and_then(|key| self.shown.iter().position(|&k| k == key))
    }

    /// The selected session, when one is shown.
    pub(crate) fn selected(&self) -> Option<&LiveSession> {
        self.selected
            .filter(|key| self.shown.contains(key))
            .and_then(|key| self.sessions.get(&key))
    }

    /// Moves the selection `by` rows, within the shown ones.
    pub(crate) fn move_by(&mut self, by: isize) {
        if self.shown.is_empty() {
            return;
        }
        let at = self.selected_index().unwrap_or(0);
        let last = self.shown.len() - 1;
        let to = at.saturating_add_signed(by).min(last);
        self.selected = Some(self.shown[to]);
        self.scroll();
    }

    /// Moves the selection to the first or the last shown row.
    pub(crate) fn move_to_end(&mut self, end: End) {
        let key = match end {
            End::First => self.shown.first(),
            End::Last => self.shown.last(),
        };
        self.selected = key.copied().or(self.selected);
        self.scroll();
    }

    /// The live session `session_id`, shown or not.
    pub(crate) fn session(&self, session_id: &str) -> Option<&LiveSession> {
        self.sessions
            .values()
            .find(|s| s.record.session_id == session_id)
    }

    pub(crate) fn fate(&self, session_id: &str) -> Option<&Fate> {
        self.fates.get(session_id)
    }

    pub(crate) fn set_fate(&mut self, session_id: &str, fate: Fate) {
        self.fates.insert(session_id.to_owned(), fate);
    }

    /// Records a receipt for the messages `msg_ids`: the row of the session each went to
    /// shows it, when that is still the last message sent there.
    pub(crate) fn receipt(&mut self, msg_ids: &[String], outcome: &str) {
        for fate in self.fates.values_mut() {
            if let Fate::Sent {
                msg_id,
                outcome: shown,
            } = fate
                && msg_ids.contains(msg_id)
            {
                outcome.clone_into(shown);
            }
        }
    }

    /// Filters and sorts again, keeping the selected session selected (or the first row
    /// when it is gone from view).
    fn reorder(&mut self) {
        let needle = self.filter.to_lowercase();
        let mut shown: Vec<(&Key, &LiveSession)> = self
            .sessions
            .iter()
            .filter(|(_, s)| needle.is_empty() || matches(&s.record, &needle))
            .collect();
        shown.sort_by_key(|(key, s)| order_key(**key, s));
        self.shown = shown.into_iter().map(|(key, _)| *key).collect();
        if !self.selected.is_some_and(|key| self.shown.contains(&key)) {
            self.selected = self.shown.first().copied();
        }
        self.scroll();
    }
}

fn is_waiting(record: &Record) -> bool {
    record.activity() == Some(Activity::Waiting)
}

/// Waiting first (the longest waiting at the top), then busy, idle and the rest, each
/// by name, host and pid: rows move only when a session's status does.
fn order_key(key: Key, session: &LiveSession) -> (u8, u64, String, Key) {
    let record = &session.record;
    let rank = match record.activity() {
        Some(Activity::Waiting) => 0,
        Some(Activity::Busy) => 1,
        Some(Activity::Idle) => 2,
        None => 3,
    };
    let since = if rank == 0 {
        record.status_updated_at.unwrap_or(0)
    } else {
        0
    };
    let name = record.display_name().unwrap_or_default().to_lowercase();
    (rank, since, name, key)
}

fn matches(record: &Record, needle: &str) -> bool {
    [record.name.as_deref(), record.cwd.as_deref()]
        .into_iter()
        .flatten()
        .any(|text| text.to_lowercase().contains(needle))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use claude_peer_registry::{Pid, Record};
    use claude_peer_resolve::{Addressability, LiveSession, Unaddressable};
    use claude_peer_watch::Event;
    use proptest::prelude::*;

    use super::{Board, Fate};

    fn session(pid: u32, name: &str, status: &str, since: u64) -> LiveSession {
        let record: Record = serde_json::from_value(serde_json::json!({
            "pid": pid, "sessionId": format!("s-{pid}"), "name": name,
            "cwd": format!("/work/{name}"), "status": status, "statusUpdatedAt": since,
        }))
        .unwrap();
        LiveSession {
            file: PathBuf::from(format!("/h/sessions/{pid}.json")),
            pid: Pid::new(pid).unwrap(),
            record,
            addressability: Addressability::NotAddressable(Unaddressable::NoSocket),
        }
    }

    fn names(board: &mut Board) -> Vec<String> {
        board.set_height(100);
        let (rows, _) = board.visible();
        rows.iter()
            .map(|s| s.record.name.clone().unwrap())
            .collect()
    }

    #[test]
    fn waiting_sessions_come_first_the_longest_waiting_at_the_top_then_busy_then_idle() {
        let mut board = Board::default();
        let started = board.apply([
            Event::Appeared(session(10, "idle-a", "idle", 5)),
            Event::Appeared(session(11, "busy", "busy", 5)),
            Event::Appeared(session(12, "wait-late", "waiting", 900)),
            Event::Appeared(session(13, "wait-early", "waiting", 100)),
            Event::Appeared(session(14, "Idle-B", "idle", 1)),
            Event::Appeared(session(15, "shell", "shell", 1)),
        ]);
        assert_eq!(started, 2);
        assert_eq!(
            names(&mut board),
            [
                "wait-early",
                "wait-late",
                "busy",
                "shell",
                "idle-a",
                "Idle-B"
            ]
        );
        let counts = board.counts();
        assert_eq!((counts.waiting, counts.busy, counts.idle), (2, 2, 2));
        // A session that stops waiting moves down; one that starts counts once.
        let started = board.apply([
            Event::Changed(session(13, "wait-early", "idle", 1000)),
            Event::Changed(session(12, "wait-late", "waiting", 900)),
        ]);
        assert_eq!(started, 0);
        assert_eq!(names(&mut board)[0], "wait-late");
        board.apply([Event::Vanished(session(12, "wait-late", "waiting", 900))]);
        assert_eq!(board.live(), 5);
    }

    #[test]
    fn the_filter_matches_name_or_cwd_in_any_case_and_the_selection_follows_its_session() {
        let mut board = Board::default();
        board.apply(
            (1..=5).map(|i| Event::Appeared(session(10 + i, &format!("worker-{i}"), "idle", 0))),
        );
        board.move_by(2);
        assert_eq!(board.selected().unwrap().pid.get(), 13);
        board.apply([Event::Appeared(session(9, "a-first", "idle", 0))]);
        assert_eq!(
            board.selected().unwrap().pid.get(),
            13,
            "kept across reordering"
        );
        board.set_filter("WORKER-4".to_owned());
        assert_eq!(names(&mut board), ["worker-4"]);
        assert_eq!(
            board.selected().unwrap().pid.get(),
            14,
            "the only row shown"
        );
        board.set_filter("/work/a-".to_owned());
        assert_eq!(names(&mut board), ["a-first"]);
        board.set_filter("nothing".to_owned());
        assert!(board.selected().is_none());
        board.move_by(1);
        assert!(board.selected().is_none());
    }

    #[test]
    fn receipts_reach_the_row_of_the_message_they_name() {
        let mut board = Board::default();
        board.set_fate("s-1", Fate::Sending);
        board.set_fate(
            "s-1",
            Fate::Sent {
                msg_id: "m1".to_owned(),
                outcome: "accepted".to_owned(),
            },
        );
        board.set_fate(
            "s-2",
            Fate::Sent {
                msg_id: "m2".to_owned(),
                outcome: "accepted".to_owned(),
            },
        );
        board.receipt(&["m1".to_owned()], "read");
        assert_eq!(board.fate("s-1").unwrap().word(), "read");
        assert_eq!(board.fate("s-2").unwrap().word(), "accepted");
    }

    proptest! {
        /// Whatever the moves, the resizes and the sessions that come and go, the
        /// selected row is on screen after each of them.
        #[test]
        fn the_selected_row_stays_in_view(
            n in 0_u32..300,
            height in 1_usize..60,
            steps in proptest::collection::vec((-70_isize..70, 1_usize..60, 0_u32..300), 0..30),
        ) {
            let mut board = Board::default();
            board.set_height(height);
            board.apply((1..=n).map(|i| Event::Appeared(session(i + 1, &format!("s{i:03}"), "idle", 0))));
            let mut live = n;
            for (by, height, gone) in steps {
                board.move_by(by);
                assert_in_view(&board, live)?;
                board.set_height(height);
                assert_in_view(&board, live)?;
                if gone < live {
                    board.apply([Event::Vanished(session(live + 1, "", "idle", 0))]);
                    live -= 1;
                    assert_in_view(&board, live)?;
                }
            }
        }
    }

    fn assert_in_view(board: &Board, live: u32) -> Result<(), TestCaseError> {
        let selected = board.selected().map(|s| s.pid);
        let (rows, at) = board.visible();
        prop_assert_eq!(rows.len(), (live as usize).min(board.height));
        match (selected, at) {
            (Some(pid), Some(at)) => prop_assert_eq!(rows[at].pid, pid),
            (None, None) => prop_assert_eq!(live, 0),
            other => prop_assert!(false, "selection {:?} not in view", other),
        }
        Ok(())
    }
}
