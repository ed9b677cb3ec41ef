use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::{MAX_RECORD_BYTES, Pid, Rejection};

/// One session record, `<home>/sessions/<pid>.json`, as Claude Code writes it.
///
/// Every field but `pid` and `session_id` is optional. A field of the wrong type is
/// dropped on its own; unknown fields are kept in [`Record::extra`], so nothing Claude
/// Code writes makes a record disappear. Serializing a record gives back Claude Code's
/// own JSON shape (camelCase), so `parse(serialize(r)) == r`. The fields below are the
/// one list of wire names: `parse` deserializes them, each optional one leniently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// The pid from the file name; readers trust the name, not the body.
    pub pid: Pid,
    /// The conversation's id; changes on `/clear` and resume.
    pub session_id: String,
    /// Working directory.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub cwd: Option<String>,
    /// Start of the process, epoch milliseconds.
    #[serde(
        default,
        deserialize_with = "epoch_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub started_at: Option<u64>,
    /// Linux start token: field 22 of `/proc/<pid>/stat`, decimal text, compared exactly.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub proc_start: Option<String>,
    /// Windows start token; when present it is used instead of `proc_start`.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub proc_start_ft: Option<String>,
    /// `linux:<machine-id>:<pid namespace>`: where the pid means something.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub pid_domain: Option<String>,
    /// Claude Code version that wrote the record.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub version: Option<String>,
    /// Peer protocol version (1).
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub peer_protocol: Option<u64>,
    /// Peer features, e.g. `notify_idle`.
    #[serde(
        default,
        deserialize_with = "lenient_elements",
        skip_serializing_if = "Option::is_none"
    )]
    pub peer_features: Option<Vec<String>>,
    /// Process kind.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub kind: Option<Kind>,
    /// How the session was started: `cli`, `sdk-ts`, `claude-vscode`, ….
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub entrypoint: Option<String>,
    /// The peer-messaging socket; absent means the session cannot be messaged.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub messaging_socket_path: Option<String>,
    /// The cross-session address.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub name: Option<String>,
    /// Where the name came from; `derived` names are never deduplicated.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub name_source: Option<NameSource>,
    /// When the current name was taken, epoch milliseconds.
    #[serde(
        default,
        deserialize_with = "epoch_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub name_since: Option<u64>,
    /// Rename history, newest last (Claude Code keeps at most 3).
    #[serde(
        default,
        deserialize_with = "lenient_elements",
        skip_serializing_if = "Option::is_none"
    )]
    pub former_names: Option<Vec<FormerName>>,
    /// What the session is doing, as Claude Code spelled it.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub status: Option<VendorStatus>,
    /// With `waiting`: what it waits for, e.g. `permission prompt`.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub waiting_for: Option<String>,
    /// Last update of the record, epoch milliseconds.
    #[serde(
        default,
        deserialize_with = "epoch_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub updated_at: Option<u64>,
    /// Last status change, epoch milliseconds.
    #[serde(
        default,
        deserialize_with = "epoch_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub status_updated_at: Option<u64>,
    /// tmux pane, `<session>:@<window>.%<pane>`.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub tmux: Option<String>,
    /// Extra activity field, only sometimes present.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub state: Option<String>,
    /// Extra activity field, only sometimes present.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub detail: Option<String>,
    /// Extra activity field, only sometimes present.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub tempo: Option<String>,
    /// Extra activity field, only sometimes present.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub needs: Option<String>,
    /// A pre-warmed spare process, not a user session (only `true` counts).
    #[serde(
        default,
        deserialize_with = "only_true",
        skip_serializing_if = "std::ops::Not::not"
    )]
    pub spare: bool,
    /// Set while the session is parked as a background job: not a messaging peer.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub parked_job_id: Option<Value>,
    /// Informational.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub job_id: Option<Value>,
    /// Informational.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub bridge_session_id: Option<Value>,
    /// Informational.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub host_session_id: Option<Value>,
    /// Informational.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub log_path: Option<Value>,
    /// Informational.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub agent: Option<Value>,
    /// Informational.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub asks_for_converted_skills: Option<Value>,
    /// Fields this version does not know, kept as written.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One earlier name of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FormerName {
    /// The name it had.
    pub name: String,
    /// When it stopped having it, epoch milliseconds.
    #[serde(
        default,
        deserialize_with = "epoch_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub until: Option<u64>,
    /// The session id it had then.
    #[serde(
        default,
        deserialize_with = "lenient",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_id: Option<String>,
}

