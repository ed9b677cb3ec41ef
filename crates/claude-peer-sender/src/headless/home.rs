//! The sender's private Claude home and its per-run secret.

use std::fmt::Write as _;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use claude_peer_probe::{OsProcessTable, ProcessTable};
use claude_peer_registry::{Pid, Signal};

use crate::{default_runtime_dir, private_dir};

/// The private Claude home senders run in: `sender-home` in the
/// [`default_runtime_dir`]. Never the user's own home: a sender there would appear in the
/// user's registry and run the user's hooks.
#[must_use]
pub fn default_sender_home() -> Option<PathBuf> {
    default_runtime_dir().map(|dir| dir.join("sender-home"))
}

/// Makes the private home ready: a [`private_dir`] (so no one else can put their own
/// settings, and so their hooks, in the home Claude Code runs with) with a
/// `.claude.json` that lets a headless Claude Code start without onboarding, and its
/// `runs/`. Returns the home with every link on its way resolved, the path the sender is
/// given.
pub(super) fn prepare_home(home: &Path) -> io::Result<PathBuf> {
    let path = private_dir(home)?;
    let config = path.join(".claude.json");
    if !config.exists() {
        fs::write(config, br#"{"hasCompletedOnboarding":true}"#)?;
    }
    private_dir(&path.join("runs"))?;
    Ok(path)
}

/// The prefix of this process's run directories: `run-<pid>-`, for whoever looks.
pub(super) fn run_prefix() -> String {
    format!("run-{}-", std::process::id())
}

/// The file in a run directory that says whose it is: the pid domain (machine and pid
/// namespace), the pid and its start token, a line each.
const OWNER: &str = "owner";

/// The longest owner file read.
const MAX_OWNER_BYTES: u64 = 1024;

/// Writes `run_dir`'s owner file: this process, as [`remove_leftover_runs`] later tells
/// whether it still runs. Nothing is written where the pid domain or the start token
/// cannot be learned: such a directory is never removed by another start.
pub(super) fn mark_owner(run_dir: &Path) -> io::Result<()> {
    let Some((domain, pid, token)) = this_run() else {
        return Ok(());
    };
    fs::write(run_dir.join(OWNER), format!("{domain}\n{pid}\n{token}\n"))
}

/// This process as an owner file names it.
fn this_run() -> Option<(String, Pid, String)> {
    let table = OsProcessTable::new();
    let pid = Pid::new(std::process::id())?;
    let domain = table.reader().pid_domain?;
    let token = table.facts(pid, table.signal(pid)).start_token?;
    Some((domain, pid, token))
}

/// Removes the run directories under `runs` whose sender provably no longer runs
/// (killed before it could remove its own): directories of this user whose owner file
/// names this pid domain (this machine, this pid namespace) and a pid that is gone, or
/// that runs another process now (another start token). Whatever cannot be told so (no
/// owner file, one of another machine or pid namespace, as in a home shared over NFS
/// or by a container) is left alone; nothing but `run-…` directories is touched.
pub(super) fn remove_leftover_runs(runs: &Path) {
    let Ok(entries) = fs::read_dir(runs) else {
        return;
    };
    let table = OsProcessTable::new();
    let Some(domain) = table.reader().pid_domain else {
        return;
    };
    let uid = rustix::process::getuid().as_raw();
    for entry in entries.flatten() {
        let named = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with("run-"));
        let ours = entry
            .metadata()
            .is_ok_and(|meta| meta.is_dir() && meta.uid() == uid);
        if named && ours && dead_run_of(&entry.path(), &table, &domain) {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

/// Whether the run directory `dir` names, in its owner file, a run of `domain` that no
/// longer runs.
fn dead_run_of(dir: &Path, table: &OsProcessTable, domain: &str) -> bool {
    let mut text = String::new();
    let read = fs::symlink_metadata(dir.join(OWNER)).is_ok_and(|meta| meta.is_file())
        && fs::File::open(dir.join(OWNER))
            .and_then(|file| file.take(MAX_OWNER_BYTES).read_to_string(&mut text))
            .is_ok();
    let mut lines = text.lines();
    let (Some(theirs), Some(pid), Some(token), true) =
        (lines.next(), lines.next(), lines.next(), read)
    else {
        return false;
    };
    let Some(pid) = pid.parse::<u32>().ok().and_then(Pid::new) else {
        return false;
    };
    if theirs != domain {
        return false;
    }
    match table.signal(pid) {
        Signal::NoSuchProcess => true,
        signal => table
            .facts(pid, signal)
            .start_token
            .is_some_and(|now| now != token),
    }
}

/// A per-run secret: 16 bytes of the kernel's randomness, in hex.
pub(super) fn secret() -> io::Result<String> {
    let mut bytes = [0_u8; 16];
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().fold(String::new(), |mut hex, b| {
        let _ = write!(hex, "{b:02x}");
        hex
    }))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    /// A fresh base (0700, ours) and the home below it, as the sender would use it.
    fn base() -> (tempfile::TempDir, PathBuf) {
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("claude-peers").join("sender-home");
        (base, home)
    }

    fn refused(home: &Path) -> String {
        prepare_home(home).unwrap_err().to_string()
    }

    #[test]
    fn a_home_is_created_0700_below_a_chain_only_its_user_or_root_can_change() {
        let (dir, home) = base();
        let made = prepare_home(&home).unwrap();
        assert_eq!(made, fs::canonicalize(&home).unwrap());
        for dir in [home.parent().unwrap(), &home, &home.join("runs")] {
            assert_eq!(fs::metadata(dir).unwrap().mode() & 0o777, 0o700, "{dir:?}");
        }
        assert!(home.join(".claude.json").is_file());
        // Ready once, ready again; and a link to it resolves to where it really is.
        assert_eq!(prepare_home(&home).unwrap(), made);
        symlink(&home, dir.path().join("link")).unwrap();
        assert_eq!(prepare_home(&dir.path().join("link")).unwrap(), made);
    }

    #[test]
    fn a_directory_others_may_write_anywhere_on_the_way_is_refused_by_name() {
        let (dir, _) = base();
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let home = open.join("cache").join("claude-peers").join("sender-home");
        let why = refused(&home);
        assert!(
            why.contains(&format!("`{}`", open.display())) && why.contains("mode 777"),
            "{why}"
        );
        assert_eq!(
            fs::read_dir(&open).unwrap().count(),
            0,
            "nothing is created in it"
        );

        // Group-writable is as bad; sticky and world-writable, like /tmp, is not.
        fs::set_permissions(&open, fs::Permissions::from_mode(0o770)).unwrap();
        assert!(refused(&home).contains("mode 770"));
        fs::set_permissions(&open, fs::Permissions::from_mode(0o1777)).unwrap();
        prepare_home(&home).unwrap();

        // Below the base too: an existing `claude-peers` others may write.
        let (_base, home) = base();
        prepare_home(&home).unwrap();
        let ours = home.parent().unwrap();
        fs::set_permissions(ours, fs::Permissions::from_mode(0o757)).unwrap();
        assert!(refused(&home).contains(&format!("`{}`", ours.display())));
    }

    #[test]
    fn a_directory_of_another_user_on_the_way_is_refused_even_through_a_link() {
        // The tests run as root (`cargo xtask test` in CI); root may give a directory away.
        assert!(
            rustix::process::getuid().is_root(),
            "this test makes directories of another user, which needs root"
        );
        let nobody = Some(rustix::fs::Uid::from_raw(65534));
        let (dir, home) = base();
        let theirs = dir.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        rustix::fs::chown(&theirs, nobody, None).unwrap();
        let why = refused(&theirs.join("sender-home"));
        assert!(
            why.contains(&format!("`{}`", theirs.display())) && why.contains("uid 65534"),
            "{why}"
        );
        assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);

        // Our `claude-peers`, with `sender-home` a link into another user's directory.
        fs::create_dir(home.parent().unwrap()).unwrap();
        symlink(&theirs, &home).unwrap();
        assert!(refused(&home).contains("uid 65534"), "{}", refused(&home));
        assert_eq!(fs::read_dir(&theirs).unwrap().count(), 0);
    }

    #[test]
    fn only_runs_provably_dead_on_this_machine_and_pid_namespace_are_removed() {
        let runs = tempfile::tempdir().unwrap();
        let (domain, me, token) = this_run().expect("this process as an owner file names it");
        let dead = claude_peer_testkit::process::reaped_pid().unwrap();
        let run = |name: &str, owner: Option<String>| {
            let dir = runs.path().join(name);
            fs::create_dir(&dir).unwrap();
            if let Some(owner) = owner {
                fs::write(dir.join(OWNER), owner).unwrap();
            }
            dir
        };
        let other_ns = domain
            .rsplit_once(':')
            .map_or_else(String::new, |(m, _)| format!("{m}:pid:[1]"));
        let gone = [
            run("run-dead", Some(format!("{domain}\n{dead}\n1234\n"))),
            run("run-reused", Some(format!("{domain}\n{me}\n{token}9\n"))),
        ];
        let kept = [
            run("run-mine", Some(format!("{domain}\n{me}\n{token}\n"))),
            run(
                "run-other-namespace",
                Some(format!("{other_ns}\n{dead}\n1234\n")),
            ),
            run(
                "run-other-machine",
                Some(format!(
                    "linux:0123456789abcdef:pid:[4026531836]\n{dead}\n1\n"
                )),
            ),
            run("run-no-owner", None),
            run("run-torn-owner", Some(format!("{domain}\n{dead}"))),
            run("not-a-run", Some(format!("{domain}\n{dead}\n1234\n"))),
        ];
        remove_leftover_runs(runs.path());
        for dir in gone {
            assert!(!dir.exists(), "{dir:?} is provably a dead run of ours");
        }
        for dir in kept {
            assert!(dir.exists(), "{dir:?} is kept");
        }
    }
}
