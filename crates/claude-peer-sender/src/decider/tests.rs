use std::time::{Duration, Instant};

use claude_peer_deliver::{Basis, Outcome, Receipt};
use proptest::prelude::*;

use super::{Decider, Seen, Waits, Word};

const WAITS: Waits = Waits {
    window: Duration::from_secs(2),
    read: Duration::from_secs(3),
};

fn at(start: Instant, ms: u64) -> Instant {
    start + Duration::from_millis(ms)
}

fn receipt(outcome: Outcome, basis: Basis) -> Receipt {
    Receipt { outcome, basis }
}

const QUEUED: Word = Word::Transcript(Seen::Queued);
const READ: Word = Word::Transcript(Seen::Read);
const HELD: Word = Word::Transcript(Seen::Held);

#[test]
fn read_decides_at_once_and_queued_after_it_is_old_news() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    assert_eq!(
        decider.hear(READ, at(start, 10)),
        Some(receipt(Outcome::Read, Basis::Transcript))
    );
    assert_eq!(decider.hear(QUEUED, at(start, 20)), None);
    assert_eq!(
        decider.decision(),
        Some(receipt(Outcome::Read, Basis::Transcript))
    );
    assert_eq!(decider.decide_by(), None);
    assert!(decider.is_final() && !decider.is_open());
}

#[test]
fn queued_waits_for_read_and_read_within_the_wait_decides_read() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    assert_eq!(
        decider.hear(QUEUED, at(start, 100)),
        Some(receipt(Outcome::Queued, Basis::Transcript)),
        "queued is told as it is seen"
    );
    assert_eq!(decider.decision(), None, "but not decided");
    assert_eq!(decider.decide_by(), Some(at(start, 3100)), "the read wait");
    assert_eq!(
        decider.waited(at(start, 2500)),
        None,
        "past the window, not the read wait"
    );
    assert_eq!(decider.decision(), None);
    assert_eq!(
        decider.hear(READ, at(start, 3000)),
        Some(receipt(Outcome::Read, Basis::Transcript))
    );
    assert_eq!(decider.decision().map(|r| r.outcome), Some(Outcome::Read));
}

#[test]
fn queued_then_the_read_wait_passing_decides_queued_and_a_later_read_is_news_only() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    decider.hear(QUEUED, at(start, 100));
    assert_eq!(
        decider.waited(at(start, 3100)),
        None,
        "queued was told already"
    );
    assert_eq!(
        decider.decision(),
        Some(receipt(Outcome::Queued, Basis::Transcript))
    );
    assert!(!decider.is_open(), "queued is decided");
    assert_eq!(
        decider.hear(READ, at(start, 9000)),
        Some(receipt(Outcome::Read, Basis::Transcript)),
        "a fact after the outcome is told"
    );
    assert_eq!(
        decider.decision().map(|r| r.outcome),
        Some(Outcome::Queued),
        "and changes no decision"
    );
}

#[test]
fn no_wait_for_read_decides_queued_as_it_is_seen() {
    let start = Instant::now();
    let mut decider = Decider::new(
        start,
        Waits {
            read: Duration::ZERO,
            ..WAITS
        },
    );
    decider.hear(QUEUED, at(start, 100));
    assert_eq!(decider.decision().map(|r| r.outcome), Some(Outcome::Queued));
}

#[test]
fn silence_through_the_window_decides_accepted_once() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    assert_eq!(decider.waited(at(start, 1999)), None);
    assert_eq!(
        decider.waited(at(start, 2000)),
        Some(receipt(Outcome::Accepted, Basis::Silence))
    );
    assert_eq!(decider.waited(at(start, 5000)), None, "told once");
    assert_eq!(
        decider.hear(Word::Notice(Outcome::Held), at(start, 6000)),
        Some(receipt(Outcome::Held, Basis::Notice)),
        "a late notice is told"
    );
    assert_eq!(
        decider.decision().map(|r| r.outcome),
        Some(Outcome::Accepted),
        "the decision stands"
    );
}

#[test]
fn a_later_send_to_the_same_receiver_defers_silence() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    decider.defer(at(start, 1500));
    assert_eq!(decider.decide_by(), Some(at(start, 3500)));
    assert_eq!(decider.waited(at(start, 2500)), None);
    decider.defer(at(start, 100));
    assert_eq!(decider.decide_by(), Some(at(start, 3500)), "never earlier");
}

#[test]
fn held_in_the_transcript_decides_held_and_its_notice_is_not_told_twice() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    assert_eq!(
        decider.hear(HELD, at(start, 5)),
        Some(receipt(Outcome::Held, Basis::Transcript))
    );
    assert!(
        decider.awaits(Outcome::Held),
        "its notice is still about it"
    );
    assert_eq!(
        decider.hear(Word::Notice(Outcome::Held), at(start, 400)),
        None
    );
    assert!(!decider.awaits(Outcome::Held));
    assert_eq!(
        decider.waited(at(start, 60_000)),
        None,
        "held never turns accepted"
    );
    assert!(decider.is_open(), "held waits for its release");
    assert!(decider.awaits(Outcome::Released));
    assert_eq!(
        decider.hear(Word::Notice(Outcome::Released), at(start, 70_000)),
        Some(receipt(Outcome::Released, Basis::Notice))
    );
    assert!(
        !decider.is_open() && !decider.is_final(),
        "released: read may follow"
    );
    assert_eq!(
        decider.hear(READ, at(start, 70_100)),
        Some(receipt(Outcome::Read, Basis::Transcript))
    );
    assert_eq!(
        decider.decision(),
        Some(receipt(Outcome::Held, Basis::Transcript))
    );
}

