//! A failure or a concurrent edit injected at every step of an update.

use std::cell::Cell;
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use claude_peer_settings::{Entry, InboundPolicy, RealFs, SettingsFs, SettingsStore, Stat};

use crate::common::{fixture, home_with, temps_in};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    AfterRead,
    AfterTempWrite,
    BeforeRename,
    AfterRename,
    BeforeDirSync,
}

const STEPS: [Step; 5] = [
    Step::AfterRead,
    Step::AfterTempWrite,
    Step::BeforeRename,
    Step::AfterRename,
    Step::BeforeDirSync,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// The operation at the step fails.
    Fail,
    /// Another writer that takes no lock (like Claude Code) rewrites the file in place.
    ConcurrentEdit,
}

/// The real file system with one fault at one step.
struct FaultFs {
    step: Step,
    action: Action,
    settings: PathBuf,
    their_bytes: Vec<u8>,
    loads: Cell<u32>,
}

impl FaultFs {
    fn injected() -> io::Error {
        io::Error::other("injected fault")
    }

    fn concurrent_edit(&self) {
        std::fs::write(&self.settings, &self.their_bytes).unwrap();
    }

    fn at(&self, step: Step) -> Option<Action> {
        (self.step == step).then_some(self.action)
    }
}

impl SettingsFs for FaultFs {
    type Temp = File;
    type Lock = File;

    fn load(&self, path: &Path, follow: bool) -> io::Result<Entry> {
        if follow {
            // `SettingsStore::read`; the update itself never follows links.
            return RealFs.load(path, follow);
        }
        let n = self.loads.get();
        self.loads.set(n + 1);
        let entry = RealFs.load(path, follow)?;
        if n == 0 {
            match self.at(Step::AfterRead) {
                Some(Action::Fail) => return Err(Self::injected()),
                Some(Action::ConcurrentEdit) => self.concurrent_edit(),
                None => {}
            }
        }
        Ok(entry)
    }

    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        RealFs.create_dir_all(dir, mode)
    }

    fn lock(&self, path: &Path) -> io::Result<File> {
        RealFs.lock(path)
    }

    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        RealFs.list_dir(dir)
    }

    fn stat(&self, path: &Path) -> io::Result<Option<Stat>> {
        RealFs.stat(path)
    }

    fn create_temp(&self, path: &Path, mode: u32) -> io::Result<File> {
        RealFs.create_temp(path, mode)
    }

    fn holds(&self, path: &Path, expected: Option<&[u8]>) -> io::Result<bool> {
        if self.at(Step::BeforeRename) == Some(Action::ConcurrentEdit) {
            // Just before the comparison that immediately precedes the rename.
            self.concurrent_edit();
        }
        RealFs.holds(path, expected)
    }

    fn write_temp(&self, temp: &mut File, parts: &[&[u8]]) -> io::Result<()> {
        RealFs.write_temp(temp, parts)?;
        match self.at(Step::AfterTempWrite) {
            Some(Action::Fail) => Err(Self::injected()),
            Some(Action::ConcurrentEdit) => {
                self.concurrent_edit();
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.at(Step::BeforeRename) == Some(Action::Fail) {
            return Err(Self::injected());
        }
        RealFs.rename(from, to)?;
        match self.at(Step::AfterRename) {
            Some(Action::Fail) => Err(Self::injected()),
            Some(Action::ConcurrentEdit) => {
                self.concurrent_edit();
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        match self.at(Step::BeforeDirSync) {
            Some(Action::Fail) => return Err(Self::injected()),
            Some(Action::ConcurrentEdit) => self.concurrent_edit(),
            None => {}
        }
        RealFs.sync_dir(dir)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)
    }
}

/// What one faulty update gave.
type Outcome = (&'static str, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

/// Runs one update of `pretty.json` with the fault; returns the result's error name (or
/// `ok`), the bytes before, the bytes our update would write, the other writer's bytes,
/// and the bytes afterwards.
fn run(step: Step, action: Action) -> Outcome {
    let old = fixture("pretty.json");
    let (dir, path) = home_with(&old);

    let reference = tempfile::tempdir().unwrap();
    let reference_path = reference.path().join("settings.json");
    std::fs::write(&reference_path, &old).unwrap();
    SettingsStore::new(&reference_path)
        .set_inbound(InboundPolicy::Refuse, None)
        .unwrap();
    let new = std::fs::read(&reference_path).unwrap();

    let theirs = fixture("tabs.json");
    let fs = FaultFs {
        step,
        action,
        settings: path.clone(),
        their_bytes: theirs.clone(),
        loads: Cell::new(0),
    };
    let store = SettingsStore::with_fs(&path, fs);
    let expected = store.read().unwrap().revision;
    let result = store.set_inbound(InboundPolicy::Refuse, Some(&expected));
    let after = std::fs::read(&path).unwrap();
    assert!(
        temps_in(dir.path()).is_empty(),
        "{step:?} {action:?}: no temporary file remains"
    );
    let name = match &result {
        Ok(_) => "ok",
        Err(e) => e.as_str(),
    };
    (name, old, new, theirs, after)
}

#[test]
fn a_failure_at_any_step_leaves_exactly_the_old_or_the_new_bytes_and_no_temporary_file() {
    for step in STEPS {
        let (name, old, new, _, after) = run(step, Action::Fail);
        let (want_name, want_bytes) = match step {
            Step::AfterRead => ("read_failed", &old),
            Step::AfterTempWrite | Step::BeforeRename => ("write_failed", &old),
            Step::AfterRename => ("write_failed", &new),
            Step::BeforeDirSync => ("not_durable", &new),
        };
        assert_eq!(name, want_name, "{step:?}");
        assert!(
            after == old || after == new,
            "{step:?}: old or new bytes, nothing else"
        );
        assert_eq!(&after, want_bytes, "{step:?}");
    }
}

#[test]
fn a_concurrent_edit_at_any_step_is_a_conflict_or_comes_after_ours_and_is_never_lost() {
    for step in STEPS {
        let (name, _, _, theirs, after) = run(step, Action::ConcurrentEdit);
        let want_name = match step {
            Step::AfterRead | Step::AfterTempWrite | Step::BeforeRename => "conflict",
            Step::AfterRename | Step::BeforeDirSync => "ok",
        };
        assert_eq!(name, want_name, "{step:?}");
        assert_eq!(
            after, theirs,
            "{step:?}: the other writer's edit is what the file holds"
        );
    }
}
