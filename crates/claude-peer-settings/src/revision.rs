//! Revisions: the blake3 hash of a settings file's exact bytes, and the hash of an edited big
//! document that re-hashes only what the edit moved.

use std::fmt;
use std::str::FromStr;

use blake3::Hasher;
use blake3::hazmat::{self, ChainingValue, HasherExt as _, Mode};
use serde::{Deserialize, Serialize};

use crate::Error;

/// The blake3 hash (64 lower-case hex digits) of a settings file's exact bytes; a missing
/// file has the revision of empty bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Revision(String);

impl Revision {
    /// The revision of `bytes`.
    #[must_use]
    pub fn of(bytes: &[u8]) -> Revision {
        Revision::from_hash(blake3::hash(bytes))
    }

    fn from_hash(hash: blake3::Hash) -> Revision {
        Revision(hash.to_hex().to_string())
    }

    /// The 64 hex digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Revision {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            Ok(Revision(s.to_owned()))
        } else {
            Err(Error::InvalidRevision {
                value: s.to_owned(),
            })
        }
    }
}

impl TryFrom<String> for Revision {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        s.parse()
    }
}

impl From<Revision> for String {
    fn from(r: Revision) -> String {
        r.0
    }
}

/// The size of the slices a big document is hashed in: 64 chunks, a power of two, so every
/// whole slice is a subtree of the BLAKE3 tree of any longer input, and big enough for the
/// SIMD hashing of many chunks at once.
const SLICE_LEN: usize = 64 * blake3::CHUNK_LEN;

/// A document's revision, with the chaining values of its whole slices: the revision of an
/// edit of it reuses those of the slices before the edit instead of hashing them again.
#[derive(Debug, Clone)]
pub(crate) struct Hashed {
    /// The document's revision.
    pub(crate) revision: Revision,
    /// The chaining value of each whole slice of a document longer than one slice.
    slices: Vec<ChainingValue>,
}

impl Hashed {
    /// Hashes `bytes`.
    pub(crate) fn new(bytes: &[u8]) -> Hashed {
        let slices = if bytes.len() > SLICE_LEN {
            (0..bytes.len() / SLICE_LEN)
                .map(|i| slice_cv(&[bytes], i * SLICE_LEN, SLICE_LEN))
                .collect()
        } else {
            Vec::new()
        };
        let revision = root(&[bytes], bytes.len(), &slices);
        Hashed { revision, slices }
    }

    /// The revision of the concatenation of `parts`, whose first `kept` bytes are the first
    /// `kept` bytes of the document hashed.
    pub(crate) fn edited(&self, parts: &[&[u8]], kept: usize) -> Revision {
        let len = parts.iter().map(|p| p.len()).sum();
        let reusable = self.slices.get(..kept / SLICE_LEN).unwrap_or(&self.slices);
        root(parts, len, reusable)
    }
}

/// The revision of the `len` bytes of `parts`; `known` holds the chaining values of their
/// first whole slices.
fn root(parts: &[&[u8]], len: usize, known: &[ChainingValue]) -> Revision {
    if len <= SLICE_LEN {
        let mut hasher = Hasher::new();
        for part in parts {
            hasher.update(part);
        }
        return Revision::from_hash(hasher.finalize());
    }
    let left = left_len(len);
    Revision::from_hash(hazmat::merge_subtrees_root(
        &subtree_cv(parts, 0, left, known),
        &subtree_cv(parts, left, len - left, known),
        Mode::Hash,
    ))
}

/// The split of a subtree of more than one slice: its left subtree, a power of two of at least
/// one slice, so offsets in the recursion stay slice-aligned.
fn left_len(len: usize) -> usize {
    len.div_ceil(2).next_power_of_two()
}

/// The chaining value of the subtree of `len` bytes at `offset`, an offset that is a multiple
/// of its power-of-two size (as BLAKE3's left-complete tree places every subtree).
fn subtree_cv(
    parts: &[&[u8]],
    offset: usize,
    len: usize,
    known: &[ChainingValue],
) -> ChainingValue {
    if len > SLICE_LEN {
        let left = left_len(len);
        return hazmat::merge_subtrees_non_root(
            &subtree_cv(parts, offset, left, known),
            &subtree_cv(parts, offset + left, len - left, known),
            Mode::Hash,
        );
    }
    match known.get(offset / SLICE_LEN) {
        Some(cv) if len == SLICE_LEN => *cv,
        _ => slice_cv(parts, offset, len),
    }
}

/// The chaining value of the `len` bytes of `parts` at `offset` (one slice, or the final
/// shorter one), hashed.
fn slice_cv(parts: &[&[u8]], offset: usize, len: usize) -> ChainingValue {
    let mut hasher = Hasher::new();
    hasher.set_input_offset(offset as u64);
    let (end, mut at) = (offset + len, 0);
    for part in parts {
        let (from, to) = (offset.max(at), end.min(at + part.len()));
        if let Some(bytes) = part.get(from.saturating_sub(at)..to.saturating_sub(at))
            && from < to
        {
            hasher.update(bytes);
        }
        at += part.len();
    }
    hasher.finalize_non_root()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_revision_is_the_blake3_hex_of_the_bytes_and_parses_back() {
        let r = Revision::of(b"");
        assert_eq!(
            r.as_str(),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(r.as_str().parse::<Revision>().unwrap(), r);
        assert_eq!(
            "AF13".parse::<Revision>().unwrap_err().as_str(),
            "invalid_revision"
        );
    }

    /// `len` bytes that differ from slice to slice and from seed to seed.
    fn bytes(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i.wrapping_mul(31) ^ (i >> 10)) as u8 ^ seed)
            .collect()
    }

    /// Lengths around every boundary the tree has: chunks, slices, powers of two of slices.
    fn interesting_len() -> impl Strategy<Value = usize> {
        let c = blake3::CHUNK_LEN;
        prop_oneof![
            0..3 * c,
            prop::sample::select(vec![
                SLICE_LEN - 1,
                SLICE_LEN,
                SLICE_LEN + 1,
                2 * SLICE_LEN,
                2 * SLICE_LEN + c,
                4 * SLICE_LEN - 1,
                5 * SLICE_LEN,
                16 * SLICE_LEN + 7,
            ]),
            SLICE_LEN..9 * SLICE_LEN,
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        #[test]
        fn a_hashed_document_has_blake3s_revision(len in interesting_len(), seed: u8) {
            let doc = bytes(len, seed);
            prop_assert_eq!(Hashed::new(&doc).revision, Revision::of(&doc));
        }

        #[test]
        fn an_edit_reusing_the_kept_slices_has_the_revision_of_its_bytes(
            len in interesting_len(),
            start: prop::sample::Index,
            removed in 0usize..3 * SLICE_LEN,
            inserted in prop_oneof![0usize..40, 0usize..2 * SLICE_LEN],
            seed: u8,
        ) {
            let doc = bytes(len, seed);
            let start = start.index(len + 1);
            let end = (start + removed).min(len);
            let insert = bytes(inserted, seed.wrapping_add(1));
            let parts = [&doc[..start], &insert[..], &doc[end..]];
            let edited = Hashed::new(&doc).edited(&parts, start);
            prop_assert_eq!(edited, Revision::of(&parts.concat()));
        }
    }
}
