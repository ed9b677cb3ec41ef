//! Setting and removing a top-level member: each computes one [`Splice`] of the original
//! bytes, the smallest change that gives the edited document.

use serde_json::Value;

use super::{Doc, Member, Splice};

impl Doc<'_> {
    /// Sets top-level `key` to `value` with the smallest byte change; `None` when the member
    /// already holds an equal value (nothing to write). With duplicate keys the last
    /// occurrence (the one JSON.parse honours) is edited.
    pub(crate) fn set(&self, key: &str, value: &Value) -> Option<Splice> {
        if let Some(m) = self.last(key) {
            let raw = self.span(m.value_start, m.value_end);
            if serde_json::from_slice::<Value>(raw).is_ok_and(|old| &old == value) {
                return None;
            }
            let rendered = self.style_of(m).render(value);
            return Some(Splice::new(m.value_start, m.value_end, rendered));
        }
        let style = self
            .members
            .last()
            .map_or_else(|| self.default_style(), |last| self.style_of(last));
        let newline = style.pretty.as_ref().map(|(nl, _)| nl.as_slice());
        let newline = newline.unwrap_or_default();
        let member = [
            &style.lead[..],
            &serde_json::to_vec(key).unwrap_or_default(),
            &style.colon,
            &style.render(value),
        ]
        .concat();
        Some(match (self.braces, self.members.last()) {
            // Appended after the last member, copying that member's layout.
            (Some(_), Some(last)) => {
                Splice::new(last.value_end, last.value_end, [b",", &member[..]].concat())
            }
            // `{` ws `}`: right after `{`; an empty `{}` also gets a newline before `}`, as
            // JSON.stringify(v, null, 2) writes it.
            (Some((open, close)), None) => {
                let before_close = if close == open + 1 { newline } else { &[] };
                Splice::new(open + 1, open + 1, [&member[..], before_close].concat())
            }
            // Empty or whitespace-only file: a fresh document with a final newline.
            (None, _) => {
                let doc = [b"{", &member[..], newline, b"}", newline].concat();
                Splice::new(0, self.bytes.len(), doc)
            }
        })
    }

    /// Removes every top-level occurrence of `key` (so that the key is truly unset); `None`
    /// when it is absent. Removing a member appended by [`Doc::set`] gives back the original
    /// bytes.
    pub(crate) fn remove(&self, key: &str) -> Option<Splice> {
        let members = &self.members;
        let first = members.iter().position(|m| m.key == key)?;
        let (open, close) = self.braces?;
        // The members from `tail` on all go; each one before it that goes has a next member.
        let tail = members
            .iter()
            .rposition(|m| m.key != key)
            .map_or(0, |k| k + 1);
        // The byte ranges that go, in order. A member followed by another goes with its comma
        // and the whitespace up to the next key, which takes over its indentation.
        let mut cut: Vec<(usize, usize)> = (first..tail)
            .filter(|&i| members[i].key == key)
            .map(|i| (members[i].key_start, members[i + 1].key_start))
            .collect();
        if let Some(last) = members.get(tail..).and_then(<[Member]>::last) {
            cut.push(if let Some(kept) = tail.checked_sub(1) {
                // The last ones: from the end of the value kept before them, comma included.
                (members[kept].value_end, last.value_end)
            } else {
                // Every member: the whitespace an insertion into `{}` gave goes too.
                let lead = self.span(open + 1, members[0].key_start);
                let after = self.span(last.value_end, close);
                let inserted = [&b"\n"[..], b"\r\n"].into_iter().any(|nl| {
                    after == nl
                        && lead
                            .strip_prefix(nl)
                            .is_some_and(|rest| rest.iter().all(|&b| b == b' ' || b == b'\t'))
                });
                (open + 1, if inserted { close } else { last.value_end })
            });
        }
        let (start, end) = (cut.first()?.0, cut.last()?.1);
        let mut insert = Vec::new();
        for pair in cut.windows(2) {
            insert.extend_from_slice(self.span(pair[0].1, pair[1].0));
        }
        Some(Splice::new(start, end, insert))
    }
}