/// Declares an open enum: known spellings as variants, anything else kept verbatim.
macro_rules! open_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident = $wire:literal,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
            /// A spelling this version does not know, kept as written.
            Other(String),
        }

        impl $name {
            /// Reads a spelling; unknown ones are kept in `Other`.
            #[must_use]
            pub fn from_wire(raw: &str) -> Self {
                match raw {
                    $($wire => Self::$variant,)*
                    other => Self::Other(other.to_owned()),
                }
            }

            /// The spelling as Claude Code writes it.
            #[must_use]
            pub fn as_str(&self) -> &str {
                match self {
                    $(Self::$variant => $wire,)*
                    Self::Other(raw) => raw,
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.serialize_str(self.as_str())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                String::deserialize(deserializer).map(|raw| Self::from_wire(&raw))
            }
        }
    };
}

open_enum! {
    /// `status` as Claude Code writes it; new values may appear.
    VendorStatus {
        /// A turn is running.
        Busy = "busy",
        /// The turn ended but a background shell task still runs.
        Shell = "shell",
        /// Waiting for its user's next prompt.
        Idle = "idle",
        /// Blocked on its user: permission prompt, question, dialog.
        Waiting = "waiting",
    }
}

open_enum! {
    /// `kind`: what sort of Claude Code process wrote the record.
    Kind {
        /// An interactive terminal session.
        Interactive = "interactive",
        /// A background session.
        Bg = "bg",
        /// The daemon.
        Daemon = "daemon",
        /// A daemon's worker.
        DaemonWorker = "daemon-worker",
    }
}

open_enum! {
    /// `nameSource`: where a session's name came from.
    NameSource {
        /// Automatic `<cwd-slug>-<2 hex>`; never deduplicated, so two live sessions can share it.
        Derived = "derived",
        /// Given by the user (`--name`, `/rename`).
        User = "user",
        /// Chosen automatically.
        Auto = "auto",
        /// Renamed to resolve a collision.
        Collision = "collision",
        /// Set by a peer.
        Peer = "peer",
        /// Set by a hook.
        Hook = "hook",
    }
}

/// What a session is doing, from a messenger's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Activity {
    /// Working on a turn (or a background shell task).
    Busy,
    /// At its prompt, waiting for its user.
    Idle,
    /// Blocked on its user: a permission prompt, question or dialog.
    Waiting,
}

impl Activity {
    /// The stable wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Busy => "busy",
            Self::Idle => "idle",
            Self::Waiting => "waiting",
        }
    }
}

/// The wire name is [`Activity::as_str`]: one spelling list.
impl Serialize for Activity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl VendorStatus {
    /// The normalized activity: `shell` counts as busy; unknown spellings are `None`.
    #[must_use]
    pub const fn activity(&self) -> Option<Activity> {
        match self {
            Self::Busy | Self::Shell => Some(Activity::Busy),
            Self::Idle => Some(Activity::Idle),
            Self::Waiting => Some(Activity::Waiting),
            Self::Other(_) => None,
        }
    }
}

