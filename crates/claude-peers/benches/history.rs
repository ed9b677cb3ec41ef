//! A long-lived mailbox's cost per send stays flat: 600 sends of 60 KiB through one
//! mailbox to a holding receiver (Claude Code does not rate-limit held messages), the
//! median request → `sent` of the last 100 against the first 100, and the sender's
//! resident memory after 100 and after 600 sends. Claude Code compacts the sender's
//! history on the way (about every fifty such sends).
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/it/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::ffi::OsString;
use std::fs;
use std::time::{Duration, Instant};

use claude_peer_deliver::Courier;
use claude_peer_registry::ClaudeHome;
use claude_peer_sender::{ClaudeRelay, Idle, Mailbox};

use receiver::{Receiver, claude};

const SENDS: usize = 600;

fn median(times: &mut [Duration]) -> Duration {
    times.sort_unstable();
    times[times.len() / 2]
}

/// The resident memory of `pid`, in MiB.
fn rss_mib(pid: u32) -> f64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    kib / 1024.0
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    let first = Receiver::start(Some("hold"), &[]);
    let work = tempfile::tempdir().unwrap();
    let hook = vec![
        OsString::from(env!("CARGO_BIN_EXE_claude-peers")),
        OsString::from("hook"),
    ];
    let relay = ClaudeRelay::new(claude(), hook).home(work.path().join("sender-home"));
    let courier = Courier::os().with_managed_settings(work.path().join("none.json"));
    let mut mailbox =
        Mailbox::with_courier(courier, ClaudeHome::new(first.home.path()), &relay).unwrap();
    let text = "0123456789abcdef".repeat(60 * 1024 / 16);
    let mut times = Vec::with_capacity(SENDS);
    let mut rss_at_100 = 0.0;
    for n in 0..SENDS {
        let started = Instant::now();
        let sent = mailbox.send(&first.session_id, &format!("{n} {text}"), Idle::Ignore);
        times.push(started.elapsed());
        sent.unwrap_or_else(|err| panic!("send {n}: {err}"));
        while mailbox.next_event(Duration::ZERO).is_some() {}
        if n + 1 == 100 {
            rss_at_100 = rss_mib(mailbox.pid());
        }
    }
    let rss_at_600 = rss_mib(mailbox.pid());
    mailbox.close();
    let first_100 = median(&mut times[..100].to_vec());
    let last_100 = median(&mut times[SENDS - 100..].to_vec());
    println!("history, {SENDS} sends of 60 KiB through one mailbox (medians of request → sent):");
    println!("  first 100 sends                                   {first_100:>10.1?}");
    println!(
        "  last 100 sends                                    {last_100:>10.1?}  ({:.2}x the first; target 1.5x)",
        last_100.as_secs_f64() / first_100.as_secs_f64()
    );
    println!(
        "  the sender's resident memory: after 100 sends {rss_at_100:.0} MiB, after {SENDS} {rss_at_600:.0} MiB"
    );
}
