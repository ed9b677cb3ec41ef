//! `cargo xtask tidy`: the rules of ARCHITECTURE.md and the house style that a check can
//! hold — the crate layers, and in every crate's `src/` (tests excepted) no file above
//! 600 lines, no file-level import circle, no function above 100 lines, and no
//! `Result<_, String>` in a library crate.
//!
//! It prints everything it finds, rule by rule, and fails when anything breaks a rule.

mod circles;
mod functions;
mod source;
mod string_errors;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::process::Command;

use functions::{MAX_FUNCTION_LINES, long_functions};
use source::{Source, rust_files};
use string_errors::string_errors;

use crate::{cargo_bin, workspace_root};

/// ARCHITECTURE.md's layers, bottom-up: a crate may depend only on crates before it.
const LAYERS: [&str; 13] = [
    "claude-peer-registry",
    "claude-peer-endpoint",
    "claude-peer-probe",
    "claude-peer-transcript",
    "claude-peer-settings",
    "claude-peer-resolve",
    "claude-peer-watch",
    "claude-peer-deliver",
    "claude-peer-guard",
    "claude-peer-sender",
    "claude-peer-post",
    "claude-peer-remote",
    COMMAND,
];
/// The command crate: the one crate that is not a library, so the one allowed a
/// `Result<_, String>` (a clap value parser's error, a message for the screen).
const COMMAND: &str = "claude-peers";
/// Fakes for tests: a dev-dependency only.
const TESTKIT: &str = "claude-peer-testkit";
/// The pure model and the only crates it may use: nothing that reaches the OS.
const PURE: (&str, [&str; 3]) = ("claude-peer-registry", ["serde", "serde_json", "thiserror"]);

/// What one rule found: a heading and one line per finding.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Rule {
    pub(crate) heading: String,
    pub(crate) found: Vec<String>,
    pub(crate) weight: Weight,
}

/// Whether a rule's findings fail tidy or are only printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Weight {
    /// Any finding fails tidy.
    Breaks,
    /// Printed for the reader, never failing: what the rules allow but someone may want
    /// to see.
    Notes,
}

impl Rule {
    fn breaks(heading: String, found: Vec<String>) -> Self {
        Self {
            heading,
            found,
            weight: Weight::Breaks,
        }
    }
}

pub(crate) fn tidy() -> Result<(), String> {
    eprintln!("xtask: tidy (layers, file and function lengths, import circles, Result<_, String>)");
    let metadata = metadata()?;
    let crates = workspace_root().join("crates");
    let mut rules = vec![
        Rule::breaks(
            "the layer rules of ARCHITECTURE.md".to_owned(),
            layer_violations(&metadata),
        ),
        Rule::breaks(
            format!("source files above {MAX_SOURCE_LINES} lines"),
            long_sources(&crates),
        ),
    ];
    rules.extend(source_rules(&crates));
    for rule in rules.iter().filter(|rule| !rule.found.is_empty()) {
        eprintln!("xtask: {} ({}):", rule.heading, rule.found.len());
        for finding in &rule.found {
            eprintln!("  {finding}");
        }
    }
    let broken: Vec<String> = rules
        .iter()
        .filter(|rule| rule.weight == Weight::Breaks && !rule.found.is_empty())
        .map(|rule| format!("{} {}", rule.found.len(), rule.heading))
        .collect();
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!("tidy rules broken: {}", broken.join(", ")))
    }
}

/// The workspace's packages, as `cargo metadata` describes them.
fn metadata() -> Result<serde_json::Value, String> {
    let out = Command::new(cargo_bin())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace_root())
        .output()
        .map_err(|err| format!("cannot run cargo metadata: {err}"))?;
    if !out.status.success() {
        return Err(format!("`cargo metadata` failed ({})", out.status));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|err| format!("cargo metadata printed no JSON: {err}"))
}

