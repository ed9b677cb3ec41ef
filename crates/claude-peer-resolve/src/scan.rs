use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::num::NonZero;
use std::panic;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use claude_peer_probe::{
    Census, Counting, DirStatus, FileKind, OsProcessTable, OsRegistryFs, ProcessTable, Reader,
    RecordFile, RegistryFs, SocketStatus,
};
use claude_peer_registry::{
    ClaudeHome, Contents, EntryName, Liveness, MAX_RECORD_BYTES, Pid, ProcessFacts, Record,
    Rejection, Signal, Verdict, classify_entry_name, judge,
};

use crate::Error;

/// How a live pid's record that does not parse is read again before it is judged.
///
/// Claude Code truncates and rewrites records in place, so a reader can catch one empty
/// or half written. The torn window usually lasts microseconds, but a truncate that
/// waits for the file system's journal leaves the file empty far longer: up to 432 ms
/// was measured on ext4 with records rewritten 2,000 times a second. So the record is
/// read again after growing waits: `first`, then twice the previous wait, for as long
/// as the waits add up to at most `budget` (and at most [`Rereads::MAX`] times). Only a
/// record that never parses over the whole budget is judged by the mtime rule
/// (`unreadable`, or `gone` when the pid's previous owner left it).
/// [`Rereads::DEFAULT`] waits 1, 2, 4 … 1,024 ms: 2,047 ms at most, and a record that
/// parses ends the waiting at once. Only a record that would be `unreadable` is read
/// again (a live pid's, written since its process started), so leftovers cost nothing
/// here.
///
/// ```
/// use std::time::Duration;
/// use claude_peer_resolve::Rereads;
///
/// let ms: Vec<u128> = Rereads::DEFAULT.waits().map(|w| w.as_millis()).collect();
/// assert_eq!(ms, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
/// // Tests make it fast: three rereads after 1, 2 and 4 µs.
/// let quick = Rereads::new(Duration::from_micros(1), Duration::from_micros(7));
/// assert_eq!(quick.waits().count(), 3);
/// assert_eq!(Rereads::NONE.waits().count(), 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rereads {
    first: Duration,
    budget: Duration,
}

impl Rereads {
    /// 1 ms, doubling, 2,047 ms in all.
    pub const DEFAULT: Self = Self::new(Duration::from_millis(1), Duration::from_millis(2047));
    /// No second read: the first one decides.
    pub const NONE: Self = Self::new(Duration::ZERO, Duration::ZERO);
    /// The most rereads of one record, whatever the waits (a zero `first` never grows).
    pub const MAX: usize = 16;

    /// Waits starting at `first` and doubling, adding up to at most `budget`.
    #[must_use]
    pub const fn new(first: Duration, budget: Duration) -> Self {
        Self { first, budget }
    }

    /// The waits before each reread, in order.
    pub fn waits(self) -> impl Iterator<Item = Duration> {
        let budget = self.budget;
        std::iter::successors(Some(self.first), |wait| wait.checked_mul(2))
            .scan(Duration::ZERO, move |spent, wait| {
                *spent = spent.checked_add(wait)?;
                (*spent <= budget && !budget.is_zero()).then_some(wait)
            })
            .take(Self::MAX)
    }
}

impl Default for Rereads {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Which entries a scan reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Live sessions only. Files of pids that do not answer `kill(pid, 0)` are not read.
    Live,
    /// Every `*.json` entry, each with its verdict.
    All,
}

/// Whether a live session can be messaged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addressability {
    /// A live session with its own messaging socket (this path), owned by this user.
    Addressable(PathBuf),
    /// Why it cannot be messaged.
    NotAddressable(String),
}

impl Addressability {
    /// True when the session can be messaged.
    #[must_use]
    pub const fn is_addressable(&self) -> bool {
        matches!(self, Self::Addressable(_))
    }
}

/// One registry entry and what was found about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The entry's path.
    pub file: PathBuf,
    /// The pid from the file name, when the name is a record name.
    pub pid: Option<Pid>,
    /// The record, when it parsed.
    pub record: Option<Record>,
    /// Live or not, and why.
    pub verdict: Verdict,
    /// Whether it can be messaged; only live sessions can.
    pub addressability: Addressability,
}