impl Record {
    /// Parses a record from the pid in its file name and the file's bytes.
    ///
    /// ```
    /// use claude_peer_registry::{Activity, Pid, Record};
    ///
    /// let pid = Pid::new(9959).unwrap();
    /// let record = Record::parse(pid, br#"{"pid":9959,"sessionId":"8668bde0","status":"shell","future":1}"#)?;
    /// assert_eq!(record.session_id, "8668bde0");
    /// assert_eq!(record.activity(), Some(Activity::Busy));
    /// assert_eq!(record.status.as_ref().map(|s| s.as_str()), Some("shell"));
    /// # Ok::<(), claude_peer_registry::Rejection>(())
    /// ```
    pub fn parse(pid: Pid, bytes: &[u8]) -> Result<Self, Rejection> {
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(Rejection::TooLarge);
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(Rejection::Empty);
        }
        // A record as Claude Code writes it (one object, each name once, the file's pid
        // and a session id) deserializes straight from its bytes, at half the cost.
        // Anything else (a name given twice, whose last value wins; no body pid, or
        // another; any error) is decided through a parsed `Value`, which gives the
        // same record whenever this one succeeds and each rejection its reason.
        if let Ok(record) = serde_json::from_slice::<Self>(bytes)
            && record.pid == pid
            && !record.session_id.is_empty()
        {
            return Ok(record);
        }
        Self::parse_value(pid, bytes)
    }

    /// [`Record::parse`] through a parsed `Value`: duplicate names resolved as in
    /// JavaScript (the last wins), the body's pid checked and replaced by the file's.
    fn parse_value(pid: Pid, bytes: &[u8]) -> Result<Self, Rejection> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|err| Rejection::MalformedJson {
                detail: err.to_string(),
            })?;
        let Value::Object(mut fields) = value else {
            return Err(Rejection::NotAnObject {
                found: json_type(&value),
            });
        };
        match fields.get("sessionId") {
            None | Some(Value::Null) => return Err(Rejection::MissingSessionId),
            Some(Value::String(id)) if !id.is_empty() => {}
            Some(Value::String(_)) => {
                return Err(Rejection::InvalidSessionId {
                    found: "an empty string",
                });
            }
            Some(other) => {
                return Err(Rejection::InvalidSessionId {
                    found: json_type(other),
                });
            }
        }
        if let Some(body_pid) = fields.get("pid") {
            check_body_pid(pid, body_pid)?;
        }
        // Readers trust the file name, not the body.
        fields.insert("pid".to_owned(), pid.get().into());
        Self::deserialize(Value::Object(fields)).map_err(|err| Rejection::MalformedJson {
            detail: err.to_string(),
        })
    }

    /// The normalized activity, if the status is set and known.
    #[must_use]
    pub fn activity(&self) -> Option<Activity> {
        self.status.as_ref().and_then(VendorStatus::activity)
    }

    /// The start token to compare with the live process: `procStartFt` when present,
    /// else `procStart`; `None` on versions that record neither.
    #[must_use]
    pub fn start_token(&self) -> Option<&str> {
        self.proc_start_ft.as_deref().or(self.proc_start.as_deref())
    }

    /// The name to show a person: the session's name, else the basename of its cwd.
    #[must_use]
    pub fn display_name(&self) -> Option<&str> {
        self.name.as_deref().or_else(|| {
            self.cwd
                .as_deref()
                .and_then(|cwd| cwd.trim_end_matches('/').rsplit('/').next())
                .filter(|base| !base.is_empty())
        })
    }

    /// True for a parked or spare process, which Claude Code does not list as a peer.
    #[must_use]
    pub const fn is_parked_or_spare(&self) -> bool {
        self.spare || self.parked_job_id.is_some()
    }

    /// Claude Code's JSON for this record (compact, as Claude Code writes it).
    #[must_use]
    pub fn to_json(&self) -> String {
        // Serializing plain strings, numbers and maps cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

fn check_body_pid(pid: Pid, body: &Value) -> Result<(), Rejection> {
    let Value::Number(number) = body else {
        // A wrong type in an optional field drops the field; the name is what counts.
        return Ok(());
    };
    let same = number.as_u64() == Some(u64::from(pid.get()))
        || number.as_f64() == Some(f64::from(pid.get()));
    if same {
        Ok(())
    } else {
        Err(Rejection::PidMismatch {
            file_pid: pid.get(),
            body_pid: number.to_string(),
        })
    }
}

/// An optional field of the wrong type is dropped on its own, as if absent.
fn lenient<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    let value = Value::deserialize(deserializer)?;
    Ok(Option::<T>::deserialize(value).ok().flatten())
}

/// An array whose well-formed elements are kept; anything else drops the field.
fn lenient_elements<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Array(items) => Some(
            items
                .into_iter()
                .filter_map(|item| T::deserialize(item).ok())
                .collect(),
        ),
        _ => None,
    })
}

/// Only `true` counts; anything else is `false`.
fn only_true<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    Ok(Value::deserialize(deserializer)? == Value::Bool(true))
}

/// Epoch milliseconds: a non-negative integer (an integral float is accepted too,
/// since JavaScript writers do not distinguish them); anything else drops the field.
#[allow(
    clippy::cast_sign_loss,
    reason = "the filter keeps only integral values in 0..2^53"
)]
fn epoch_ms<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    let Value::Number(number) = Value::deserialize(deserializer)? else {
        return Ok(None);
    };
    Ok(number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..9_007_199_254_740_992.0).contains(f))
            .map(|f| f as u64)
    }))
}

const fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
