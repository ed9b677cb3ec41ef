//! Pure parsers for the few `/proc` texts the probe reads, kept apart from the IO so
//! arbitrary bytes can be thrown at them. Each returns `None` rather than guess.

/// The fields of `/proc/<pid>/stat` the registry needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StatFields<'a> {
    /// Field 3, the one-letter scheduler state (`R`, `S`, `Z`, `X`, …).
    pub(crate) state: u8,
    /// Field 4, the parent's pid (`0` for a process with none).
    pub(crate) parent: u32,
    /// Field 22, `starttime` in clock ticks since boot, as the kernel wrote it.
    pub(crate) start_text: &'a str,
    /// The same, as a number.
    pub(crate) start_ticks: u64,
    /// Whether it leads its thread group, from field 38, `exit_signal`: the kernel sets
    /// it to -1 for every thread but the leader (`thread_group_leader()` is its
    /// `exit_signal >= 0`). `None` when the line stops before it.
    pub(crate) leader: Option<bool>,
}

/// Parses a `/proc/<pid>/stat` line.
///
/// The process name (field 2) is wrapped in parentheses but may itself hold `)`,
/// spaces or newlines, so the fields are counted from the **last** `)`.
pub(crate) fn parse_stat(line: &[u8]) -> Option<StatFields<'_>> {
    let close = line.iter().rposition(|&b| b == b')')?;
    let rest = line.get(close + 1..)?;
    // Fields after the name: index 0 is field 3 (state), index 19 is field 22.
    let mut fields = rest
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty());
    let state = match fields.next()? {
        [b] => *b,
        _ => return None,
    };
    let parent = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
    let start = fields.nth(17)?;
    if !start.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let start_text = std::str::from_utf8(start).ok()?;
    let start_ticks = start_text.parse().ok()?;
    let leader = fields
        .nth(15)
        .and_then(|f| std::str::from_utf8(f).ok()?.parse::<i64>().ok())
        .map(|exit_signal| exit_signal >= 0);
    Some(StatFields {
        state,
        parent,
        start_text,
        start_ticks,
        leader,
    })
}

/// The `btime` value (boot time, seconds since the epoch) of a `/proc/stat` text.
pub(crate) fn boot_time(stat: &[u8]) -> Option<u64> {
    line_value(stat, b"btime")
}

/// The number after `key` on the first complete line starting with `key`.
fn line_value<T: std::str::FromStr>(text: &[u8], key: &[u8]) -> Option<T> {
    let mut lines = text.split_inclusive(|&b| b == b'\n');
    let line = lines.find(|l| l.starts_with(key))?;
    let value = line.strip_suffix(b"\n")?.get(key.len()..)?.trim_ascii();
    if value.is_empty() || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(value).ok()?.parse().ok()
}

/// Whether the `/proc` mount hides processes from some readers (`hidepid=` anything
/// but `0`/`off`), from a `/proc/self/mountinfo` text; the last mount on `/proc` counts.
/// `None` when no proc file system is mounted there.
pub(crate) fn proc_hides_processes(mountinfo: &[u8]) -> Option<bool> {
    let mut hides = None;
    for line in mountinfo.split(|&b| b == b'\n') {
        // Before " - ": id, parent, major:minor, root, mount point, options, tags;
        // after it: file system type, source, super options.
        let Some(dash) = line.windows(3).position(|w| w == b" - ") else {
            continue;
        };
        let (mount, fs) = (&line[..dash], &line[dash + 3..]);
        let mut fs = fs.split(|&b| b == b' ');
        if mount.split(|&b| b == b' ').nth(4) != Some(b"/proc") || fs.next() != Some(b"proc") {
            continue;
        }
        let options = fs.nth(1).unwrap_or_default();
        hides = Some(options.split(|&b| b == b',').any(|option| {
            option
                .strip_prefix(b"hidepid=")
                .is_some_and(|value| !matches!(value, b"0" | b"off"))
        }));
    }
    hides
}

/// `AT_CLKTCK`: the auxiliary-vector key for the clock tick rate.
const AT_CLKTCK: usize = 17;