/// The rules read from the code of every crate under `crates` (each `crates/*/src`, tests
/// excepted): import circles, long functions, `Result<_, String>` outside [`COMMAND`]
/// (and, only noted, inside it). A file that cannot be read is a finding of the first rule.
pub(crate) fn source_rules(crates: &Path) -> [Rule; 4] {
    let mut circles = Vec::new();
    let mut functions = Vec::new();
    let mut string_errors = Vec::new();
    let mut command_string_errors = Vec::new();
    for (name, src) in crate_sources(crates) {
        let prefix = format!("crates/{name}/src/");
        let mut sources = Vec::new();
        for path in rust_files(&src) {
            match Source::read(&src, &path) {
                Ok(source) => sources.push(source),
                Err(unreadable) => circles.push(unreadable),
            }
        }
        circles.extend(circles::circles(&sources, &prefix));
        for source in &sources {
            functions.extend(long_functions(source, &prefix));
            let found = self::string_errors(source, &prefix);
            if name == COMMAND {
                command_string_errors.extend(found);
            } else {
                string_errors.extend(found);
            }
        }
    }
    [
        Rule::breaks("file-level import circles".to_owned(), circles),
        Rule::breaks(
            format!("functions above {MAX_FUNCTION_LINES} lines"),
            functions,
        ),
        Rule::breaks(
            "Result<_, String> in a library crate".to_owned(),
            string_errors,
        ),
        Rule {
            heading: format!(
                "Result<_, String> in the command crate (allowed: {COMMAND} is no library)"
            ),
            found: command_string_errors,
            weight: Weight::Notes,
        },
    ]
}

/// Each crate folder under `crates` with its `src`, by name.
fn crate_sources(crates: &Path) -> Vec<(String, PathBuf)> {
    let mut found: Vec<(String, PathBuf)> = std::fs::read_dir(crates)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            (name, entry.path().join("src"))
        })
        .filter(|(_, src)| src.is_dir())
        .collect();
    found.sort();
    found
}

/// The longest a library or command source file may grow: past it, a file holds several
/// things and becomes a folder module.
const MAX_SOURCE_LINES: usize = 600;

/// Every source file under `crates/*/src` longer than [`MAX_SOURCE_LINES`], but for
/// tests (`tests.rs`, or anything under a `tests/` folder).
fn long_sources(crates: &Path) -> Vec<String> {
    let mut long = Vec::new();
    for (_, src) in crate_sources(crates) {
        for path in rust_files(&src) {
            let lines = std::fs::read_to_string(&path).map_or(0, |text| text.lines().count());
            if lines > MAX_SOURCE_LINES {
                long.push(format!(
                    "{} has {lines} lines, above {MAX_SOURCE_LINES}: split it into a folder module",
                    path.display()
                ));
            }
        }
    }
    long.sort();
    long
}

/// Every way the workspace in `metadata` breaks the layer rules.
fn layer_violations(metadata: &serde_json::Value) -> Vec<String> {
    let mut broken = Vec::new();
    let packages = metadata["packages"]
        .as_array()
        .map_or(&[][..], Vec::as_slice);
    for package in packages {
        let name = package["name"].as_str().unwrap_or_default();
        let layer = LAYERS.iter().position(|&l| l == name);
        if layer.is_none() && name != TESTKIT && name != "xtask" {
            broken.push(format!("{name} has no place in the layer table"));
        }
        let dependencies = package["dependencies"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        for dependency in dependencies {
            let on = dependency["name"].as_str().unwrap_or_default();
            if dependency["kind"].as_str() == Some("dev") {
                continue;
            }
            if on == TESTKIT {
                broken.push(format!(
                    "{name} depends on {TESTKIT}, which is for tests only"
                ));
            }
            let below = |l: usize| layer.is_some_and(|own| l < own);
            let misplaced = LAYERS.iter().position(|&l| l == on).filter(|&l| !below(l));
            if let Some(other) = misplaced.filter(|_| name != TESTKIT) {
                broken.push(format!(
                    "{name} depends on {}, which is not below it",
                    LAYERS[other]
                ));
            }
            if name == PURE.0 && !PURE.1.contains(&on) {
                broken.push(format!("{name} is pure and may not depend on {on}"));
            }
        }
    }
    broken
}
