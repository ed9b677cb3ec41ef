//! Properties over generated input: nothing panics, nothing valid is dropped, records round-trip.

use claude_peer_registry::{Pid, Record, classify_entry_name};
use claude_peer_testkit::strategy;
use proptest::prelude::*;
use serde_json::{Value, json};

/// Every optional field Claude Code documents, by its wire name.
const OPTIONAL_FIELDS: &[&str] = &[
    "pid",
    "cwd",
    "startedAt",
    "procStart",
    "procStartFt",
    "pidDomain",
    "version",
    "peerProtocol",
    "peerFeatures",
    "kind",
    "entrypoint",
    "messagingSocketPath",
    "name",
    "nameSource",
    "nameSince",
    "formerNames",
    "status",
    "waitingFor",
    "updatedAt",
    "statusUpdatedAt",
    "tmux",
    "state",
    "detail",
    "tempo",
    "needs",
    "spare",
    "parkedJobId",
    "jobId",
    "bridgeSessionId",
    "hostSessionId",
    "logPath",
    "agent",
    "asksForConvertedSkills",
];

/// The object `text` with `"cwd":0` given twice first. A name given twice is always
/// resolved through a parsed `Value`, where the later one wins (`cwd` of `text`, else
/// `0`, which as a wrong type leaves `cwd` unset), so it must read as `text` does.
fn with_a_duplicate_first(text: &str) -> String {
    let rest = text.strip_prefix('{').expect("an object");
    let comma = if rest.trim_start().starts_with('}') {
        ""
    } else {
        ","
    };
    format!(r#"{{"cwd":0,"cwd":0{comma}{rest}"#)
}

/// A record read straight from `text` equals the one read through a `Value`; a
/// rejection is the same rejection.
fn reads_the_same_both_ways(pid: Pid, text: &str) -> Result<(), TestCaseError> {
    let direct = Record::parse(pid, text.as_bytes());
    let through_value = Record::parse(pid, with_a_duplicate_first(text).as_bytes());
    match (&direct, &through_value) {
        (Ok(direct), Ok(through_value)) => prop_assert_eq!(direct, through_value),
        (Err(direct), Err(through_value)) => prop_assert_eq!(
            std::mem::discriminant(direct),
            std::mem::discriminant(through_value),
            "{} / {}",
            direct,
            through_value
        ),
        _ => prop_assert!(false, "{text}: {direct:?} but {through_value:?}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn a_record_reads_the_same_straight_from_its_bytes_and_through_a_value(
        record in strategy::record(),
        field in proptest::sample::select(OPTIONAL_FIELDS),
        value in strategy::json_value(),
        change in any::<bool>(),
        body_pid in prop_oneof![
            Just(None),
            Just(Some(Value::Null)),
            any::<u32>().prop_map(|pid| Some(pid.into())),
            any::<u32>().prop_map(|pid| Some(f64::from(pid).into())),
        ],
    ) {
        let mut body: Value = serde_json::from_str(&record.to_json()).unwrap();
        if change {
            body[field] = value;
        }
        match body_pid {
            // The file's pid in the body, as Claude Code writes it.
            None => {}
            Some(Value::Null) => {
                body.as_object_mut().unwrap().remove("pid");
            }
            Some(pid) => body["pid"] = pid,
        }
        reads_the_same_both_ways(record.pid, &body.to_string())?;
    }

    #[test]
    fn any_object_reads_the_same_straight_from_its_bytes_and_through_a_value(
        value in strategy::json_value(),
        session_id in proptest::option::of(prop_oneof![
            Just(json!("")),
            Just(json!("75c834bc-f549-4085-a152-f9973dc50b30")),
            strategy::json_value(),
        ]),
        raw_pid in 2_u32..100_000,
    ) {
        let mut body = match value {
            Value::Object(fields) => Value::Object(fields),
            other => json!({ "agent": other }),
        };
        if let Some(id) = session_id {
            body["sessionId"] = id;
        }
        // The file's pid, as Claude Code writes it: without one nothing is read straight.
        body["pid"] = raw_pid.into();
        reads_the_same_both_ways(Pid::new(raw_pid).unwrap(), &body.to_string())?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2048), raw_pid in 2_u32..100_000) {
        let pid = Pid::new(raw_pid).unwrap();
        let _ = Record::parse(pid, &bytes);
    }

    #[test]
    fn arbitrary_json_shaped_text_never_panics(value in strategy::json_value(), cut in 0_usize..256) {
        let text = value.to_string();
        let cut = cut.min(text.len());
        let _ = Record::parse(Pid::new(2).unwrap(), &text.as_bytes()[..cut]);
        let _ = Record::parse(Pid::new(2).unwrap(), text.as_bytes());
    }

    #[test]
    fn arbitrary_file_names_never_panic(name in ".{0,24}") {
        let _ = classify_entry_name(name.as_ref());
    }

    #[test]
    fn any_json_value_in_any_optional_field_keeps_a_record_with_a_valid_session_id(
        field in proptest::sample::select(OPTIONAL_FIELDS),
        value in strategy::json_value(),
    ) {
        // `pid` is the one optional field with a rule: a different number is a mismatch.
        prop_assume!(field != "pid" || !value.is_number());
        let body = json!({ "sessionId": "75c834bc-f549-4085-a152-f9973dc50b30", field: value });
        let record = Record::parse(Pid::new(3839).unwrap(), body.to_string().as_bytes());
        prop_assert!(record.is_ok(), "{field} = {value} dropped the record: {:?}", record.err());
    }

    #[test]
    fn generated_valid_records_round_trip(record in strategy::record()) {
        let json = record.to_json();
        let again = Record::parse(record.pid, json.as_bytes());
        prop_assert_eq!(again.as_ref(), Ok(&record), "json: {}", json);
    }

    #[test]
    fn unknown_fields_survive_a_round_trip(key in "[a-z]{1,8}Future", value in strategy::json_value()) {
        let body = json!({ "sessionId": "s", key.clone(): value.clone() });
        let record = Record::parse(Pid::new(2).unwrap(), body.to_string().as_bytes()).unwrap();
        let back: Value = serde_json::from_str(&record.to_json()).unwrap();
        prop_assert_eq!(&back[&key], &value);
    }
}