/// The clock tick rate (`sysconf(_SC_CLK_TCK)`) from a `/proc/self/auxv` image: pairs
/// of native-endian words, ended by a zero key. `None` if absent or zero.
pub(crate) fn auxv_clock_ticks(auxv: &[u8]) -> Option<u64> {
    const WORD: usize = size_of::<usize>();
    for pair in auxv.chunks_exact(2 * WORD) {
        let (key, value) = pair.split_at(WORD);
        let key = usize::from_ne_bytes(key.try_into().ok()?);
        let value = usize::from_ne_bytes(value.try_into().ok()?);
        match key {
            0 => return None,
            AT_CLKTCK if value > 0 => return u64::try_from(value).ok(),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A real line of a `sleep` process (Linux 6.x), fields 1..=52.
    const SLEEP: &[u8] = b"4242 (sleep) S 4200 4242 4200 34816 4242 4194304 97 0 0 0 0 0 0 0 20 0 1 0 15417 8679424 256 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn a_plain_stat_line_gives_state_field_22_and_leadership() {
        let f = parse_stat(SLEEP).unwrap();
        assert_eq!(f.state, b'S');
        assert_eq!(f.parent, 4200);
        assert_eq!(f.start_text, "15417");
        assert_eq!(f.start_ticks, 15417);
        assert_eq!(f.leader, Some(true), "exit_signal 17 (SIGCHLD)");
    }

    #[test]
    fn a_thread_has_exit_signal_minus_one_and_a_cut_line_says_nothing() {
        let thread = String::from_utf8(SLEEP.to_vec())
            .unwrap()
            .replace(" 17 3 0 0", " -1 3 0 0");
        assert_eq!(parse_stat(thread.as_bytes()).unwrap().leader, Some(false));
        let leader_without_signal = String::from_utf8(SLEEP.to_vec())
            .unwrap()
            .replace(" 17 3 0 0", " 0 3 0 0");
        assert_eq!(
            parse_stat(leader_without_signal.as_bytes()).unwrap().leader,
            Some(true),
            "a process cloned with no exit signal still leads its group"
        );
        let cut = b"4242 (sleep) S 4200 4242 4200 34816 4242 4194304 97 0 0 0 0 0 0 0 20 0 1 0 15417 8679424\n";
        assert_eq!(parse_stat(cut).unwrap().leader, None);
    }

    #[test]
    fn a_name_holding_parens_and_spaces_is_skipped_up_to_the_last_paren() {
        let line = b"77 (evil) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 (x)) Z 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 0 999 0\n";
        let f = parse_stat(line).unwrap();
        assert_eq!(
            f.state, b'Z',
            "the fake fields inside the name must be ignored"
        );
        assert_eq!(f.parent, 1);
        assert_eq!(f.start_text, "999");
    }

    #[test]
    fn a_name_holding_a_newline_still_parses() {
        let line = b"5 (a\nb) R 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 123 0 0\n";
        assert_eq!(parse_stat(line).unwrap().start_text, "123");
    }

    #[test]
    fn a_truncated_or_malformed_stat_line_is_unknown() {
        assert_eq!(parse_stat(b""), None);
        assert_eq!(parse_stat(b"1 (x) S 1 2 3"), None, "field 22 missing");
        assert_eq!(
            parse_stat(b"1 (x) SS 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5"),
            None
        );
        assert_eq!(
            parse_stat(b"1 (x) S 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 -5"),
            None
        );
        assert_eq!(
            parse_stat(b"no paren at all S 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 5"),
            None
        );
    }

    #[test]
    fn btime_is_found_among_the_other_lines() {
        let stat = b"cpu  1 2 3\nintr 5 6\nctxt 99\nbtime 1764460800\nprocesses 7\n";
        assert_eq!(boot_time(stat), Some(1_764_460_800));
        assert_eq!(boot_time(b"cpu 1\n"), None);
    }

    #[test]
    fn clock_ticks_come_from_at_clktck_and_stop_at_the_end_marker() {
        let words = |pairs: &[(usize, usize)]| -> Vec<u8> {
            pairs
                .iter()
                .flat_map(|&(k, v)| [k.to_ne_bytes(), v.to_ne_bytes()])
                .flatten()
                .collect()
        };
        assert_eq!(
            auxv_clock_ticks(&words(&[(6, 4096), (17, 100), (0, 0)])),
            Some(100)
        );
        assert_eq!(
            auxv_clock_ticks(&words(&[(6, 4096), (0, 0), (17, 100)])),
            None
        );
        assert_eq!(auxv_clock_ticks(&words(&[(17, 0)])), None);
        assert_eq!(auxv_clock_ticks(&[1, 2, 3]), None);
    }

    #[test]
    fn hidepid_is_read_from_the_last_proc_mount() {
        let plain =
            b"22 27 0:21 / /proc rw,relatime - proc proc rw\n30 1 8:1 / / rw - ext4 /dev/vda rw\n";
        assert_eq!(proc_hides_processes(plain), Some(false));
        let hidden = b"22 27 0:21 / /proc rw,nosuid - proc proc rw,hidepid=invisible\n";
        assert_eq!(proc_hides_processes(hidden), Some(true));
        let numeric = b"22 27 0:21 / /proc rw - proc proc rw,hidepid=2,gid=5\n";
        assert_eq!(proc_hides_processes(numeric), Some(true));
        let off = b"22 27 0:21 / /proc rw - proc proc rw,hidepid=0\n";
        assert_eq!(proc_hides_processes(off), Some(false));
        let over = [&hidden[..], &plain[..]].concat();
        assert_eq!(
            proc_hides_processes(&over),
            Some(false),
            "the later mount counts"
        );
        let dashes = b"40 22 0:5 /user-1 /proc rw shared:2 master:1 - proc proc-x rw,hidepid=1\n";
        assert_eq!(
            proc_hides_processes(dashes),
            Some(true),
            "dashes elsewhere are not the separator"
        );
        let elsewhere = b"22 27 0:21 / /host/proc rw - proc proc rw\n";
        assert_eq!(proc_hides_processes(elsewhere), None, "no proc on /proc");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_any_parser(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = parse_stat(&bytes);
            let _ = boot_time(&bytes);
            let _ = auxv_clock_ticks(&bytes);
            let _ = proc_hides_processes(&bytes);
        }

        #[test]
        fn any_name_round_trips_the_fields_after_it(
            name in proptest::collection::vec(any::<u8>(), 0..64),
            state in prop::sample::select(b"RSDZXxTtIPW".to_vec()),
            start in any::<u64>(),
        ) {
            let mut line = b"123 (".to_vec();
            line.extend_from_slice(&name);
            line.extend_from_slice(b") ");
            line.push(state);
            for field in 4..=21 {
                line.extend_from_slice(format!(" {field}").as_bytes());
            }
            line.extend_from_slice(format!(" {start} 0 0\n").as_bytes());
            let f = parse_stat(&line).unwrap();
            prop_assert_eq!(f.state, state);
            prop_assert_eq!(f.parent, 4);
            prop_assert_eq!(f.start_ticks, start);
            prop_assert_eq!(f.start_text, start.to_string());
        }
    }
}