impl Session {
    /// True for a live session.
    #[must_use]
    pub fn is_live(&self) -> bool {
        self.verdict.liveness == Liveness::Live
    }
}

/// Something about the registry directory itself that a careful user should know.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Warning {
    /// The registry directory is a symbolic link.
    DirIsSymlink {
        /// The registry directory.
        path: PathBuf,
    },
    /// The registry directory belongs to another user.
    DirNotOwned {
        /// The registry directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This reader's uid.
        uid: u32,
    },
    /// Group or others may write the registry directory, so anyone could plant records.
    DirWritableByOthers {
        /// The registry directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

impl Warning {
    /// The stable machine name of this warning.
    #[must_use]
    pub const fn as_str(&self) -> &'static str {
        match self {
            Self::DirIsSymlink { .. } => "registry_is_symlink",
            Self::DirNotOwned { .. } => "registry_not_owned",
            Self::DirWritableByOthers { .. } => "registry_writable_by_others",
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DirIsSymlink { path } => {
                write!(
                    f,
                    "the registry directory `{}` is a symbolic link",
                    path.display()
                )
            }
            Self::DirNotOwned { path, owner, uid } => write!(
                f,
                "the registry directory `{}` belongs to uid {owner}, not to this user (uid {uid})",
                path.display()
            ),
            Self::DirWritableByOthers { path, mode } => write!(
                f,
                "the registry directory `{}` is writable by group or others (mode {mode:04o}); anyone could plant records",
                path.display()
            ),
        }
    }
}

/// The result of a scan: entries sorted by pid, and warnings about the directory.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Scan<S = Session> {
    /// Entries sorted by pid; rejected names (no pid) last, by name.
    pub sessions: Vec<S>,
    /// What is wrong with the registry directory itself.
    pub warnings: Vec<Warning>,
}

/// A scan in progress: each registry entry judged as the iterator reaches it, in
/// [`Scan::sessions`] order (records by pid, then rejected names by name). Made by
/// [`Discovery::entries`].
pub struct Entries<'d, P, F: RegistryFs> {
    discovery: &'d Discovery<P, F>,
    scope: Scope,
    dir: PathBuf,
    /// `None` when there is no registry (then there are no entries either).
    status: Option<DirStatus>,
    /// The registry directory, opened once; `None` as `status`.
    handle: Option<F::Dir>,
    reader: Reader,
    /// Which pids exist, when learning that at once was cheaper than signalling each.
    census: Option<Census>,
    warnings: Vec<Warning>,
    records: std::vec::IntoIter<(Pid, FileKind)>,
    /// Records signalled ahead, each judged on its `next()`.
    ahead: VecDeque<(Pid, FileKind, Signal)>,
    /// Records judged ahead on several threads, in order, each with its entry; a slot
    /// stays empty where the record turned out to be no entry (removed since it was
    /// listed, or not live).
    judged: std::vec::IntoIter<((Pid, FileKind, Signal), OnceLock<Session>)>,
    /// The cores to judge on, learned when first needed.
    cores: Option<usize>,
    rejected: std::vec::IntoIter<(OsString, Rejection)>,
}

impl<P, F: RegistryFs> fmt::Debug for Entries<'_, P, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entries")
            .field("dir", &self.dir)
            .field("scope", &self.scope)
            .field("records_left", &self.records.len())
            .finish_non_exhaustive()
    }
}

impl<P, F: RegistryFs> Entries<'_, P, F> {
    /// What is wrong with the registry directory itself; known before any entry.
    #[must_use]
    pub fn warnings(&self) -> &[Warning] {
        &self.warnings
    }
}

/// Records judged together, at most: the most a scan holds ahead of its caller. Large
/// enough that a scan of a few hundred live sessions starts one thread, not one per
/// small batch: waking another core can take a millisecond or two here.
const BATCH: usize = 1024;
/// Records per thread, at least, for another thread to pay for itself: a live record
/// costs about 15 µs to judge, so 128 of them take about as long as a thread can take
/// to start.
const PER_THREAD: usize = 128;

