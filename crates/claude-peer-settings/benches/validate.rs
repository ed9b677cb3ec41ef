//! The quick validity check (`src/quick.rs`) versus the `serde_json` validation it is meant to
//! spare, on the 1 MiB settings document of the update benchmark
//! (`cargo bench -p claude-peer-settings --bench validate`).
//!
//! The two are interleaved, one of each per round, so that drift of the machine hits both
//! alike. Target: the quick check costs at most 0.40 times the `serde_json` path.

// Benchmark code: a failure is a failed run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

// The module is self-contained: including its source reaches it without adding public API.
// Its unit tests come along when this target is built with `cfg(test)` (`cargo test --benches`,
// `clippy --all-targets`), where a target without the test harness does not run them.
#[allow(
    dead_code,
    unused_imports,
    reason = "the module's unit tests, compiled but not run in this target"
)]
#[path = "../src/quick.rs"]
mod quick;

use std::fmt::{self, Write as _};
use std::hint::black_box;
use std::time::{Duration, Instant};

use serde::de::{Deserializer as _, MapAccess, Visitor};
use serde_json::value::RawValue;

/// A pretty-printed settings file of about `size` bytes: a long permission allow-list
/// (the same document as in `benches/update.rs`).
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

/// Collects the top-level members as decoded keys and raw values, as `edit::parse_members` does.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(String, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Vec::new();
        while let Some(member) = map.next_entry::<String, &'de RawValue>()? {
            members.push(member);
        }
        Ok(members)
    }
}

/// The `serde_json` path of `edit::parse_members`: strict UTF-8, then one pass of
/// `deserialize_map` with raw values.
fn serde_members(bytes: &[u8]) -> Option<Vec<(String, &RawValue)>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut de = serde_json::Deserializer::from_str(text);
    let members = (&mut de).deserialize_map(Members).ok()?;
    de.end().ok()?;
    Some(members)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    // `cargo test --benches` runs this with `--bench` absent: keep that run short.
    let short = !std::env::args().any(|a| a == "--bench");
    let rounds = if short { 20 } else { 200 };
    let doc = settings_of_size(1024 * 1024);
    let bytes = doc.as_bytes();

    // Both must see the same members, or the comparison means nothing.
    let fast = quick::members(bytes).expect("the benchmark document is certainly valid");
    let slow = serde_members(bytes).unwrap();
    assert_eq!(fast.len(), slow.len());
    for (q, (key, raw)) in fast.iter().zip(&slow) {
        assert_eq!(&doc[q.key.clone()], key);
        assert_eq!(&doc[q.value.clone()], raw.get());
    }

    let (mut t_quick, mut t_serde, mut t_utf8) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        black_box(quick::members(black_box(bytes)));
        t_quick.push(start.elapsed());

        let start = Instant::now();
        black_box(serde_members(black_box(bytes)));
        t_serde.push(start.elapsed());

        let start = Instant::now();
        black_box(std::str::from_utf8(black_box(bytes)).is_ok());
        t_utf8.push(start.elapsed());
    }
    // Each round's two runs were back to back, so their ratio cancels the machine's drift
    // between rounds.
    let mut paired: Vec<f64> = t_quick
        .iter()
        .zip(&t_serde)
        .map(|(q, s)| q.as_secs_f64() / s.as_secs_f64())
        .collect();
    paired.sort_by(f64::total_cmp);
    let (m_quick, m_serde, m_utf8) = (median(t_quick), median(t_serde), median(t_utf8));
    println!(
        "1 MiB ({} bytes, {rounds} rounds): quick median {:.1} µs | serde_json median {:.1} µs | ratio of medians {:.2}x | median paired ratio {:.2}x (target <= 0.40x) | from_utf8 alone {:.1} µs",
        bytes.len(),
        m_quick.as_secs_f64() * 1e6,
        m_serde.as_secs_f64() * 1e6,
        m_quick.as_secs_f64() / m_serde.as_secs_f64(),
        paired[paired.len() / 2],
        m_utf8.as_secs_f64() * 1e6,
    );
}