#[test]
fn a_held_notice_before_the_transcript_decides_held_on_the_notice() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    decider.hear(Word::Notice(Outcome::Held), at(start, 300));
    assert_eq!(decider.hear(HELD, at(start, 301)), None, "not told twice");
    assert_eq!(
        decider.decision(),
        Some(receipt(Outcome::Held, Basis::Notice))
    );
}

#[test]
fn held_after_queued_decides_held_not_queued() {
    let start = Instant::now();
    let mut decider = Decider::new(start, WAITS);
    decider.hear(QUEUED, at(start, 1));
    decider.hear(Word::Notice(Outcome::Refused), at(start, 2));
    assert_eq!(
        decider.decision().map(|r| r.outcome),
        Some(Outcome::Refused)
    );
    assert!(decider.is_final());
}

#[test]
fn settling_early_says_what_is_known() {
    let start = Instant::now();
    let mut quiet = Decider::new(start, WAITS);
    assert_eq!(
        quiet.settle(),
        receipt(Outcome::Accepted, Basis::Silence),
        "the sender ended before anything was heard"
    );
    let mut queued = Decider::new(start, WAITS);
    queued.hear(QUEUED, at(start, 1));
    assert_eq!(queued.settle(), receipt(Outcome::Queued, Basis::Transcript));
    let mut held = Decider::new(start, WAITS);
    held.hear(HELD, at(start, 1));
    assert_eq!(held.settle(), receipt(Outcome::Held, Basis::Transcript));
}

/// One step fed to a decider: a word at a time, or the time coming (`waited`).
#[derive(Debug, Clone)]
enum Step {
    Hear(Word, u64),
    Wait(u64),
}

fn word() -> impl Strategy<Value = Word> {
    prop_oneof![
        Just(QUEUED),
        Just(READ),
        Just(HELD),
        prop::sample::select(vec![
            Outcome::Held,
            Outcome::Refused,
            Outcome::Released,
            Outcome::Denied,
            Outcome::Expired,
        ])
        .prop_map(Word::Notice),
    ]
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        (word(), 0..8_000u64).prop_map(|(word, ms)| Step::Hear(word, ms)),
        (0..8_000u64).prop_map(Step::Wait),
    ];
    // Time only moves on: each step's time is at least the one before.
    prop::collection::vec(step, 0..12).prop_map(|mut steps| {
        let mut last = 0;
        for step in &mut steps {
            let (Step::Hear(_, ms) | Step::Wait(ms)) = step;
            *ms = (*ms).max(last);
            last = *ms;
        }
        steps
    })
}

/// The documented rule, from the steps alone: the first word that decides, unless a
/// deadline (the window, or the read wait after `queued`) was seen to pass first.
fn expected(steps: &[Step]) -> Option<Receipt> {
    let mut queued_at = None;
    for step in steps {
        let deadline = queued_at.map_or(WAITS.window, |at: Duration| at + WAITS.read);
        match *step {
            Step::Wait(ms) if Duration::from_millis(ms) >= deadline => {
                return Some(match queued_at {
                    Some(_) => receipt(Outcome::Queued, Basis::Transcript),
                    None => receipt(Outcome::Accepted, Basis::Silence),
                });
            }
            Step::Wait(_) => {}
            Step::Hear(QUEUED, ms) => {
                queued_at.get_or_insert(Duration::from_millis(ms));
            }
            Step::Hear(Word::Transcript(seen), _) => {
                let outcome = if seen == Seen::Read {
                    Outcome::Read
                } else {
                    Outcome::Held
                };
                return Some(receipt(outcome, Basis::Transcript));
            }
            Step::Hear(Word::Notice(outcome), _) => {
                return Some(receipt(outcome, Basis::Notice));
            }
        }
    }
    None
}

proptest! {
    #[test]
    fn any_order_of_words_and_waits_decides_once_by_the_rule(steps in steps()) {
        let start = Instant::now();
        let mut decider = Decider::new(start, WAITS);
        let mut decisions = Vec::new();
        let mut told = Vec::new();
        for step in &steps {
            let news = match *step {
                Step::Hear(word, ms) => decider.hear(word, at(start, ms)),
                Step::Wait(ms) => decider.waited(at(start, ms)),
            };
            told.extend(news.map(|r| r.outcome));
            if let Some(decided) = decider.decision()
                && decisions.last() != Some(&decided)
            {
                decisions.push(decided);
            }
        }
        prop_assert!(decisions.len() <= 1, "decided more than once: {:?}", decisions);
        prop_assert_eq!(decider.decision(), expected(&steps));
        let mut unique = told.clone();
        unique.dedup();
        unique.sort_by_key(|o| o.as_str());
        unique.dedup();
        prop_assert_eq!(unique.len(), told.len(), "an outcome told twice: {:?}", told);
        if let Some(decided) = decider.decision() {
            prop_assert_eq!(decider.decide_by(), None);
            prop_assert!(told.contains(&decided.outcome), "the decision was told");
        }
    }
}
