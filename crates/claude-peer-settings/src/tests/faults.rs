//! A failure or a concurrent edit injected at every step of an update.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use claude_peer_probe::Links;
use serde_json::json;

use super::{fixture, home_with, temps_in};
use crate::fs::{Fs, Loaded, RealFs};
use crate::policy::INBOUND_KEY;
use crate::store::update;
use crate::{Error, Revision, SettingsStore};

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
    loads: AtomicU32,
}

impl FaultFs {
    fn new(step: Step, action: Action, settings: &Path) -> FaultFs {
        FaultFs {
            step,
            action,
            settings: settings.to_owned(),
            their_bytes: fixture("tabs.json"),
            loads: AtomicU32::new(0),
        }
    }

    fn injected() -> io::Error {
        io::Error::other("injected fault")
    }

    fn concurrent_edit(&self) {
        std::fs::write(&self.settings, &self.their_bytes).unwrap();
    }

    fn at(&self, step: Step) -> Option<Action> {
        (self.step == step).then_some(self.action)
    }

    /// The fault, if `step` is its step: a failure, or the other writer's edit.
    fn inject(&self, step: Step) -> io::Result<()> {
        match self.at(step) {
            Some(Action::Fail) => Err(Self::injected()),
            Some(Action::ConcurrentEdit) => {
                self.concurrent_edit();
                Ok(())
            }
            None => Ok(()),
        }
    }
}

impl Fs for FaultFs {
    fn load(&self, path: &Path, links: Links) -> Result<Option<Loaded>, Error> {
        if self.loads.fetch_add(1, Ordering::Relaxed) == 1
            && self.at(Step::BeforeRename) == Some(Action::ConcurrentEdit)
        {
            // Just before the comparison that immediately precedes the rename.
            self.concurrent_edit();
        }
        let loaded = RealFs.load(path, links)?;
        if self.loads.load(Ordering::Relaxed) == 1 {
            self.inject(Step::AfterRead).map_err(|source| Error::Read {
                path: path.to_owned(),
                source,
            })?;
        }
        Ok(loaded)
    }

    fn lock(&self, path: &Path) -> io::Result<std::fs::File> {
        RealFs.lock(path)
    }

    fn write_temp(&self, path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
        RealFs.write_temp(path, mode, bytes)?;
        self.inject(Step::AfterTempWrite)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        if self.at(Step::BeforeRename) == Some(Action::Fail) {
            return Err(Self::injected());
        }
        RealFs.rename(from, to)?;
        self.inject(Step::AfterRename)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        self.inject(Step::BeforeDirSync)?;
        RealFs.sync_dir(dir)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        RealFs.remove(path)
    }
}

/// What one faulty update gave: the result's error name (or `ok`), the bytes before, the
/// bytes our update would write, the other writer's bytes, and the bytes afterwards.
struct Outcome {
    name: &'static str,
    old: Vec<u8>,
    new: Vec<u8>,
    theirs: Vec<u8>,
    after: Vec<u8>,
}

/// Runs one update of `old` (setting `refuse`, as a compare-and-swap) with the fault.
fn run(old: &[u8], step: Step, action: Action) -> Outcome {
    let (dir, path) = home_with(old);

    let (_reference, reference_path) = home_with(old);
    // What our update writes (nothing, for an invalid document).
    let _ = SettingsStore::new(&reference_path).set_inbound(crate::InboundPolicy::Refuse, None);
    let new = std::fs::read(&reference_path).unwrap();

    let fs = FaultFs::new(step, action, &path);
    let expected = Revision::of(old);
    let result = update(&fs, &path, Some(&expected), |doc| {
        doc.set(INBOUND_KEY, &json!("refuse"))
    });
    let after = std::fs::read(&path).unwrap();
    assert!(
        temps_in(dir.path()).is_empty(),
        "{step:?} {action:?}: no temporary file remains"
    );
    if let Ok((_, revision)) = &result {
        assert_eq!(revision, &Revision::of(&new), "{step:?} {action:?}");
    }
    Outcome {
        name: result.map_or_else(|e| e.as_str(), |_| "ok"),
        old: old.to_vec(),
        new,
        theirs: fs.their_bytes,
        after,
    }
}

/// Each step, with a settings file of Claude Code's size and one of about 1 MiB.
fn every_step_on_a_small_and_a_big_document() -> impl Iterator<Item = (Step, Vec<u8>)> {
    STEPS
        .into_iter()
        .flat_map(|s| [(s, fixture("pretty.json")), (s, big_settings_with(""))])
}

