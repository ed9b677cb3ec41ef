//! Project automation, in Rust so it runs wherever cargo does.
//!
//! `cargo xtask test` is the one command that decides whether a change is good:
//! formatting, clippy with warnings denied, every test, doc tests. It stops at the
//! first failure.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  test    cargo fmt --check, clippy -D warnings, all tests (nextest when installed), doc tests, rustdoc -D warnings
  deny    cargo deny check (installs cargo-deny when missing); advisories only when its database is present
  bench   run the benchmarks and print their side-by-side tables";

fn main() -> ExitCode {
    let task = env::args().nth(1);
    let result = match task.as_deref() {
        Some("test") => test(),
        Some("deny") => deny(),
        Some("bench") => bench(),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn test() -> Result<(), String> {
    cargo(&["fmt", "--all", "--check"])?;
    cargo(&[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ])?;
    if has_cargo_subcommand("nextest") {
        cargo(&["nextest", "run", "--workspace", "--no-fail-fast"])?;
    } else {
        cargo(&["test", "--workspace", "--no-fail-fast"])?;
    }
    cargo(&["test", "--workspace", "--doc"])?;
    // Broken intra-doc links and malformed docs fail like any other warning.
    run(Command::new(cargo_bin())
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(["doc", "--workspace", "--no-deps"]))
}

fn deny() -> Result<(), String> {
    if !has_cargo_subcommand("deny") {
        cargo(&["install", "--locked", "cargo-deny"])?;
    }
    // The advisory database is fetched from the network; where it is not present,
    // check everything that needs no network and say so.
    if advisory_db_present() {
        cargo(&["deny", "check"])
    } else {
        eprintln!("xtask: no advisory database found; checking licenses, bans and sources only");
        cargo(&["deny", "check", "licenses", "bans", "sources"])
    }
}

fn bench() -> Result<(), String> {
    cargo(&["bench", "--workspace"])
}

fn advisory_db_present() -> bool {
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|home| Path::new(&home).join(".cargo")));
    cargo_home.is_some_and(|home| {
        std::fs::read_dir(home.join("advisory-dbs")).is_ok_and(|mut dbs| dbs.next().is_some())
    })
}

fn has_cargo_subcommand(name: &str) -> bool {
    Command::new(cargo_bin())
        .args([name, "--version"])
        .output()
        .is_ok_and(|out| out.status.success())
}

fn cargo(args: &[&str]) -> Result<(), String> {
    run(Command::new(cargo_bin()).args(args))
}

/// Runs a cargo command from the workspace root, saying what it runs.
fn run(command: &mut Command) -> Result<(), String> {
    let shown: Vec<String> = command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    eprintln!("xtask: cargo {}", shown.join(" "));
    let status = command
        .current_dir(workspace_root())
        .status()
        .map_err(|err| format!("cannot run cargo: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", shown.join(" ")))
    }
}

fn cargo_bin() -> PathBuf {
    env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
