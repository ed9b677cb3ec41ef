//! The scan benchmark: `Discovery::scan` against a naive scan written here, on
//! registries generated in a temporary directory, and the peak memory of a scan
//! whose registry holds a 1 GiB sparse file.
//!
//! Run with `cargo bench -p claude-peer-resolve --bench scan`. It prints one table;
//! timings are medians (and minima) of interleaved runs, so machine noise hits both
//! scanners alike. Correctness is asserted, timing targets are only reported.
//!
//! "warm" scans share one long-lived `Discovery`, as a harness that scans many times
//! a second keeps one (its process table pins the live processes it has seen);
//! "cold" scans build a fresh `Discovery::os()` each, as the first scan of a table.

// A benchmark that cannot set up should stop loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use claude_peer_probe::{OsProcessTable, OsRegistryFs};
use claude_peer_registry::{ClaudeHome, MAX_RECORD_BYTES};
use claude_peer_resolve::{Discovery, LiveSession, Scope};
use claude_peer_testkit::process::Children;
use claude_peer_testkit::registry::{Machine, Registry};

/// The argument that makes this binary measure one scan's peak memory and exit.
const PEAK_CHILD: &str = "--peak-rss-child";

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == PEAK_CHILD) {
        peak_child(&args[at + 1..]);
        return;
    }
    let started = Instant::now();
    let machine = Machine::learn();
    println!(
        "scan benchmark: {} CPUs, pid_max {}, pid domain {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        machine.pid_max,
        machine
            .pid_domain
            .as_deref()
            .unwrap_or("(unknown: records carry none)"),
    );
    println!(
        "each scanner runs interleaved (ours live warm, ours live cold, naive, ours all warm, ...); median (min) per scan"
    );

    let cases = [
        Case {
            label: "1000 records, 1% live",
            records: 1000,
            live: 10,
            iterations: 41,
            target: Target::None,
        },
        Case {
            label: "10000 records, 1% live",
            records: 10_000,
            live: 100,
            iterations: 15,
            target: Target::AtLeastFaster(3.0),
        },
        Case {
            label: "500 records, 100% live",
            records: 500,
            live: 500,
            iterations: 41,
            target: Target::AtMostSlower(1.5),
        },
    ];
    println!(
        "warm = one Discovery kept across scans (how harnesses scan); cold = a fresh Discovery::os() per scan\n"
    );
    println!(
        "{:<24} {:>19} {:>19} {:>19} {:>19} {:>10}  {:<30} met",
        "case",
        "ours(live) warm",
        "ours(live) cold",
        "ours(all) warm",
        "naive",
        "naive/ours",
        "target (on warm; cold ratio)"
    );
    // `SCAN_BENCH_ONLY=<text>` runs only the cases whose label contains it, and
    // skips the memory part (for profiling one case).
    let only = std::env::var("SCAN_BENCH_ONLY").ok();
    for case in &cases {
        if only.as_deref().is_some_and(|o| !case.label.contains(o)) {
            continue;
        }
        let row = run_case(&machine, case);
        println!("{row}");
    }
    println!(
        "\n(naive/ours = naive median / ours(live) warm median: the live-only scan's speed-up.\n \
         Targets apply to the warm figure; the cold ratio is shown beside it. A cold scan's fresh\n \
         table reads /proc for every live pid; boot time, clock rate and pid domain are learned\n \
         once per process, before the first timed scan.)"
    );

    if only.is_none() {
        println!();
        peak_memory(&machine);
    }
    println!(
        "\ntotal bench time {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

#[derive(Clone, Copy)]
enum Target {
    None,
    /// naive / ours(live) at least this.
    AtLeastFaster(f64),
    /// ours(live) / naive at most this.
    AtMostSlower(f64),
}

struct Case {
    label: &'static str,
    records: usize,
    live: usize,
    iterations: usize,
    target: Target,
}

/// The naive scan: read and JSON-parse every `*.json`, then `kill(pid, 0)` each.
fn naive_scan(sessions: &Path) -> Vec<u32> {
    let mut alive = Vec::new();
    for entry in fs::read_dir(sessions).expect("list the registry") {
        let entry = entry.expect("a directory entry");
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(bytes) = fs::read(entry.path()) else {
            continue;
        };
        let Ok(value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
            continue;
        };
        black_box(&value);
        let Some(target) = rustix::process::Pid::from_raw(pid) else {
            continue;
        };
        if rustix::process::test_kill_process(target).is_ok() {
            alive.push(pid.cast_unsigned());
        }
    }
    alive
}

type OsDiscovery = Discovery<OsProcessTable, OsRegistryFs>;

/// Our scan with `discovery`; returns the live pids and the number of entries reported.
fn ours_scan(discovery: &OsDiscovery, home: &ClaudeHome, scope: Scope) -> (Vec<u32>, usize) {
    let scan = discovery.scan(home, scope).expect("scan the registry");
    let reported = scan.entries.len();
    let live = scan
        .entries
        .into_iter()
        .filter_map(|s| LiveSession::try_from(s).ok())
        .map(|s| s.pid.get())
        .collect();
    (live, reported)
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let start = Instant::now();
    let out = black_box(f());
    (start.elapsed(), out)
}

fn run_case(machine: &Machine, case: &Case) -> String {
    let children = Children::spawn(case.live).unwrap();
    let registry = Registry::generate(machine, case.records - case.live, &children).unwrap();
    let expected: BTreeSet<u32> = children.pids().into_iter().collect();

    // One table for the whole case, as a harness keeps one.
    let warm = Discovery::os();
    // Sanity, not timing: scanners that disagree measure nothing.
    let (live, reported) = ours_scan(&Discovery::os(), &registry.home, Scope::Live);
    let live: BTreeSet<u32> = live.into_iter().collect();
    assert_eq!(
        live, expected,
        "{}: ours(live) must find exactly the live children",
        case.label
    );
    assert_eq!(
        reported, case.live,
        "{}: ours(live) lists only live sessions",
        case.label
    );
    let (live_all, reported_all) = ours_scan(&warm, &registry.home, Scope::All);
    assert_eq!(
        live_all.into_iter().collect::<BTreeSet<_>>(),
        expected,
        "{}: ours(all) must find exactly the live children",
        case.label
    );
    assert_eq!(
        reported_all, case.records,
        "{}: ours(all) reports every record",
        case.label
    );
    let naive: BTreeSet<u32> = naive_scan(&registry.sessions).into_iter().collect();
    assert_eq!(
        naive, expected,
        "{}: the naive scan must find exactly the live children",
        case.label
    );

    // Warm-up: page cache, dentries, allocator.
    let (live_warm, _) = ours_scan(&warm, &registry.home, Scope::Live);
    assert_eq!(
        live_warm.into_iter().collect::<BTreeSet<_>>(),
        expected,
        "{}: a long-lived table's scan must find exactly the live children",
        case.label
    );
    for _ in 0..3 {
        black_box(ours_scan(&warm, &registry.home, Scope::Live));
        black_box(ours_scan(&Discovery::os(), &registry.home, Scope::Live));
        black_box(naive_scan(&registry.sessions));
        black_box(ours_scan(&warm, &registry.home, Scope::All));
    }
    let mut live_times = Vec::with_capacity(case.iterations);
    let mut cold_times = Vec::with_capacity(case.iterations);
    let mut all_times = Vec::with_capacity(case.iterations);
    let mut naive_times = Vec::with_capacity(case.iterations);
    for _ in 0..case.iterations {
        live_times.push(timed(|| ours_scan(&warm, &registry.home, Scope::Live)).0);
        // The fresh table is built inside the timing: its setup is part of a cold scan.
        cold_times.push(timed(|| ours_scan(&Discovery::os(), &registry.home, Scope::Live)).0);
        naive_times.push(timed(|| naive_scan(&registry.sessions)).0);
        all_times.push(timed(|| ours_scan(&warm, &registry.home, Scope::All)).0);
    }
    drop(warm);
    let (live_med, live_min) = median_min(&mut live_times);
    let (cold_med, cold_min) = median_min(&mut cold_times);
    let (all_med, all_min) = median_min(&mut all_times);
    let (naive_med, naive_min) = median_min(&mut naive_times);
    let speedup = naive_med.as_secs_f64() / live_med.as_secs_f64();
    let (target, met) = match case.target {
        Target::None => (String::from("(information)"), "-"),
        Target::AtLeastFaster(x) => {
            let cold = naive_med.as_secs_f64() / cold_med.as_secs_f64();
            (
                format!(">= {x:.1}x (cold {cold:.2}x)"),
                yes_no(speedup >= x),
            )
        }
        Target::AtMostSlower(x) => {
            let ratio = live_med.as_secs_f64() / naive_med.as_secs_f64();
            let cold = cold_med.as_secs_f64() / naive_med.as_secs_f64();
            (
                format!("<= {x:.1}x naive: {ratio:.2}x (cold {cold:.2}x)"),
                yes_no(ratio <= x),
            )
        }
    };
    drop(registry);
    drop(children);
    format!(
        "{:<24} {:>19} {:>19} {:>19} {:>19} {:>9.2}x  {:<30} {met}",
        case.label,
        pair(live_med, live_min),
        pair(cold_med, cold_min),
        pair(all_med, all_min),
        pair(naive_med, naive_min),
        speedup,
        target,
    )
}

const fn yes_no(met: bool) -> &'static str {
    if met { "yes" } else { "NO" }
}