impl<P: ProcessTable, F: RegistryFs> Entries<'_, P, F> {
    /// Signals records until [`BATCH`] of them need reading (for a live-only scan, the
    /// ones alive), and judges those at once across the cores when there are enough
    /// to pay for the threads; otherwise they are judged one per `next()`. `false`
    /// when no record was left.
    fn signal_ahead(&mut self, status: DirStatus) -> bool {
        let mut any = false;
        while self.ahead.len() < BATCH {
            let Some((pid, kind)) = self.records.next() else {
                break;
            };
            any = true;
            // An entry its kind decides is never signalled.
            let signal = match &self.census {
                _ if !is_readable_kind(kind) => Signal::NoSuchProcess,
                Some(census) if !census.contains(pid) => Signal::NoSuchProcess,
                _ => self.discovery.processes.signal(pid),
            };
            if !skipped(self.scope, kind, signal) {
                self.ahead.push_back((pid, kind, signal));
            }
        }
        let cores = *self
            .cores
            .get_or_insert_with(|| thread::available_parallelism().map_or(1, NonZero::get));
        let threads = cores.min(self.ahead.len() / PER_THREAD);
        if threads > 1 {
            // Each record with the slot its entry is judged into, in place: no judged
            // entry is moved or sorted.
            let batch: Vec<_> = self
                .ahead
                .drain(..)
                .map(|record| (record, OnceLock::new()))
                .collect();
            let this = &*self;
            // Each thread takes the next unjudged record until none is left, so a thread
            // that starts late (waking another core can take milliseconds) only takes
            // fewer, and never holds the others up.
            let next = AtomicUsize::new(0);
            let judge = || {
                while let Some(&((pid, kind, signal), ref slot)) =
                    batch.get(next.fetch_add(1, Ordering::Relaxed))
                {
                    if let Some(session) = this.judge(pid, kind, signal, status) {
                        // Each record is taken once, so each slot is set once.
                        let _ = slot.set(session);
                    }
                }
            };
            thread::scope(|scope| {
                let others: Vec<_> = (1..threads).map(|_| scope.spawn(judge)).collect();
                judge();
                for other in others {
                    other
                        .join()
                        .unwrap_or_else(|panic| panic::resume_unwind(panic));
                }
            });
            self.judged = batch.into_iter();
        }
        any
    }

    fn judge(
        &self,
        pid: Pid,
        kind: FileKind,
        signal: Signal,
        status: DirStatus,
    ) -> Option<Session> {
        let at = At {
            dir: &self.dir,
            handle: self.handle.as_ref(),
        };
        self.discovery
            .judge_entry(at, pid, kind, signal, &status, &self.reader, self.scope)
    }
}

impl<P: ProcessTable, F: RegistryFs> Iterator for Entries<'_, P, F> {
    type Item = Session;

    fn next(&mut self) -> Option<Session> {
        let status = self.status?;
        loop {
            if let Some(session) = self.judged.find_map(|(_, slot)| slot.into_inner()) {
                return Some(session);
            }
            if let Some((pid, kind, signal)) = self.ahead.pop_front() {
                match self.judge(pid, kind, signal, status) {
                    Some(session) => return Some(session),
                    None => continue,
                }
            }
            if !self.signal_ahead(status) {
                break;
            }
        }
        let (name, rejection) = self.rejected.next()?;
        Some(invalid(self.dir.join(name), None, &rejection))
    }
}

/// Discovery over a process table and a registry file system.
#[derive(Debug, Clone)]
pub struct Discovery<P, F> {
    processes: P,
    fs: F,
    rereads: Rereads,
}

impl Discovery<OsProcessTable, OsRegistryFs> {
    /// Discovery on this machine's real process table and file system.
    #[must_use]
    pub fn os() -> Self {
        Self::new(OsProcessTable::new(), OsRegistryFs)
    }
}

impl<P: ProcessTable, F: RegistryFs> Discovery<P, F> {
    /// Discovery over the given probes.
    pub const fn new(processes: P, fs: F) -> Self {
        Self {
            processes,
            fs,
            rereads: Rereads::DEFAULT,
        }
    }

    /// Changes how a live pid's torn record is read again (tests use short waits).
    #[must_use]
    pub const fn with_rereads(mut self, rereads: Rereads) -> Self {
        self.rereads = rereads;
        self
    }

