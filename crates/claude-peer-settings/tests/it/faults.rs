//! A failure or a concurrent edit injected at every step of an update.

use std::cell::Cell;
use std::ffi::OsString;
use std::fmt::Write as _;
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

    fn read_note(&self, lock: &File) -> io::Result<Vec<u8>> {
        RealFs.read_note(lock)
    }

    fn write_note(&self, lock: &File, note: &[u8]) -> io::Result<()> {
        RealFs.write_note(lock, note)
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

/// The real file system, recording the operations of an update.
#[derive(Default)]
struct RecordingFs {
    ops: std::cell::RefCell<Vec<&'static str>>,
}

impl RecordingFs {
    fn op(&self, name: &'static str) {
        self.ops.borrow_mut().push(name);
    }
}

impl SettingsFs for RecordingFs {
    type Temp = File;
    type Lock = File;

    fn load(&self, path: &Path, follow: bool) -> io::Result<Entry> {
        self.op("load");
        RealFs.load(path, follow)
    }
    fn create_dir_all(&self, dir: &Path, mode: u32) -> io::Result<()> {
        RealFs.create_dir_all(dir, mode)
    }
    fn lock(&self, path: &Path) -> io::Result<File> {
        RealFs.lock(path)
    }
    fn read_note(&self, lock: &File) -> io::Result<Vec<u8>> {
        self.op("read_note");
        RealFs.read_note(lock)
    }
    fn write_note(&self, lock: &File, note: &[u8]) -> io::Result<()> {
        self.op("write_note");
        RealFs.write_note(lock, note)
    }
    fn list_dir(&self, dir: &Path) -> io::Result<Vec<OsString>> {
        RealFs.list_dir(dir)
    }
    fn stat(&self, path: &Path) -> io::Result<Option<Stat>> {
        RealFs.stat(path)
    }
    fn create_temp(&self, path: &Path, mode: u32) -> io::Result<File> {
        self.op("create_temp");
        RealFs.create_temp(path, mode)
    }
    fn write_temp(&self, temp: &mut File, parts: &[&[u8]]) -> io::Result<()> {
        self.op("write_temp");
        RealFs.write_temp(temp, parts)
    }
    fn holds(&self, path: &Path, expected: Option<&[u8]>) -> io::Result<bool> {
        self.op("holds");
        RealFs.holds(path, expected)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.op("rename");
        RealFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.op("sync_dir");
        RealFs.sync_dir(dir)
    }
    fn remove(&self, path: &Path) -> io::Result<()> {
        self.op("remove");
        RealFs.remove(path)
    }
}

/// A settings file of about 1 MiB whose only flaw is `flaw`, deep inside a big member, with
/// `crossSessionInbound` last: an update finds the member without looking at the flaw, so only
/// the validation that runs while the temporary file is written can refuse it.
fn big_settings_with(flaw: &str) -> Vec<u8> {
    let mut doc = String::from("{\n  \"permissions\": {\n    \"allow\": [\n");
    for i in 0..14_000 {
        writeln!(doc, "      \"Bash(tool-{i:06} --flag:*)\",").unwrap();
        if i == 7_000 {
            doc.push_str(flaw);
        }
    }
    doc.push_str(
        "      \"Read(//work/**)\"\n    ]\n  },\n  \"crossSessionInbound\": \"hold\"\n}\n",
    );
    doc.into_bytes()
}

#[test]
fn a_big_invalid_document_caught_by_the_parallel_validation_is_not_written_and_leaves_no_temporary_file()
 {
    let valid = big_settings_with("");
    assert!(valid.len() > 256 * 1024);
    assert!(serde_json::from_slice::<serde_json::Value>(&valid).is_ok());
    for flaw in [
        "      tru,\n",
        "      01,\n",
        "      \"bad \\x escape\",\n",
        "      [1,,2],\n",
        "      {\"a\" 1},\n",
        "      [},\n",
        "      \"raw \u{1} control\",\n",
    ] {
        let invalid = big_settings_with(flaw);
        for recording in [false, true] {
            let (dir, path) = home_with(&invalid);
            let fs = RecordingFs::default();
            let err = if recording {
                SettingsStore::with_fs(&path, &fs).set_inbound(InboundPolicy::Refuse, None)
            } else {
                SettingsStore::new(&path).set_inbound(InboundPolicy::Refuse, None)
            }
            .unwrap_err();
            assert_eq!(err.as_str(), "invalid_json", "{flaw:?}: {err}");
            assert!(err.to_string().contains("is not valid JSON: "), "{err}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                invalid,
                "{flaw:?}: untouched"
            );
            assert!(
                temps_in(dir.path()).is_empty(),
                "{flaw:?}: no temporary file"
            );
            if recording {
                // The temporary file was written while validating, then removed, never renamed.
                assert_eq!(
                    *fs.ops.borrow(),
                    ["load", "read_note", "create_temp", "write_temp", "remove"],
                    "{flaw:?}"
                );
            }
        }
    }
    // Invalid UTF-8 inside a string is refused the same way.
    let mut invalid = valid.clone();
    let at = invalid.len() / 2;
    let quote = at + invalid[at..].iter().position(|&b| b == b'(').unwrap();
    invalid[quote] = 0xff;
    let (dir, path) = home_with(&invalid);
    let err = SettingsStore::new(&path)
        .set_inbound(InboundPolicy::Refuse, None)
        .unwrap_err();
    assert_eq!(err.as_str(), "invalid_json");
    assert!(err.to_string().contains("invalid UTF-8"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), invalid);
    assert!(temps_in(dir.path()).is_empty());
}

/// The note our writers leave in the lock file.
fn note_of(store: &SettingsStore<impl SettingsFs>) -> String {
    std::fs::read_to_string(store.lock_path()).unwrap()
}

#[test]
fn the_lock_file_notes_the_revision_written_and_another_writers_document_is_validated_again() {
    let valid = big_settings_with("");
    let (_dir, path) = home_with(&valid);
    let store = SettingsStore::new(&path);
    let written = store.set_inbound(InboundPolicy::Refuse, None).unwrap();
    assert_eq!(note_of(&store), format!("{}\n", written.revision));
    // Setting the value the file holds writes nothing and leaves the note as it was.
    store.set_inbound(InboundPolicy::Refuse, None).unwrap();
    assert_eq!(note_of(&store), format!("{}\n", written.revision));
    // An update of the noted document (not validated again) is the same minimal edit, and its
    // revision, hashed from the kept slices, is the file's.
    let back = store
        .set_inbound(InboundPolicy::Hold, Some(&written.revision))
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), valid);
    assert_eq!(back.revision, claude_peer_settings::Revision::of(&valid));
    assert_eq!(note_of(&store), format!("{}\n", back.revision));
    let written = store.set_inbound(InboundPolicy::Refuse, None).unwrap();

    // Another writer replaces the document with an invalid one of the same length: the note
    // names other bytes, so the update validates them and refuses.
    let mut invalid = std::fs::read(&path).unwrap();
    let at = invalid.len() / 2;
    let quote = at + invalid[at..].iter().position(|&b| b == b'"').unwrap();
    invalid[quote] = b'x';
    std::fs::write(&path, &invalid).unwrap();
    let err = store.set_inbound(InboundPolicy::Hold, None).unwrap_err();
    assert_eq!(err.as_str(), "invalid_json", "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), invalid);
    assert_eq!(note_of(&store), format!("{}\n", written.revision));
}

