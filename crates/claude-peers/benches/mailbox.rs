//! Per-send latency through a running mailbox against one-shot sends, side by side on
//! the same receiver, and the mailbox's sender's resident memory idle and after 100 sends;
//! then a long run: the cost per send of the last of 600 sends of 60 KiB against the first.
// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../tests/it/receiver.rs"]
#[allow(dead_code)]
mod receiver;

use std::ffi::OsString;
use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_peer_deliver::{Courier, Outcome, deliver};
use claude_peer_registry::ClaudeHome;
use claude_peer_sender::{ClaudeRelay, Idle, Mailbox, MailboxEvent};

use receiver::{Receiver, claude};

const ROUNDS: usize = 9;
const SENDS: usize = 100;
/// The sends of the long run.
const LONG_RUN: usize = 600;

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

/// Waits for the `read` receipt of `msg_id`.
fn await_read(mailbox: &mut Mailbox, msg_id: &str) {
    loop {
        match mailbox.next_event(Duration::from_secs(30)) {
            Some(MailboxEvent::Receipt(r))
                if r.outcome == Outcome::Read && r.msg_ids.iter().any(|id| id == msg_id) =>
            {
                return;
            }
            Some(_) => {}
            None => panic!("no read receipt for {msg_id} within 30 s"),
        }
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return; // `cargo test --benches` asks for a list; there is nothing to list.
    }
    let receiver = Receiver::start(Some("accept"), &[]);
    let work = tempfile::tempdir().unwrap();
    let home = ClaudeHome::new(receiver.home.path());
    let hook = vec![
        OsString::from(env!("CARGO_BIN_EXE_claude-peers")),
        OsString::from("hook"),
    ];
    let relay = ClaudeRelay::new(claude(), hook).home(work.path().join("sender-home"));
    let managed = work.path().join("none.json");
    let courier = || Courier::os().with_managed_settings(&managed);
    let mut mailbox = Mailbox::with_courier(courier(), home.clone(), &relay).unwrap();
    mailbox
        .send(&receiver.session_id, "warm up", Idle::Ignore)
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let idle_rss = rss_mib(mailbox.pid());

    let (mut running, mut read, mut sent_only, mut whole) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let to_sent = relay.clone().receipt_window(Duration::ZERO);
    for round in 0..ROUNDS {
        let started = Instant::now();
        let sent = mailbox
            .send(
                &receiver.session_id,
                &format!("running {round}"),
                Idle::Ignore,
            )
            .unwrap();
        running.push(started.elapsed());
        await_read(&mut mailbox, &sent.msg_id.unwrap());
        read.push(started.elapsed());

        let started = Instant::now();
        deliver(
            &home,
            &receiver.session_id,
            &format!("one-shot {round}"),
            &to_sent,
        )
        .unwrap();
        sent_only.push(started.elapsed());

        let started = Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_claude-peers"))
            .arg("--home")
            .arg(receiver.home.path())
            .args([
                "--json",
                "send",
                &receiver.session_id,
                "--message",
                "whole",
                "--claude",
            ])
            .arg(claude())
            .arg("--managed-settings")
            .arg(&managed)
            .env_remove("XDG_RUNTIME_DIR")
            .env("XDG_CACHE_HOME", work.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        whole.push(started.elapsed());
    }
    // Claude Code lets about 32 messages reach one session in a short while and refuses
    // more ("its rate limit"): the load is paced by retrying after a pause.
    let mut limited = 0;
    for n in 0..SENDS {
        while let Err(err) = mailbox.send(&receiver.session_id, &format!("load {n}"), Idle::Ignore)
        {
            assert!(err.to_string().contains("rate limit"), "{err}");
            limited += 1;
            std::thread::sleep(Duration::from_secs(2));
        }
        while mailbox.next_event(Duration::ZERO).is_some() {}
    }
    let loaded_rss = rss_mib(mailbox.pid());
    let closed = mailbox.close();
    assert!(matches!(closed.last(), Some(MailboxEvent::Closed { .. })));

    let [running, read, sent_only, whole] =
        [&mut running, &mut read, &mut sent_only, &mut whole].map(|t| median(t));
    println!("mailbox, {ROUNDS} interleaved rounds on one accepting receiver (medians):");
    println!("  send through a running mailbox (to msg_id)        {running:>10.1?}");
    println!("  request to its `read` receipt (target 400 ms)      {read:>10.1?}");
    println!(
        "  one-shot send, library, to msg_id (no window)      {sent_only:>10.1?}  ({:.1}x the mailbox)",
        sent_only.as_secs_f64() / running.as_secs_f64()
    );
    println!(
        "  one-shot `claude-peers send`, whole process        {whole:>10.1?}  ({:.1}x the mailbox)",
        whole.as_secs_f64() / running.as_secs_f64()
    );
    println!(
        "  the mailbox's sender, resident memory: idle {idle_rss:.0} MiB, after {} sends {loaded_rss:.0} MiB ({limited} sends refused by Claude Code's rate limit and retried)",
        SENDS + ROUNDS + 1
    );
    history();
}

/// 600 sends of 60 KiB through one mailbox to a holding receiver (Claude Code does not
/// rate-limit held messages): the median request → `sent` of the last 100 against the
/// first 100, and the sender's resident memory after 100 and after 600 sends; Claude
/// Code compacts the sender's history on the way.
fn history() {
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
    let mut times = Vec::with_capacity(LONG_RUN);
    let mut rss_at_100 = 0.0;
    for n in 0..LONG_RUN {
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
    let last_100 = median(&mut times[LONG_RUN - 100..].to_vec());
    println!(
        "history, {LONG_RUN} sends of 60 KiB through one mailbox (medians of request → sent):"
    );
    println!("  first 100 sends                                   {first_100:>10.1?}");
    println!(
        "  last 100 sends                                    {last_100:>10.1?}  ({:.2}x the first; target 1.5x)",
        last_100.as_secs_f64() / first_100.as_secs_f64()
    );
    println!(
        "  the sender's resident memory: after 100 sends {rss_at_100:.0} MiB, after {LONG_RUN} {rss_at_600:.0} MiB"
    );
}
