//! proptest strategies for registry records, JSON values and process facts.

use std::time::{Duration, SystemTime};

use claude_peer_registry::{
    FormerName, Kind, NameSource, Pid, ProcessFacts, ProcessState, Record, Signal, VendorStatus,
};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value};

/// Any JSON value, nested a few levels, with unicode strings and awkward numbers.
pub fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            vec(inner.clone(), 0..4).prop_map(Value::Array),
            btree_map(".{0,6}", inner, 0..4).prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A pid in the range records may name.
pub fn pid() -> impl Strategy<Value = Pid> {
    (Pid::MIN..=Pid::MAX).prop_filter_map("in range", Pid::new)
}

/// A spelling none of the known values of an open enum uses.
fn unknown_spelling(known: &'static [&'static str]) -> impl Strategy<Value = String> {
    "[a-z][a-z-]{0,10}".prop_filter("not a known spelling", move |s| {
        !known.contains(&s.as_str())
    })
}

/// An open enum's value: one of its `known` spellings, or a spelling it does not know,
/// read the way a record is read (`from_wire`).
fn open_enum<T: std::fmt::Debug + Clone>(
    known: &'static [&'static str],
    from_wire: fn(&str) -> T,
) -> impl Strategy<Value = T> {
    prop_oneof![
        proptest::sample::select(known).prop_map(from_wire),
        unknown_spelling(known).prop_map(move |s| from_wire(&s)),
    ]
}

fn vendor_status() -> impl Strategy<Value = VendorStatus> {
    open_enum(
        &["busy", "shell", "idle", "waiting"],
        VendorStatus::from_wire,
    )
}

fn kind() -> impl Strategy<Value = Kind> {
    open_enum(
        &["interactive", "bg", "daemon", "daemon-worker"],
        Kind::from_wire,
    )
}

fn name_source() -> impl Strategy<Value = NameSource> {
    open_enum(
        &["derived", "user", "auto", "collision", "peer", "hook"],
        NameSource::from_wire,
    )
}

fn text() -> impl Strategy<Value = Option<String>> {
    option::of(".{0,16}")
}

fn epoch_ms() -> impl Strategy<Value = Option<u64>> {
    option::of(0..=9_007_199_254_740_991_u64)
}

fn informational() -> impl Strategy<Value = Option<Value>> {
    option::of(json_value().prop_filter("non-null", |v| !v.is_null()))
}

/// Fields no version of Claude Code writes: camelCase names never hold `_`.
fn extra_fields() -> impl Strategy<Value = Map<String, Value>> {
    btree_map("x_[a-z0-9]{1,8}", json_value(), 0..3).prop_map(|m| m.into_iter().collect())
}

fn former_name() -> impl Strategy<Value = FormerName> {
    (".{0,12}", epoch_ms(), text()).prop_map(|(name, until, session_id)| FormerName {
        name,
        until,
        session_id,
    })
}

/// A record's identity fields, in [`assemble`]'s order.
type Identity = (
    String,
    Option<String>,
    Option<u64>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u64>,
);
/// A record's peer-messaging fields, in [`assemble`]'s order.
type Peer = (
    Option<Vec<String>>,
    Option<Kind>,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<NameSource>,
    Option<u64>,
    Option<Vec<FormerName>>,
);
/// A record's activity fields, in [`assemble`]'s order.
type Activity = (
    Option<VendorStatus>,
    Option<String>,
    Option<u64>,
    Option<u64>,
    Option<String>,
    (
        Option<String>,
        Option<String>,
        Option<String>,
        Option<String>,
    ),
    bool,
);
/// A record's informational fields and unknown members, in [`assemble`]'s order.
type Info = (
    (Option<Value>, Option<Value>, Option<Value>),
    (Option<Value>, Option<Value>, Option<Value>, Option<Value>),
    Map<String, Value>,
);

fn identity() -> impl Strategy<Value = Identity> {
    (
        ".{1,40}",
        text(),
        epoch_ms(),
        option::of("[0-9]{1,12}"),
        option::of("[0-9]{1,20}"),
        text(),
        text(),
        option::of(any::<u64>()),
    )
}

