//! Tests of updates through the file-system seam: fault injection, real processes, and what
//! only the crate's own generic edit reaches.

// The integration tests' helpers; these tests use some of them.
#[allow(dead_code)]
#[path = "../../tests/it/common.rs"]
mod common;
mod faults;
mod processes;
mod updates;

use std::path::Path;

use serde_json::Value;

use crate::fs::RealFs;
use crate::store::update;
use crate::{Error, Revision};

use common::{fixture, home_with, mode_of, temps_in};

/// Sets the top-level `key` of the settings file at `path` to `value`, as an update does.
fn set_key(path: &Path, key: &str, value: &Value) -> Result<Revision, Error> {
    update(&RealFs, path, None, |doc| doc.set(key, value)).map(|(_, revision)| revision)
}

/// Removes every top-level `key` of the settings file at `path`, as an update does.
fn remove_key(path: &Path, key: &str) -> Result<Revision, Error> {
    update(&RealFs, path, None, |doc| doc.remove(key)).map(|(_, revision)| revision)
}
