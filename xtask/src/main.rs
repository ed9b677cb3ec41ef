//! Project automation, in Rust so it runs wherever cargo does.
//!
//! `cargo xtask test` is the one command that decides whether a change is good:
//! formatting, clippy with warnings denied, every test, doc tests. It stops at the
//! first failure.

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod tidy;

use tidy::tidy;

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  tidy    the layer rules of ARCHITECTURE.md (over `cargo metadata`); in every crate's src/, tests excepted:
          no file above 600 lines, no file-level import circle, no function above 100 lines,
          no Result<_, String> outside the command crate; prints everything it finds
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
    need_sshd()?;
    // Where a send without a post office records what it sent: the tests' own store,
    // not the user's.
    let state = workspace_root().join("target/test-state");
    let tests = |args: &[&str]| {
        run(Command::new(cargo_bin())
            .env(TEST_CLAUDE_VAR, &claude)
            .env(TEST_OLD_CLAUDE_VAR, &old_claude)
            .env("XDG_STATE_HOME", &state)
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

/// The tests of other machines run real OpenSSH servers on loopback ports (never the
/// system's service): Debian's `openssh-server`, installed here when missing where
/// `apt-get` may (as root), else named as what the run needs.
fn need_sshd() -> Result<(), String> {
    let sshd = Path::new("/usr/sbin/sshd");
    if !sshd.is_file() && is_root() {
        eprintln!("xtask: installing openssh-server (apt-get) for the tests of other machines");
        let _ = Command::new("apt-get").args(["update", "-qq"]).status();
        let _ = Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-qq",
                "--no-install-recommends",
                "openssh-server",
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status();
    }
    if sshd.is_file() {
        Ok(())
    } else {
        Err("the tests of other machines run real OpenSSH servers on loopback ports, and /usr/sbin/sshd is not installed (apt-get install openssh-server)".to_owned())
    }
}

/// Whether this process runs as root (its `/proc/self/status` says uid 0).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|line| line.strip_prefix("Uid:"))
            .and_then(|uids| uids.split_whitespace().nth(1))
            == Some("0")
    })
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
