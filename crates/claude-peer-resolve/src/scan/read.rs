//! Reading one record file: within the limits, and again while it is caught mid-rewrite.
//!
//! A record is read relative to the registry handle a scan opened (by path for a single
//! entry), and only a regular file of the registry's owner within `MAX_RECORD_BYTES` is
//! handed over to be parsed: what the file is, not what it holds, decides the verdict on
//! anything else, so such a file is never parsed. Claude Code rewrites records in place,
//! so a live pid's torn record is read again after the waits [`Rereads`] gives.

use std::io;
use std::path::Path;
use std::thread;
use std::time::Duration;

use claude_peer_probe::{DirStatus, FileKind, RecordFile, RegistryFs};
use claude_peer_registry::{MAX_RECORD_BYTES, Rejection};

use crate::Discovery;

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

/// Why a record file gave no bytes to parse: facts for `judge`, which no contents can
/// change.
#[derive(Debug)]
pub(super) enum Unread {
    /// There is no such file (removed since it was listed): no longer an entry.
    Missing,
    /// It is not a regular file, belongs to another owner than the registry or is too
    /// large.
    Rejected(Rejection),
    /// It could not be read.
    Failed(io::Error),
}

/// Where a record is: its registry directory, and that directory's handle when a scan
/// opened one.
pub(super) struct At<'a, D> {
    pub(super) dir: &'a Path,
    pub(super) handle: Option<&'a D>,
}

// Two references: copied whatever `D` is (a derive would ask `D: Copy`).
impl<D> Clone for At<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D> Copy for At<'_, D> {}

impl<P, F: RegistryFs> Discovery<P, F> {
    /// Reads with `read` for as long as `torn` says it gave a record caught mid-rewrite,
    /// waiting as [`Rereads`] says between reads; the last read when the budget runs out.
    pub(super) fn until_whole<T, E>(
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

    /// Reads a record file, when it is a regular file of the registry's owner within
    /// the size limit; its verdict otherwise, or that it is missing.
    pub(super) fn read_checked(
        &self,
        at: At<'_, F::Dir>,
        file: &Path,
        dir: &DirStatus,
    ) -> Result<RecordFile, Unread> {
        let read = match (at.handle, file.file_name()) {
            (Some(handle), Some(name)) => self.fs.read_record_in(handle, name),
            _ => self.fs.read_record(file),
        };
        let read = read.map_err(|err| {
            if err.kind() == io::ErrorKind::NotFound {
                Unread::Missing
            } else {
                Unread::Failed(err)
            }
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
            Some(rejection) => Err(Unread::Rejected(rejection)),
            None => Ok(read),
        }
    }
}

/// The rejection of an entry that is not a regular file.
pub(super) fn not_regular(kind: FileKind) -> Rejection {
    Rejection::NotRegularFile {
        file_type: kind.as_str().to_owned(),
    }
}
