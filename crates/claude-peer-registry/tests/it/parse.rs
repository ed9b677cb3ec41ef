//! Field edges: what drops a record, what drops only a field, what is kept.

use claude_peer_registry::{
    Activity, Kind, MAX_RECORD_BYTES, NameSource, Pid, Record, Rejection, VendorStatus,
};

fn pid() -> Pid {
    Pid::new(4242).unwrap()
}

fn parse(json: &str) -> Result<Record, Rejection> {
    Record::parse(pid(), json.as_bytes())
}

fn rejection(json: &str) -> String {
    match parse(json) {
        Ok(record) => panic!("{json} must be rejected, parsed {record:?}"),
        Err(rejection) => rejection.as_str().to_owned(),
    }
}

#[test]
fn session_id_must_be_a_non_empty_string() {
    let table = [
        (r#"{}"#, "missing_session_id"),
        (r#"{"sessionId":null}"#, "missing_session_id"),
        (r#"{"sessionId":""}"#, "invalid_session_id"),
        (r#"{"sessionId":42}"#, "invalid_session_id"),
        (r#"{"sessionId":["a"]}"#, "invalid_session_id"),
        (r#"{"sessionId":{"id":"a"}}"#, "invalid_session_id"),
        (r#"{"sessionId":true}"#, "invalid_session_id"),
    ];
    for (json, expected) in table {
        assert_eq!(rejection(json), expected, "{json}");
    }
}

#[test]
fn bytes_that_are_not_a_json_object_are_named_rejections() {
    let table: [(&[u8], &str); 8] = [
        (b"", "empty"),
        (b"  \n", "empty"),
        (br#"{"pid":4242,"sessionId":"abc","cw"#, "malformed_json"),
        (b"\xff\xfe", "malformed_json"),
        (b"[1,2]", "not_an_object"),
        (b"\"s\"", "not_an_object"),
        (b"null", "not_an_object"),
        (br#"{"sessionId":"a"} {"#, "malformed_json"),
    ];
    for (bytes, expected) in table {
        let got = Record::parse(pid(), bytes).map(|_| ()).unwrap_err();
        assert_eq!(
            got.as_str(),
            expected,
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

#[test]
fn torn_writes_are_worth_a_second_read_and_other_rejections_are_final() {
    assert!(Record::parse(pid(), b"").unwrap_err().is_torn());
    assert!(
        Record::parse(pid(), br#"{"sessionId":"a","cwd":"/t"#)
            .unwrap_err()
            .is_torn()
    );
    assert!(!Record::parse(pid(), b"{}").unwrap_err().is_torn());
    assert!(!Record::parse(pid(), b"[]").unwrap_err().is_torn());
}

#[test]
fn a_body_pid_that_differs_from_the_file_name_is_a_mismatch() {
    assert_eq!(rejection(r#"{"pid":4243,"sessionId":"a"}"#), "pid_mismatch");
    assert_eq!(
        rejection(r#"{"pid":-4242,"sessionId":"a"}"#),
        "pid_mismatch"
    );
    assert_eq!(
        rejection(r#"{"pid":4242.5,"sessionId":"a"}"#),
        "pid_mismatch"
    );
    let err = parse(r#"{"pid":4243,"sessionId":"a"}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the file is named for pid 4242 but its body says pid 4243"
    );
}

#[test]
fn a_matching_or_wrong_typed_body_pid_keeps_the_record_and_the_name_wins() {
    for json in [
        r#"{"pid":4242,"sessionId":"a"}"#,
        r#"{"pid":4242.0,"sessionId":"a"}"#,
        r#"{"pid":"4243","sessionId":"a"}"#,
        r#"{"pid":null,"sessionId":"a"}"#,
        r#"{"sessionId":"a"}"#,
    ] {
        assert_eq!(parse(json).unwrap().pid, pid(), "{json}");
    }
}

#[test]
fn a_wrong_type_in_an_optional_field_drops_only_that_field() {
    let record = parse(
        r#"{"sessionId":"a","cwd":7,"startedAt":"yesterday","procStart":15417,"pidDomain":[],
            "version":2.1,"peerProtocol":"1","peerFeatures":"notify_idle","kind":3,"name":{"n":1},
            "nameSource":false,"formerNames":{},"status":1,"waitingFor":[],"updatedAt":-5,
            "statusUpdatedAt":1.5,"tmux":0,"spare":"yes","messagingSocketPath":null,
            "name":"kept-later-duplicate"}"#,
    )
    .unwrap();
    assert_eq!(record.session_id, "a");
    assert_eq!(record.cwd, None);
    assert_eq!(record.started_at, None);
    assert_eq!(
        record.proc_start, None,
        "procStart is a string; a number is dropped"
    );
    assert_eq!(record.pid_domain, None);
    assert_eq!(record.version, None);
    assert_eq!(record.peer_protocol, None);
    assert_eq!(record.peer_features, None);
    assert_eq!(record.kind, None);
    assert_eq!(record.name_source, None);
    assert_eq!(record.former_names, None);
    assert_eq!(record.status, None);
    assert_eq!(record.waiting_for, None);
    assert_eq!(record.updated_at, None);
    assert_eq!(record.status_updated_at, None);
    assert_eq!(record.tmux, None);
    assert!(!record.spare);
    assert_eq!(record.messaging_socket_path, None);
    assert_eq!(
        record.name.as_deref(),
        Some("kept-later-duplicate"),
        "the last duplicate wins, as in JSON.parse"
    );
}

#[test]
fn malformed_list_elements_are_dropped_and_the_rest_kept() {
    let record = parse(
        r#"{"sessionId":"a","peerFeatures":["notify_idle",3,null,"artifact_yield"],
            "formerNames":[{"name":"old","until":5},{"until":6},"x",{"name":"older","sessionId":"s0"}]}"#,
    )
    .unwrap();
    assert_eq!(
        record.peer_features.unwrap(),
        ["notify_idle", "artifact_yield"]
    );
    let former: Vec<_> = record
        .former_names
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(former, ["old", "older"]);
}

#[test]
fn unknown_status_kind_and_name_source_are_kept_verbatim() {
    let record =
        parse(r#"{"sessionId":"a","status":"future-status","kind":"swarm","nameSource":"oracle"}"#)
            .unwrap();
    assert_eq!(
        record.status,
        Some(VendorStatus::Other("future-status".into()))
    );
    assert_eq!(record.activity(), None, "an unknown status is not guessed");
    assert_eq!(record.kind, Some(Kind::Other("swarm".into())));
    assert_eq!(record.name_source, Some(NameSource::Other("oracle".into())));
}

#[test]
fn status_normalizes_and_keeps_the_vendor_spelling() {
    let table = [
        ("busy", Some(Activity::Busy)),
        ("shell", Some(Activity::Busy)),
        ("idle", Some(Activity::Idle)),
        ("waiting", Some(Activity::Waiting)),
        ("Idle", None),
    ];
    for (raw, activity) in table {
        let record = parse(&format!(r#"{{"sessionId":"a","status":"{raw}"}}"#)).unwrap();
        assert_eq!(record.activity(), activity, "{raw}");
        assert_eq!(record.status.unwrap().as_str(), raw);
    }
}

#[test]
fn unknown_fields_are_kept_and_written_back() {
    let record = parse(r#"{"sessionId":"a","futureField":{"x":[1,2]}}"#).unwrap();
    assert_eq!(record.extra["futureField"]["x"][1], 2);
    assert!(record.to_json().contains(r#""futureField":{"x":[1,2]}"#));
}

#[test]
fn spare_counts_only_when_true_and_parked_job_only_when_not_null() {
    assert!(
        parse(r#"{"sessionId":"a","spare":true}"#)
            .unwrap()
            .is_parked_or_spare()
    );
    assert!(
        !parse(r#"{"sessionId":"a","spare":false}"#)
            .unwrap()
            .is_parked_or_spare()
    );
    assert!(
        parse(r#"{"sessionId":"a","parkedJobId":"j1"}"#)
            .unwrap()
            .is_parked_or_spare()
    );
    assert!(
        !parse(r#"{"sessionId":"a","parkedJobId":null}"#)
            .unwrap()
            .is_parked_or_spare()
    );
}

#[test]
fn the_start_token_prefers_the_windows_token_when_present() {
    let both = parse(r#"{"sessionId":"a","procStart":"1","procStartFt":"2"}"#).unwrap();
    assert_eq!(both.start_token(), Some("2"));
    let linux = parse(r#"{"sessionId":"a","procStart":"1"}"#).unwrap();
    assert_eq!(linux.start_token(), Some("1"));
    assert_eq!(parse(r#"{"sessionId":"a"}"#).unwrap().start_token(), None);
}

#[test]
fn the_display_name_falls_back_to_the_cwd_basename() {
    assert_eq!(
        parse(r#"{"sessionId":"a","name":"n","cwd":"/x/y"}"#)
            .unwrap()
            .display_name(),
        Some("n")
    );
    assert_eq!(
        parse(r#"{"sessionId":"a","cwd":"/x/proj/"}"#)
            .unwrap()
            .display_name(),
        Some("proj")
    );
    assert_eq!(
        parse(r#"{"sessionId":"a","cwd":"/"}"#)
            .unwrap()
            .display_name(),
        None
    );
    assert_eq!(parse(r#"{"sessionId":"a"}"#).unwrap().display_name(), None);
}

#[test]
fn records_over_the_size_limit_are_rejected_unparsed() {
    let mut big = br#"{"sessionId":"a","pad":""#.to_vec();
    big.resize(MAX_RECORD_BYTES + 1, b'x');
    assert_eq!(
        Record::parse(pid(), &big).unwrap_err().as_str(),
        "too_large"
    );
    let mut fits = br#"{"sessionId":"a","pad":""#.to_vec();
    fits.resize(MAX_RECORD_BYTES - 2, b'x');
    fits.extend_from_slice(b"\"}");
    assert_eq!(Record::parse(pid(), &fits).unwrap().session_id, "a");
}

#[test]
fn deeply_nested_unknown_fields_are_a_rejection_not_a_stack_overflow() {
    let deep = format!(
        r#"{{"sessionId":"a","x":{}{}}}"#,
        "[".repeat(100_000),
        "]".repeat(100_000)
    );
    assert_eq!(parse(&deep).unwrap_err().as_str(), "malformed_json");
}

#[test]
fn a_number_beyond_f64_is_malformed_json_rather_than_a_panic() {
    // JSON.stringify never writes one (it writes `null` for Infinity); a record holding
    // one was not written by Claude Code.
    let record = parse(r#"{"sessionId":"a","another":1e400}"#);
    assert_eq!(record.unwrap_err().as_str(), "malformed_json");
}