    /// Reads with `read` for as long as `torn` says it gave a record caught mid-rewrite,
    /// waiting as [`Rereads`] says between reads; the last read when the budget runs out.
    pub(crate) fn until_whole<T, E>(
        &self,
        mut read: impl FnMut() -> Result<T, E>,
        torn: impl Fn(&T) -> bool,
    ) -> Result<T, E> {
        let mut last = read()?;
        for wait in self.rereads.waits() {
            if !torn(&last) {
                break;
            }
            thread::sleep(wait);
            last = read()?;
        }
        Ok(last)
    }

    /// The process table.
    pub const fn processes(&self) -> &P {
        &self.processes
    }

    /// The registry file system.
    pub const fn fs(&self) -> &F {
        &self.fs
    }

    /// Reads the registry afresh and judges every entry. A registry that does not
    /// exist is an empty scan; one that exists but cannot be listed is an error.
    ///
    /// This collects [`Discovery::entries`], which hands each entry over as it is judged.
    pub fn scan(&self, home: &ClaudeHome, scope: Scope) -> Result<Scan, Error> {
        let mut entries = self.entries(home, scope)?;
        let warnings = std::mem::take(&mut entries.warnings);
        Ok(Scan {
            sessions: entries.collect(),
            warnings,
        })
    }