fn peer() -> impl Strategy<Value = Peer> {
    (
        option::of(vec(".{0,12}", 0..4)),
        option::of(kind()),
        text(),
        text(),
        text(),
        option::of(name_source()),
        epoch_ms(),
        option::of(vec(former_name(), 0..4)),
    )
}

fn activity() -> impl Strategy<Value = Activity> {
    (
        option::of(vendor_status()),
        text(),
        epoch_ms(),
        epoch_ms(),
        text(),
        (text(), text(), text(), text()),
        any::<bool>(),
    )
}

fn info() -> impl Strategy<Value = Info> {
    (
        (informational(), informational(), informational()),
        (
            informational(),
            informational(),
            informational(),
            informational(),
        ),
        extra_fields(),
    )
}

/// A valid record for `pid`: every optional field present or absent at random.
pub fn record_for(pid: Pid) -> impl Strategy<Value = Record> {
    (identity(), peer(), activity(), info()).prop_map(move |(identity, peer, activity, info)| {
        assemble(pid, identity, peer, activity, info)
    })
}

/// The record of `pid` with these fields, one line per field.
fn assemble(pid: Pid, identity: Identity, peer: Peer, activity: Activity, info: Info) -> Record {
    let (
        session_id,
        cwd,
        started_at,
        proc_start,
        proc_start_ft,
        pid_domain,
        version,
        peer_protocol,
    ) = identity;
    let (
        peer_features,
        kind,
        entrypoint,
        messaging_socket_path,
        name,
        name_source,
        name_since,
        former_names,
    ) = peer;
    let (
        status,
        waiting_for,
        updated_at,
        status_updated_at,
        tmux,
        (state, detail, tempo, needs),
        spare,
    ) = activity;
    let (
        (parked_job_id, job_id, bridge_session_id),
        (host_session_id, log_path, agent, asks),
        extra,
    ) = info;
    Record {
        pid,
        session_id,
        cwd,
        started_at,
        proc_start,
        proc_start_ft,
        pid_domain,
        version,
        peer_protocol,
        peer_features,
        kind,
        entrypoint,
        messaging_socket_path,
        name,
        name_source,
        name_since,
        former_names,
        status,
        waiting_for,
        updated_at,
        status_updated_at,
        tmux,
        state,
        detail,
        tempo,
        needs,
        spare,
        parked_job_id,
        job_id,
        bridge_session_id,
        host_session_id,
        log_path,
        agent,
        asks_for_converted_skills: asks,
        extra,
    }
}

/// A valid record for an arbitrary pid.
pub fn record() -> impl Strategy<Value = Record> {
    pid().prop_flat_map(record_for)
}

/// The start tokens facts and records draw from: few, so that matches happen often.
pub fn start_token() -> impl Strategy<Value = Option<String>> {
    option::of(prop_oneof![Just("100".to_owned()), Just("200".to_owned())])
}

/// Any combination of process facts, with start times around an epoch of 1,000,000 s.
pub fn process_facts() -> impl Strategy<Value = ProcessFacts> {
    let signal = prop_oneof![
        Just(Signal::Alive),
        Just(Signal::NoSuchProcess),
        Just(Signal::NotPermitted)
    ];
    let state = option::of(prop_oneof![
        Just(ProcessState::Running),
        Just(ProcessState::Zombie),
        Just(ProcessState::Dead)
    ]);
    (
        signal,
        state,
        option::of(any::<bool>()),
        start_token(),
        option::of(time()),
    )
        .prop_map(
            |(signal, state, thread_group_leader, start_token, started_at)| ProcessFacts {
                signal,
                state,
                thread_group_leader,
                start_token,
                started_at,
            },
        )
}

/// A wall-clock time within ten seconds of an arbitrary fixed instant.
pub fn time() -> impl Strategy<Value = SystemTime> {
    (0..20_000_u64).prop_map(|ms| {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000) + Duration::from_millis(ms)
    })
}