#[test]
fn a_failure_at_any_step_leaves_exactly_the_old_or_the_new_bytes_and_no_temporary_file() {
    for (step, old) in every_step_on_a_small_and_a_big_document() {
        let o = run(&old, step, Action::Fail);
        let (want_name, want_bytes) = match step {
            Step::AfterRead => ("read_failed", &o.old),
            Step::AfterTempWrite | Step::BeforeRename => ("write_failed", &o.old),
            Step::AfterRename => ("write_failed", &o.new),
            Step::BeforeDirSync => ("not_durable", &o.new),
        };
        assert_eq!(o.name, want_name, "{step:?}");
        assert!(
            o.after == o.old || o.after == o.new,
            "{step:?}: old or new bytes, nothing else"
        );
        assert_eq!(&o.after, want_bytes, "{step:?}");
    }
}

#[test]
fn a_concurrent_edit_at_any_step_is_a_conflict_or_comes_after_ours_and_is_never_lost() {
    for (step, old) in every_step_on_a_small_and_a_big_document() {
        let o = run(&old, step, Action::ConcurrentEdit);
        let want_name = match step {
            Step::AfterRead | Step::AfterTempWrite | Step::BeforeRename => "conflict",
            Step::AfterRename | Step::BeforeDirSync => "ok",
        };
        assert_eq!(o.name, want_name, "{step:?}");
        assert_eq!(
            o.after, o.theirs,
            "{step:?}: the other writer's edit is what the file holds"
        );
    }
}

/// A settings file of about 1 MiB whose only flaw is `flaw`, deep inside a big member, with
/// `crossSessionInbound` last.
fn big_settings_with(flaw: &str) -> Vec<u8> {
    use std::fmt::Write as _;
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
fn a_big_invalid_document_is_refused_whatever_fails_around_its_read() {
    let invalid = big_settings_with("      tru,\n");
    for step in STEPS {
        for action in [Action::Fail, Action::ConcurrentEdit] {
            let o = run(&invalid, step, action);
            // Nothing of ours is ever renamed: the file holds the old bytes or the other
            // writer's, and the error is the read failure or the invalid document.
            let want = match (step, action) {
                (Step::AfterRead, Action::Fail) => "read_failed",
                _ => "invalid_json",
            };
            assert_eq!(o.name, want, "{step:?} {action:?}");
            let want_bytes = match (step, action) {
                (Step::AfterRead, Action::ConcurrentEdit) => &o.theirs,
                _ => &o.old,
            };
            assert_eq!(&o.after, want_bytes, "{step:?} {action:?}");
        }
    }
}

/// The real file system, recording the operations of an update.
#[derive(Default)]
struct RecordingFs {
    ops: Mutex<Vec<&'static str>>,
}

impl RecordingFs {
    fn op(&self, name: &'static str) {
        self.ops.lock().unwrap().push(name);
    }
}

impl Fs for RecordingFs {
    fn load(&self, path: &Path, links: Links) -> Result<Option<Loaded>, Error> {
        self.op("load");
        RealFs.load(path, links)
    }
    fn lock(&self, path: &Path) -> io::Result<std::fs::File> {
        self.op("lock");
        RealFs.lock(path)
    }
    fn write_temp(&self, path: &Path, mode: u32, bytes: &[u8]) -> io::Result<()> {
        self.op("write_temp");
        RealFs.write_temp(path, mode, bytes)
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

#[test]
fn an_update_takes_its_steps_in_order_and_an_invalid_document_stops_it_before_any_write() {
    let (_dir, path) = home_with(&fixture("pretty.json"));
    let fs = RecordingFs::default();
    update(&fs, &path, None, |doc| doc.set(INBOUND_KEY, &json!("hold"))).unwrap();
    assert_eq!(
        *fs.ops.lock().unwrap(),
        ["lock", "load", "write_temp", "load", "rename", "sync_dir"]
    );

    let valid = big_settings_with("");
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
        let (dir, path) = home_with(&invalid);
        let fs = RecordingFs::default();
        let err = update(&fs, &path, None, |doc| {
            doc.set(INBOUND_KEY, &json!("refuse"))
        })
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
        assert_eq!(*fs.ops.lock().unwrap(), ["lock", "load"], "{flaw:?}");
    }
    // Invalid UTF-8 inside a string is refused the same way.
    let mut invalid = valid.clone();
    let at = invalid.len() / 2;
    let paren = at + invalid[at..].iter().position(|&b| b == b'(').unwrap();
    invalid[paren] = 0xff;
    let (dir, path) = home_with(&invalid);
    let err = SettingsStore::new(&path)
        .set_inbound(crate::InboundPolicy::Refuse, None)
        .unwrap_err();
    assert_eq!(err.as_str(), "invalid_json");
    assert!(err.to_string().contains("invalid UTF-8"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), invalid);
    assert!(temps_in(dir.path()).is_empty());
}