#[test]
fn a_torn_or_foreign_note_only_costs_a_full_validation() {
    let invalid = big_settings_with("      tru,\n");
    let revision = claude_peer_settings::Revision::of(&invalid);
    let torn = &revision.as_str()[..40];
    for note in [
        String::new(),
        torn.to_owned(),
        format!("{revision}"),
        format!("{revision}\n\n"),
        format!("{}\n", revision.as_str().to_uppercase()),
        "not a note at all\n".repeat(20),
    ] {
        let (_dir, path) = home_with(&invalid);
        let store = SettingsStore::new(&path);
        std::fs::write(store.lock_path(), &note).unwrap();
        let err = store.set_inbound(InboundPolicy::Hold, None).unwrap_err();
        assert_eq!(err.as_str(), "invalid_json", "{note:?}: {err}");
        assert_eq!(std::fs::read(&path).unwrap(), invalid, "{note:?}");
    }
}

#[test]
fn a_big_invalid_document_is_refused_whatever_fails_around_the_parallel_validation() {
    let invalid = big_settings_with("      tru,\n");
    for step in STEPS {
        for action in [Action::Fail, Action::ConcurrentEdit] {
            let (dir, path) = home_with(&invalid);
            let theirs = fixture("tabs.json");
            let fs = FaultFs {
                step,
                action,
                settings: path.clone(),
                their_bytes: theirs.clone(),
                loads: Cell::new(0),
            };
            let err = SettingsStore::with_fs(&path, fs)
                .set_inbound(InboundPolicy::Refuse, None)
                .unwrap_err();
            let after = std::fs::read(&path).unwrap();
            assert!(temps_in(dir.path()).is_empty(), "{step:?} {action:?}");
            // Nothing of ours is ever renamed: the file holds the old bytes or the other
            // writer's, and the error is the read failure or the invalid document.
            let want = match (step, action) {
                (Step::AfterRead, Action::Fail) => "read_failed",
                _ => "invalid_json",
            };
            assert_eq!(err.as_str(), want, "{step:?} {action:?}: {err}");
            match (step, action) {
                (Step::AfterRead | Step::AfterTempWrite, Action::ConcurrentEdit) => {
                    assert_eq!(after, theirs, "{step:?} {action:?}");
                }
                _ => assert_eq!(after, invalid, "{step:?} {action:?}"),
            }
        }
    }
}

#[test]
fn a_big_document_with_a_stale_expected_revision_is_a_conflict_and_nothing_is_written() {
    let old = big_settings_with("");
    let (dir, path) = home_with(&old);
    let store = SettingsStore::new(&path);
    let stale = store.read().unwrap().revision;
    let theirs = big_settings_with("      \"Bash(theirs)\",\n");
    std::fs::write(&path, &theirs).unwrap();
    let err = store
        .set_inbound(InboundPolicy::Refuse, Some(&stale))
        .unwrap_err();
    assert_eq!(err.as_str(), "conflict");
    assert_eq!(std::fs::read(&path).unwrap(), theirs);
    assert!(temps_in(dir.path()).is_empty());
    // With the right revision, the same update goes through and reports the new revision.
    let current = store.read().unwrap().revision;
    let after = store
        .set_inbound(InboundPolicy::Refuse, Some(&current))
        .unwrap();
    assert_eq!(after.revision, store.read().unwrap().revision);
    assert_eq!(after.inbound, Some(InboundPolicy::Refuse));
}