    /// Reads the registry afresh and judges its entries as the iterator is advanced, in
    /// the order of [`Scan::sessions`]: memory stays flat however many records the
    /// registry holds (only the names are kept, a few bytes each, to sort them, and at
    /// most 1,024 entries judged ahead). Many live records are judged together across
    /// the cores; a few, one per `next()`. Each entry is judged exactly as
    /// [`Discovery::scan`] judges it. A registry
    /// that does not exist gives no entries; one that exists but cannot be listed is an
    /// error.
    pub fn entries(&self, home: &ClaudeHome, scope: Scope) -> Result<Entries<'_, P, F>, Error> {
        let dir = home.sessions_dir();
        let registry_error = |source: io::Error| Error::Registry {
            path: dir.clone(),
            source,
        };
        let reader = self.processes.reader();
        let mut entries = Entries {
            discovery: self,
            scope,
            status: None,
            warnings: Vec::new(),
            records: Vec::new().into_iter(),
            ahead: VecDeque::new(),
            judged: Vec::new().into_iter(),
            cores: None,
            rejected: Vec::new().into_iter(),
            census: None,
            handle: None,
            reader,
            dir: dir.clone(),
        };
        let Some(status) = self.fs.dir_status(&dir).map_err(registry_error)? else {
            return Ok(entries);
        };
        let (mut records, mut rejected) = (Vec::new(), Vec::new());
        let mut classify = |name: &OsStr, kind| match classify_entry_name(name) {
            EntryName::NotARecord => {}
            EntryName::Rejected(rejection) => {
                if scope == Scope::All {
                    rejected.push((name.to_owned(), rejection));
                }
            }
            EntryName::Record(pid) => records.push((pid, kind)),
        };
        let listed = self.fs.open_dir(&dir).and_then(|handle| {
            self.fs.list(&handle, &mut classify)?;
            entries.handle = Some(handle);
            Ok(())
        });
        match listed {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(entries),
            Err(err) => return Err(registry_error(err)),
        }
        records.sort_unstable_by_key(|(pid, _)| *pid);
        rejected.sort_unstable_by(|(a, _), (b, _)| a.cmp(b));
        entries.warnings = warnings(&dir, &status, entries.reader.uid);
        entries.status = Some(status);
        // A live-only scan needs no thread ids: a thread is never a live session.
        let counting = match scope {
            Scope::Live => Counting::Processes,
            Scope::All => Counting::ProcessesAndThreads,
        };
        entries.census = self.processes.census(records.len(), counting);
        entries.records = records.into_iter();
        entries.rejected = rejected.into_iter();
        Ok(entries)
    }

    /// The one entry `<pid>.json` judged afresh, exactly as a scan would judge it;
    /// `None` when there is no such file (or the registry does not exist), or when
    /// `scope` is live-only and it is not live.
    pub fn entry(
        &self,
        home: &ClaudeHome,
        pid: Pid,
        scope: Scope,
    ) -> Result<Option<Session>, Error> {
        let dir = home.sessions_dir();
        let status = self.fs.dir_status(&dir).map_err(|source| Error::Registry {
            path: dir.clone(),
            source,
        })?;
        let Some(status) = status else {
            return Ok(None);
        };
        let reader = self.processes.reader();
        let signal = self.processes.signal(pid);
        Ok(self.judge_entry(
            At {
                dir: &dir,
                handle: None,
            },
            pid,
            FileKind::Unknown,
            signal,
            &status,
            &reader,
            scope,
        ))
    }

    /// One record entry's verdict, its pid having answered `signal`; `None` when
    /// `scope` is live-only and it is not live.
    #[allow(
        clippy::too_many_arguments,
        reason = "one entry's facts, each from the scan that lists it"
    )]
    fn judge_entry(
        &self,
        at: At<'_, F::Dir>,
        pid: Pid,
        listed_kind: FileKind,
        signal: Signal,
        dir: &DirStatus,
        reader: &Reader,
        scope: Scope,
    ) -> Option<Session> {
        let live_only = scope == Scope::Live;
        if skipped(scope, listed_kind, signal) {
            return None;
        }
        let name = format!("{pid}.json");
        if !is_readable_kind(listed_kind) {
            return Some(invalid(
                at.dir.join(name),
                Some(pid),
                &not_regular(listed_kind),
            ));
        }
        let file = at.dir.join(&name);
        let facts = if signal == Signal::Alive {
            self.processes.facts(pid, signal)
        } else {
            ProcessFacts::with_signal(signal)
        };
        let domain = reader.pid_domain.as_deref();
        let read_once = || {
            let read = self.read(at, &file, dir)?;
            Ok((Record::parse(pid, &read.bytes), read.modified))
        };
        // A live pid's record may be caught mid-rewrite: it is read again, with growing
        // waits, for as long as it would be `unreadable` (a torn file its pid's previous
        // owner left is not waited for).
        let mid_rewrite = |(parsed, modified): &(Result<Record, Rejection>, _)| {
            parsed.as_ref().is_err_and(|rejection| {
                let contents = Contents::Torn {
                    rejection,
                    modified: *modified,
                };
                rejection.is_torn()
                    && judge(contents, &facts, domain).liveness == Liveness::Unreadable
            })
        };
        let (parsed, modified) = match self.until_whole(read_once, mid_rewrite) {
            Ok(read) => read,
            // Removed since it was listed: no longer an entry.
            Err(None) => return None,
            Err(Some(verdict)) => {
                return (!live_only).then(|| Session::unlisted(file, Some(pid), None, verdict));
            }
        };
        let (contents, record) = match &parsed {
            Ok(record) => (Contents::Parsed(record), Some(record)),
            Err(rejection) if rejection.is_torn() => (
                Contents::Torn {
                    rejection,
                    modified,
                },
                None,
            ),
            Err(rejection) => (Contents::Rejected(rejection), None),
        };
        let verdict = judge(contents, &facts, domain);
        if live_only && verdict.liveness != Liveness::Live {
            return None;
        }
        let addressability = match record {
            Some(record) if verdict.liveness == Liveness::Live => {
                self.addressability(record, reader.uid)
            }
            _ => Addressability::NotAddressable(format!("not live ({})", verdict.liveness)),
        };
        Some(Session {
            file,
            pid: Some(pid),
            record: parsed.ok(),
            verdict,
            addressability,
        })
    }

    /// Reads a record file, turning what is not a readable regular file of the
    /// registry's owner into its verdict; `Err(None)` when the file does not exist.
    fn read(
        &self,
        at: At<'_, F::Dir>,
        file: &Path,
        dir: &DirStatus,
    ) -> Result<RecordFile, Option<Verdict>> {
        let read = match (at.handle, file.file_name()) {
            (Some(handle), Some(name)) => self.fs.read_record_in(handle, name),
            _ => self.fs.read_record(file),
        };
        let read = read.map_err(|err| {
            (err.kind() != io::ErrorKind::NotFound).then(|| Verdict {
                liveness: Liveness::Unreadable,
                reason: Some(format!("cannot read `{}`: {err}", file.display())),
            })
        })?;
        let rejection = if read.kind != FileKind::Regular {
            Some(not_regular(read.kind))
        } else if read.owner != dir.owner {
            Some(Rejection::OwnerMismatch {
                owner: read.owner,
                expected: dir.owner,
            })
        } else if read.size > MAX_RECORD_BYTES as u64 {
            Some(Rejection::TooLarge)
        } else {
            None
        };
        match rejection {
            Some(rejection) => Err(Some(invalid_verdict(&rejection))),
            None => Ok(read),
        }
    }

    /// Whether a live record can be messaged: its own socket, owned by this user, and
    /// not a spare or parked process. The socket is looked at with `lstat` only.
    pub(crate) fn addressability(&self, record: &Record, uid: u32) -> Addressability {
        use Addressability::NotAddressable;
        if record.spare {
            return NotAddressable("a pre-warmed spare process, not a user session".into());
        }
        if let Some(job) = &record.parked_job_id {
            return NotAddressable(format!("parked as background job {job}"));
        }
        let Some(socket) = &record.messaging_socket_path else {
            return NotAddressable(
                "its record names no messaging socket (Claude Code before peer messaging)".into(),
            );
        };
        match self.fs.socket_status(Path::new(socket)) {
            Ok(SocketStatus::Missing) => {
                NotAddressable(format!("its messaging socket `{socket}` does not exist"))
            }
            Ok(SocketStatus::Present {
                kind: FileKind::Socket,
                owner,
            }) if owner == uid => Addressability::Addressable(PathBuf::from(socket)),
            Ok(SocketStatus::Present {
                kind: FileKind::Socket,
                owner,
            }) => NotAddressable(format!(
                "its messaging socket `{socket}` belongs to uid {owner}, not to this user (uid {uid})"
            )),
            Ok(SocketStatus::Present { kind, .. }) => {
                NotAddressable(format!("`{socket}` is a {}, not a socket", kind.as_str()))
            }
            Err(err) => NotAddressable(format!(
                "cannot look at its messaging socket `{socket}`: {err}"
            )),
        }
    }
}

