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
  tidy    the layer rules of ARCHITECTURE.md (over `cargo metadata`); no source file above 600 lines
  test    tidy, cargo fmt --check, clippy -D warnings, all tests (nextest when installed), doc tests, rustdoc -D warnings;
          first installs the pinned Claude Code builds the end-to-end tests run (npm, cached per user)
  deny    cargo deny check (installs cargo-deny when missing); advisories only when its database is present
  bench   run the benchmarks and print their side-by-side tables
  publish-check
          cargo publish --workspace --dry-run: every crate packages and builds as published (needs crates.io)";

fn main() -> ExitCode {
    let task = env::args().nth(1);
    let result = match task.as_deref() {
        Some("test") => test(),
        Some("tidy") => tidy(),
        Some("deny") => deny(),
        Some("bench") => bench(),
        Some("publish-check") => cargo(&["publish", "--workspace", "--dry-run", "--locked"]),
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
    tidy()?;
    // The end-to-end tests drive real Claude Code: the pinned build, and tmux for the
    // interactive receivers. Missing either fails here, with the reason.
    let claude = claude_code()?;
    let old_claude = claude_code_of(OLD_CLAUDE_CODE_VERSION)?;
    need_tmux()?;
    let tests = |args: &[&str]| {
        run(Command::new(cargo_bin())
            .env(TEST_CLAUDE_VAR, &claude)
            .env(TEST_OLD_CLAUDE_VAR, &old_claude)
            .args(args))
    };
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
        tests(&["nextest", "run", "--workspace", "--no-fail-fast"])?;
    } else {
        tests(&["test", "--workspace", "--no-fail-fast"])?;
    }
    cargo(&["test", "--workspace", "--doc"])?;
    // Broken intra-doc links and malformed docs fail like any other warning.
    run(Command::new(cargo_bin())
        .env("RUSTDOCFLAGS", "-D warnings")
        .args(["doc", "--workspace", "--no-deps"]))
}

/// ARCHITECTURE.md's layers, bottom-up: a crate may depend only on crates before it.
const LAYERS: [&str; 10] = [
    "claude-peer-registry",
    "claude-peer-endpoint",
    "claude-peer-probe",
    "claude-peer-transcript",
    "claude-peer-settings",
    "claude-peer-resolve",
    "claude-peer-watch",
    "claude-peer-deliver",
    "claude-peer-sender",
    "claude-peers",
];
/// Fakes for tests: a dev-dependency only.
const TESTKIT: &str = "claude-peer-testkit";
/// The pure model and the only crates it may use: nothing that reaches the OS.
const PURE: (&str, [&str; 3]) = ("claude-peer-registry", ["serde", "serde_json", "thiserror"]);

fn tidy() -> Result<(), String> {
    eprintln!("xtask: tidy (the layer rules of ARCHITECTURE.md)");
    let out = Command::new(cargo_bin())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(workspace_root())
        .output()
        .map_err(|err| format!("cannot run cargo metadata: {err}"))?;
    if !out.status.success() {
        return Err(format!("`cargo metadata` failed ({})", out.status));
    }
    let metadata = serde_json::from_slice(&out.stdout)
        .map_err(|err| format!("cargo metadata printed no JSON: {err}"))?;
    let mut broken = layer_violations(&metadata);
    broken.extend(long_sources(&workspace_root().join("crates")));
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the layer rules are broken:\n  {}",
            broken.join("\n  ")
        ))
    }
}

/// The longest a library or command source file may grow: past it, a file holds several
/// things and becomes a folder module.
const MAX_SOURCE_LINES: usize = 600;

/// Every source file under `crates/*/src` longer than [`MAX_SOURCE_LINES`], but for
/// tests (`tests.rs`, or anything under a `tests/` folder).
fn long_sources(crates: &Path) -> Vec<String> {
    let mut long = Vec::new();
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(crates)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("src"))
        .collect();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            let is_test = path
                .file_name()
                .is_some_and(|n| n == "tests" || n == "tests.rs");
            if is_test {
                continue;
            }
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let lines = std::fs::read_to_string(&path).map_or(0, |text| text.lines().count());
                if lines > MAX_SOURCE_LINES {
                    long.push(format!(
                        "{} has {lines} lines, above {MAX_SOURCE_LINES}: split it into a folder module",
                        path.display()
                    ));
                }
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
    let claude = claude_code()?;
    need_tmux()?;
    run(Command::new(cargo_bin())
        .env(TEST_CLAUDE_VAR, &claude)
        .args(["bench", "--workspace"]))
}

/// The Claude Code version the end-to-end tests run.
const CLAUDE_CODE_VERSION: &str = "2.1.332";
/// Where the tests find its binary.
const TEST_CLAUDE_VAR: &str = "CLAUDE_PEERS_TEST_CLAUDE";
/// A build too old to message other sessions (a teammate-only `SendMessage`, no
/// socket), which `doctor` must recognise.
const OLD_CLAUDE_CODE_VERSION: &str = "2.1.197";
/// Where the tests find that one.
const TEST_OLD_CLAUDE_VAR: &str = "CLAUDE_PEERS_TEST_CLAUDE_OLD";