fn median_min(times: &mut [Duration]) -> (Duration, Duration) {
    times.sort_unstable();
    (times[times.len() / 2], times[0])
}

fn pair(median: Duration, min: Duration) -> String {
    format!("{} ({})", human(median), human(min))
}

fn human(d: Duration) -> String {
    let micros = d.as_secs_f64() * 1e6;
    if micros >= 1000.0 {
        format!("{:.2}ms", micros / 1000.0)
    } else {
        format!("{micros:.0}us")
    }
}

// ---- peak memory ----

/// One registry layout for the peak-memory comparison.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Every live child has its normal record.
    Plain,
    /// One live child's record is a 1 GiB sparse file: the live scan opens it.
    HugeLive,
    /// A 1 GiB sparse file named after a dead pid: only a full scan opens it.
    HugeDead,
    /// One live child's record is a file just over the record limit: what any
    /// too-large file costs, whatever its size.
    OverCapLive,
}

/// Builds the three layouts, measures each scope in a fresh process of this very
/// binary (so no heap left over by an earlier measurement hides a peak) and prints
/// the figures side by side.
fn peak_memory(machine: &Machine) {
    const DEAD: usize = 100;
    const LIVE: usize = 5;
    const HUGE: u64 = 1 << 30;
    const OVER_CAP: u64 = 300 * 1024;
    println!(
        "peak memory: each scan in a fresh process (median of 5); VmHWM reset by writing 5 to /proc/self/clear_refs just before it"
    );
    println!(
        "registries: {DEAD} dead + {LIVE} live records; 'huge' = a {} GiB sparse file (set_len)",
        HUGE >> 30
    );
    let children = Children::spawn(LIVE).unwrap();
    let live_pid = children.pids()[0];
    let layouts = [
        (Layout::Plain, "without a huge file".to_owned()),
        (
            Layout::HugeLive,
            format!("huge file as {live_pid}.json (live pid)"),
        ),
        (
            Layout::HugeDead,
            format!("huge file as {}.json (dead pid)", machine.dead_pid(DEAD)),
        ),
        (
            Layout::OverCapLive,
            format!("{OVER_CAP} B file as {live_pid}.json (live pid)"),
        ),
    ];
    println!(
        "{:<40} {:>6} {:>11} {:>13} {:>13} {:>12}",
        "registry", "scope", "entries", "peak RSS", "peak - RSS0", "bytes read"
    );
    let mut plain_read = [0_u64; 2];
    for (layout, label) in &layouts {
        let registry = Registry::generate(machine, DEAD, &children).unwrap();
        match layout {
            Layout::Plain => {}
            Layout::HugeLive => {
                sparse(&registry.sessions.join(format!("{live_pid}.json")), HUGE);
            }
            Layout::HugeDead => {
                let pid = machine.dead_pid(DEAD);
                sparse(&registry.sessions.join(format!("{pid}.json")), HUGE);
            }
            Layout::OverCapLive => {
                sparse(
                    &registry.sessions.join(format!("{live_pid}.json")),
                    OVER_CAP,
                );
            }
        }
        for (i, scope) in ["live", "all"].into_iter().enumerate() {
            let Some(m) = measure_in_child(&registry.home, scope) else {
                println!(
                    "{label:<40} {scope:>6} resetting the peak RSS is not permitted here (clear_refs): no figure"
                );
                continue;
            };
            if *layout == Layout::Plain {
                plain_read[i] = m.read;
            }
            let extra = m.read.saturating_sub(plain_read[i]);
            println!(
                "{label:<40} {scope:>6} {:>11} {:>10} kB {:>10} kB {:>12}",
                m.entries,
                m.hwm_kb,
                m.hwm_kb.saturating_sub(m.rss0_kb),
                if *layout == Layout::Plain {
                    m.read.to_string()
                } else {
                    format!("+{extra}")
                },
            );
            let opened = matches!(layout, Layout::HugeLive | Layout::OverCapLive)
                || (*layout == Layout::HugeDead && i == 1);
            assert!(
                extra <= (MAX_RECORD_BYTES + 1) as u64,
                "{label}, {scope}: read {extra} bytes more than the plain registry"
            );
            if !opened {
                assert!(
                    extra < 4096,
                    "{label}, {scope}: a file this scan must not read cost {extra} bytes"
                );
            }
        }
    }
    println!(
        "(bytes read = rchar of /proc/self/io during the scan, /proc reads included; '+n' = more than without a huge file.\n \
         A file whose fstat size is over {MAX_RECORD_BYTES} bytes is rejected unread: no buffer, no read)"
    );
}

