//! An update of a 4 KiB and of a 1 MiB settings file versus a bare write + fsync + rename +
//! directory fsync of the same new bytes, side by side (`cargo bench -p claude-peer-settings`).
//!
//! The two are interleaved, one of each per round, so that drift of the disk hits both alike.
//! Targets: an update of the 4 KiB file costs at most 1.3 times the bare write, of the 1 MiB
//! file (many times Claude Code's own settings) under 2.5 times.

// Benchmark code: a failure is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use claude_peer_settings::{InboundPolicy, SettingsStore};

/// A pretty-printed settings file of about `size` bytes: a long permission allow-list.
fn settings_of_size(size: usize) -> String {
    let mut doc = String::from(
        "{\n  \"$schema\": \"https://json.schemastore.org/claude-code-settings.json\",\n  \"theme\": \"dark\",\n  \"permissions\": {\n    \"allow\": [\n",
    );
    let tail = "      \"Read(//work/**)\"\n    ]\n  },\n  \"cleanupPeriodDays\": 30\n}\n";
    let mut i = 0;
    // Room is left for the member an update inserts (about 35 bytes).
    while doc.len() + 34 + tail.len() + 35 <= size {
        writeln!(doc, "      \"Bash(tool-{i:06} --flag:*)\",").unwrap();
        i += 1;
    }
    doc.push_str(tail);
    doc
}

fn bare_write(dir: &Path, path: &Path, bytes: &[u8]) {
    let temp = dir.join(".bare.tmp");
    let mut file = File::create(&temp).unwrap();
    file.write_all(bytes).unwrap();
    file.sync_all().unwrap();
    std::fs::rename(&temp, path).unwrap();
    File::open(dir).unwrap().sync_all().unwrap();
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn bench(label: &str, size: usize, rounds: usize, target: f64) {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let ours_dir = root.path().join("ours");
    let bare_dir = root.path().join("bare");
    std::fs::create_dir_all(&ours_dir).unwrap();
    std::fs::create_dir_all(&bare_dir).unwrap();
    let ours = ours_dir.join("settings.json");
    let bare = bare_dir.join("settings.json");
    std::fs::write(&ours, settings_of_size(size)).unwrap();
    let store = SettingsStore::new(&ours);

    // The two documents an update alternates between, so the bare write writes the same bytes.
    let policies = [InboundPolicy::Hold, InboundPolicy::Refuse];
    let mut docs = Vec::new();
    for policy in policies {
        store.set_inbound(policy, None).unwrap();
        docs.push(std::fs::read(&ours).unwrap());
    }
    std::fs::write(&bare, &docs[1]).unwrap();

    let (mut t_ours, mut t_bare) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let start = Instant::now();
        store.set_inbound(policies[round % 2], None).unwrap();
        t_ours.push(start.elapsed());

        let start = Instant::now();
        bare_write(&bare_dir, &bare, &docs[round % 2]);
        t_bare.push(start.elapsed());
    }
    assert_eq!(std::fs::read(&ours).unwrap(), std::fs::read(&bare).unwrap());
    let (m_ours, m_bare) = (median(t_ours.clone()), median(t_bare.clone()));
    // Each round's update and bare write ran back to back, so their ratio cancels the disk's
    // drift between rounds: the median of those paired ratios is the figure that holds.
    let mut paired: Vec<f64> = t_ours
        .iter()
        .zip(&t_bare)
        .map(|(o, b)| o.as_secs_f64() / b.as_secs_f64())
        .collect();
    paired.sort_by(f64::total_cmp);
    println!(
        "{label:>5} ({:>7} bytes, {rounds} rounds): update median {:>9.3?} | bare write median {:>9.3?} | ratio of medians {:.2}x | median paired ratio {:.2}x (target <= {target:.2}x)",
        docs[0].len(),
        m_ours,
        m_bare,
        m_ours.as_secs_f64() / m_bare.as_secs_f64(),
        paired[paired.len() / 2],
    );
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep that run short.
    let quick = !std::env::args().any(|a| a == "--bench");
    let scale = if quick { 10 } else { 1 };
    bench("4 KiB", 4 * 1024, 400 / scale, 1.3);
    bench("1 MiB", 1024 * 1024, 300 / scale, 2.5);
}