/// The pinned Claude Code binary, installed from the npm registry into a per-user cache
/// (`$XDG_CACHE_HOME/claude-peers`, else `~/.cache/claude-peers`) when missing, so a
/// fresh clone does not fetch it again.
fn claude_code() -> Result<PathBuf, String> {
    claude_code_of(CLAUDE_CODE_VERSION)
}

/// Claude Code `version`, installed as [`claude_code`] installs the pinned one.
fn claude_code_of(version: &str) -> Result<PathBuf, String> {
    let platform = match env::consts::ARCH {
        "x86_64" => "linux-x64",
        "aarch64" => "linux-arm64",
        other => return Err(format!("no Claude Code build is pinned for {other}")),
    };
    let dir = cache_dir()?.join("claude-code").join(version);
    let binary = dir
        .join("node_modules/@anthropic-ai")
        .join(format!("claude-code-{platform}"))
        .join("claude");
    if binary.is_file() {
        return Ok(binary);
    }
    eprintln!(
        "xtask: installing Claude Code {version} into {}",
        dir.display()
    );
    // Installed beside, then renamed into place: an interrupted install leaves no
    // half-filled cache behind.
    let staging = dir.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|err| format!("cannot create `{}`: {err}", staging.display()))?;
    let package = format!("@anthropic-ai/claude-code@{version}");
    let status = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix"])
        .arg(&staging)
        .arg(&package)
        .status()
        .map_err(|err| {
            format!("the end-to-end tests need Claude Code {version} from the npm registry, but npm cannot run: {err}")
        })?;
    if !status.success() {
        return Err(format!("`npm install {package}` failed ({status})"));
    }
    std::fs::rename(&staging, &dir)
        .map_err(|err| format!("cannot move the install to `{}`: {err}", dir.display()))?;
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!(
            "npm installed {package}, but `{}` is missing",
            binary.display()
        ))
    }
}

fn cache_dir() -> Result<PathBuf, String> {
    env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
        .map(|dir| dir.join("claude-peers"))
        .ok_or_else(|| "no cache directory: set XDG_CACHE_HOME or HOME".to_owned())
}

fn need_tmux() -> Result<(), String> {
    match Command::new("tmux").arg("-V").output() {
        Ok(out) if out.status.success() => Ok(()),
        _ => Err("the end-to-end tests run interactive Claude Code sessions in tmux, which is not installed (apt-get install tmux)".to_owned()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn package(name: &str, dependencies: &[(&str, Option<&str>)]) -> serde_json::Value {
        let dependencies: Vec<_> = dependencies
            .iter()
            .map(|(on, kind)| json!({"name": on, "kind": kind}))
            .collect();
        json!({"name": name, "dependencies": dependencies})
    }

    #[test]
    fn the_workspace_keeps_its_layers() {
        assert_eq!(tidy(), Ok(()));
    }

    #[test]
    fn a_source_file_above_600_lines_fails_tidy_and_tests_do_not() {
        let root = env::temp_dir().join(format!("xtask-long-sources-{}", std::process::id()));
        let src = root.join("claude-peer-x").join("src");
        let write = |path: &Path, lines: usize| {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "// a line\n".repeat(lines)).unwrap();
        };
        write(&src.join("long.rs"), 601);
        write(&src.join("deep/long.rs"), 700);
        write(&src.join("fits.rs"), 600);
        write(&src.join("tests/long.rs"), 900);
        write(&src.join("part/tests.rs"), 900);
        let long = long_sources(&root);
        std::fs::remove_dir_all(&root).unwrap();
        assert_eq!(long.len(), 2, "{long:?}");
        assert!(long[0].contains("deep/long.rs has 700 lines"), "{long:?}");
        assert!(long[1].contains("src/long.rs has 601 lines"), "{long:?}");
    }

    #[test]
    fn a_broken_dependency_fails_tidy() {
        let metadata = json!({"packages": [
            package("claude-peer-registry", &[("rustix", None), ("insta", Some("dev"))]),
            package("claude-peer-probe", &[("claude-peer-resolve", None), ("claude-peer-registry", None)]),
            package("claude-peer-resolve", &[("claude-peer-testkit", None), ("claude-peer-testkit", Some("dev"))]),
            package("claude-peer-new", &[]),
            package("claude-peer-testkit", &[("claude-peer-probe", None)]),
        ]});
        assert_eq!(
            layer_violations(&metadata),
            [
                "claude-peer-registry is pure and may not depend on rustix",
                "claude-peer-probe depends on claude-peer-resolve, which is not below it",
                "claude-peer-resolve depends on claude-peer-testkit, which is for tests only",
                "claude-peer-new has no place in the layer table",
            ]
        );
    }
}