fn sparse(path: &Path, len: u64) {
    let _ = fs::remove_file(path);
    let file = fs::File::create(path).unwrap();
    file.set_len(len).unwrap();
}

struct Peak {
    entries: usize,
    rss0_kb: u64,
    hwm_kb: u64,
    read: u64,
}

/// The run with the median peak growth of `RUNS` fresh processes.
fn measure_in_child(home: &ClaudeHome, scope: &str) -> Option<Peak> {
    const RUNS: usize = 5;
    let mut runs = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        runs.push(measure_once(home, scope)?);
    }
    runs.sort_by_key(|p| p.hwm_kb.saturating_sub(p.rss0_kb));
    Some(runs.swap_remove(RUNS / 2))
}

fn measure_once(home: &ClaudeHome, scope: &str) -> Option<Peak> {
    let out = Command::new(std::env::current_exe().unwrap())
        .arg(PEAK_CHILD)
        .arg(home.root())
        .arg(scope)
        .stderr(Stdio::inherit())
        .output()
        .expect("run the peak-memory child");
    assert!(out.status.success(), "the peak-memory child failed");
    let text = String::from_utf8(out.stdout).unwrap();
    if text.trim() == "reset-denied" {
        return None;
    }
    let fields: Vec<u64> = text
        .split_ascii_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    let &[entries, rss0_kb, hwm_kb, read] = fields.as_slice() else {
        panic!("unexpected child output {text:?}");
    };
    Some(Peak {
        entries: usize::try_from(entries).unwrap(),
        rss0_kb,
        hwm_kb,
        read,
    })
}

/// In the child: reset the peak RSS, scan once, print `entries rss0 hwm rchar`.
fn peak_child(args: &[String]) {
    let [root, scope, ..] = args else {
        panic!("usage: {PEAK_CHILD} <claude home> <live|all>");
    };
    let home = ClaudeHome::new(root);
    let scope = if scope == "all" {
        Scope::All
    } else {
        Scope::Live
    };
    let discovery = Discovery::os();
    if fs::write("/proc/self/clear_refs", "5").is_err() {
        println!("reset-denied");
        return;
    }
    let rss0 = status_kb("VmRSS:");
    let read0 = rchar();
    let scan = discovery.scan(&home, scope).expect("scan the registry");
    let read = rchar() - read0;
    let hwm = status_kb("VmHWM:");
    println!("{} {rss0} {hwm} {read}", black_box(scan).entries.len());
}

fn status_kb(key: &str) -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(key))
        .unwrap_or_else(|| panic!("no {key} in /proc/self/status"));
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap()
}

/// Bytes this process has read so far. Reading `/proc/self/io` itself is counted in
/// the next figure, equally for every measurement.
fn rchar() -> u64 {
    let io = fs::read_to_string("/proc/self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}
