//! Which directory entries are records, which are rejected records, which are ignored.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

use claude_peer_registry::{EntryName, Pid, classify_entry_name};

fn verdict(name: &str) -> String {
    match classify_entry_name(name.as_ref()) {
        EntryName::Record(pid) => format!("record {pid}"),
        EntryName::Rejected(rejection) => format!("rejected {}", rejection.as_str()),
        EntryName::NotARecord => "not a record".to_owned(),
    }
}

#[test]
fn only_canonical_pid_names_are_records_and_other_json_names_are_named_rejections() {
    let table = [
        ("2.json", "record 2"),
        ("9959.json", "record 9959"),
        ("2147483647.json", "record 2147483647"),
        ("007.json", "rejected name_leading_zero"),
        ("00.json", "rejected name_leading_zero"),
        ("-1.json", "rejected name_not_decimal"),
        ("+5.json", "rejected name_not_decimal"),
        ("abc.json", "rejected name_not_decimal"),
        (".json", "rejected name_not_decimal"),
        ("12 .json", "rejected name_not_decimal"),
        ("１２.json", "rejected name_not_decimal"),
        ("0x1f.json", "rejected name_not_decimal"),
        ("0.json", "rejected name_pid_out_of_range"),
        ("1.json", "rejected name_pid_out_of_range"),
        ("2147483648.json", "rejected name_pid_out_of_range"),
        ("4294967295.json", "rejected name_pid_out_of_range"),
        ("4294967296.json", "rejected name_pid_out_of_range"),
        (
            "99999999999999999999999.json",
            "rejected name_pid_out_of_range",
        ),
        ("12.json.tmp", "not a record"),
        ("12.JSON", "not a record"),
        (
            "9959.3f2a9c0e1b7d4a6f8e5c2b1a0d9f8e7c6b5a4d3c2b1a0f9e8d7c6b5a4d3c2b1a.key",
            "not a record",
        ),
        (".fleetview-heartbeat", "not a record"),
        ("12", "not a record"),
        ("", "not a record"),
    ];
    for (name, expected) in table {
        assert_eq!(verdict(name), expected, "file name {name:?}");
    }
}

#[test]
fn a_json_name_that_is_not_utf8_is_a_rejection_not_a_crash() {
    let name = OsStr::from_bytes(b"\xff\xfe.json");
    assert!(matches!(classify_entry_name(name), EntryName::Rejected(_)));
}

#[test]
fn pids_outside_two_to_i32_max_cannot_be_built() {
    assert_eq!(Pid::new(0), None);
    assert_eq!(Pid::new(1), None);
    assert_eq!(Pid::new(2_147_483_648), None);
    assert_eq!(Pid::new(u32::MAX), None);
    assert_eq!(Pid::new(2).map(Pid::as_i32), Some(2));
    assert_eq!(Pid::new(2_147_483_647).map(Pid::as_i32), Some(i32::MAX));
}