/// Where a record is: its registry directory, and that directory's handle when a scan
/// opened one.
struct At<'a, D> {
    dir: &'a Path,
    handle: Option<&'a D>,
}

// Two references: copied whatever `D` is (a derive would ask `D: Copy`).
impl<D> Clone for At<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for At<'_, D> {}

impl Session {
    fn unlisted(file: PathBuf, pid: Option<Pid>, record: Option<Record>, verdict: Verdict) -> Self {
        let addressability =
            Addressability::NotAddressable(format!("not live ({})", verdict.liveness));
        Self {
            file,
            pid,
            record,
            verdict,
            addressability,
        }
    }
}

fn invalid(file: PathBuf, pid: Option<Pid>, rejection: &Rejection) -> Session {
    Session::unlisted(file, pid, None, invalid_verdict(rejection))
}

/// The verdict on a rejected entry, which no fact about its pid can change.
fn invalid_verdict(rejection: &Rejection) -> Verdict {
    judge(Contents::Rejected(rejection), &ProcessFacts::gone(), None)
}

/// Whether an entry listed as `kind` may be a record: a regular file, or one whose
/// kind the listing did not say (opening it tells).
const fn is_readable_kind(kind: FileKind) -> bool {
    matches!(kind, FileKind::Regular | FileKind::Unknown)
}

/// Whether a scan of `scope` leaves the entry out without reading it: a live-only scan
/// reports live sessions, and nothing but a regular file of a live pid can be one.
fn skipped(scope: Scope, kind: FileKind, signal: Signal) -> bool {
    scope == Scope::Live && (!is_readable_kind(kind) || signal != Signal::Alive)
}

fn not_regular(kind: FileKind) -> Rejection {
    Rejection::NotRegularFile {
        file_type: kind.as_str().to_owned(),
    }
}

fn warnings(dir: &Path, status: &DirStatus, uid: u32) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if status.kind == FileKind::Symlink {
        warnings.push(Warning::DirIsSymlink {
            path: dir.to_owned(),
        });
    }
    if status.owner != uid {
        warnings.push(Warning::DirNotOwned {
            path: dir.to_owned(),
            owner: status.owner,
            uid,
        });
    }
    if status.kind == FileKind::Directory && status.mode & 0o022 != 0 {
        warnings.push(Warning::DirWritableByOthers {
            path: dir.to_owned(),
            mode: status.mode,
        });
    }
    warnings
}
