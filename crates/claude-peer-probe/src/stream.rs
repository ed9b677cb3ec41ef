//! Reading a stream (a child's output, a growing file) within fixed bounds: lines up to a
//! limit, and the tail of a stream to quote in a failure. Memory never follows what a
//! writer writes.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::ops::ControlFlow;

/// One line of a stream read by [`LineBuffer`] or [`read_lines`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line within the limit, without its `\n` (nor a `\r` before it).
    Whole(&'a [u8]),
    /// A line longer than the limit: dropped unread, only its end is noticed.
    Overlong,
}

/// The room a [`LineBuffer`] keeps between lines: past it, one long line's room is
/// given back once the line is done, so a follower of many streams does not hold
/// megabytes each for a line it saw once.
const KEPT_ROOM: usize = 64 * 1024;

/// Splits a stream that arrives in chunks into lines of at most `max` bytes, holding at
/// most one line.
#[derive(Debug, Clone)]
pub struct LineBuffer {
    max: usize,
    line: Vec<u8>,
    overlong: bool,
}

impl LineBuffer {
    /// A buffer for lines of at most `max` bytes.
    #[must_use]
    pub const fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            overlong: false,
        }
    }

    /// Takes the next chunk, handing each line it completes to `each`.
    pub fn push(&mut self, chunk: &[u8], mut each: impl FnMut(Line<'_>)) {
        let mut rest = chunk;
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.take(&rest[..end]);
            self.end_line(&mut each);
            rest = &rest[end + 1..];
        }
        self.take(rest);
    }

    /// How many bytes of an unfinished line are held (none once it ran over the limit).
    #[must_use]
    pub fn pending(&self) -> usize {
        self.line.len()
    }

    /// The end of the stream: a last line without its `\n` is a line too.
    pub fn finish(&mut self, mut each: impl FnMut(Line<'_>)) {
        if self.overlong || !self.line.is_empty() {
            self.end_line(&mut each);
        }
    }

    fn take(&mut self, part: &[u8]) {
        if self.overlong || self.line.len() + part.len() > self.max {
            self.overlong = true;
            self.line.clear();
        } else {
            self.line.extend_from_slice(part);
        }
    }

    fn end_line(&mut self, each: &mut impl FnMut(Line<'_>)) {
        if self.overlong {
            each(Line::Overlong);
        } else {
            each(Line::Whole(
                self.line.strip_suffix(b"\r").unwrap_or(&self.line),
            ));
        }
        self.line.clear();
        self.line.shrink_to(KEPT_ROOM);
        self.overlong = false;
    }
}

/// Reads `reader` to its end (or an error), handing each line of at most `max` bytes to
/// `each` until it says [`ControlFlow::Break`].
pub fn read_lines(
    mut reader: impl Read,
    max: usize,
    mut each: impl FnMut(Line<'_>) -> ControlFlow<()>,
) -> io::Result<()> {
    let mut lines = LineBuffer::new(max);
    let mut buf = vec![0; 64 * 1024];
    let mut stopped = false;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(err),
        };
        lines.push(&buf[..n], |line| {
            if !stopped {
                stopped = each(line).is_break();
            }
        });
        if stopped {
            return Ok(());
        }
    }
    lines.finish(|line| {
        if !stopped {
            stopped = each(line).is_break();
        }
    });
    Ok(())
}

/// The last `cap` bytes of a stream; never holds more.
#[derive(Debug, Clone)]
pub struct Tail {
    bytes: VecDeque<u8>,
    cap: usize,
    cut: bool,
}

impl Tail {
    /// An empty tail keeping at most `cap` bytes.
    #[must_use]
    pub fn new(cap: usize) -> Self {
        Self {
            bytes: VecDeque::with_capacity(cap.min(1024)),
            cap,
            cut: false,
        }
    }

    /// Appends `chunk`, dropping what falls off the front.
    pub fn push(&mut self, chunk: &[u8]) {
        let chunk = if chunk.len() > self.cap {
            self.cut = true;
            self.bytes.clear();
            &chunk[chunk.len() - self.cap..]
        } else {
            chunk
        };
        let over = (self.bytes.len() + chunk.len()).saturating_sub(self.cap);
        if over > 0 {
            self.cut = true;
            self.bytes.drain(..over);
        }
        self.bytes.extend(chunk);
    }

    /// Whether bytes were dropped from the front.
    #[must_use]
    pub const fn is_cut(&self) -> bool {
        self.cut
    }

    /// The kept bytes as text; a character cut in two at the start is dropped.
    #[must_use]
    pub fn text(&self) -> String {
        let bytes: Vec<u8> = self.bytes.iter().copied().collect();
        let start = if self.cut {
            bytes
                .iter()
                .take(3)
                .take_while(|&&b| b & 0xC0 == 0x80)
                .count()
        } else {
            0
        };
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    /// `; its stderr: <text>` (or `; the last N bytes of its stderr: …` when cut) for a
    /// failure message, or nothing when it is empty.
    #[must_use]
    pub fn stderr_note(&self) -> String {
        let text = self.text();
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else if self.cut {
            format!("; the last {} bytes of its stderr: {text}", self.cap)
        } else {
            format!("; its stderr: {text}")
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_long_lines_room_is_given_back_once_it_is_done() {
        let mut lines = super::LineBuffer::new(4 << 20);
        let mut seen = Vec::new();
        lines.push(&vec![b'x'; 3 << 20], |_| {});
        assert!(lines.line.capacity() >= 3 << 20);
        lines.push(b"\nshort\n", |line| {
            if let super::Line::Whole(bytes) = line {
                seen.push(bytes.len());
            }
        });
        assert_eq!(seen, [3 << 20, 5]);
        assert!(
            lines.line.capacity() <= super::KEPT_ROOM,
            "{}",
            lines.line.capacity()
        );
    }

    use super::*;

    #[test]
    fn a_tail_keeps_only_the_last_bytes_and_drops_a_split_character() {
        let mut tail = Tail::new(4);
        tail.push(b"ab");
        tail.push(b"cd");
        assert_eq!(tail.text(), "abcd");
        assert!(!tail.cut);
        tail.push("xé".as_bytes());
        assert_eq!(tail.bytes.len(), 4);
        assert_eq!(tail.text(), "dxé");
        tail.push("0123é".as_bytes());
        assert_eq!(tail.text(), "23é");
        let mut split = Tail::new(3);
        split.push("aé€".as_bytes()); // the last three bytes are € alone
        assert_eq!(split.text(), "€");
        split.push(b"z");
        assert_eq!(
            split.text(),
            "z",
            "the two continuation bytes of € are dropped"
        );
    }

    fn lines_of(chunks: &[&[u8]], max: usize) -> Vec<Option<String>> {
        let mut buffer = LineBuffer::new(max);
        let mut seen = Vec::new();
        let mut each = |line: Line<'_>| {
            seen.push(match line {
                Line::Whole(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                Line::Overlong => None,
            });
        };
        for chunk in chunks {
            buffer.push(chunk, &mut each);
        }
        buffer.finish(&mut each);
        seen
    }

    #[test]
    fn lines_are_split_across_chunks_and_an_overlong_one_is_only_noticed() {
        assert_eq!(
            lines_of(&[b"ab\r\nc", b"d\nxxxxxxx", b"xx\nlast"], 4),
            [
                Some("ab".into()),
                Some("cd".into()),
                None,
                Some("last".into())
            ]
        );
        assert_eq!(lines_of(&[b"", b"\n"], 4), [Some(String::new())]);
    }

    #[test]
    fn read_lines_stops_when_asked() {
        let mut seen = Vec::new();
        read_lines(&b"one\ntwo\nthree\n"[..], 16, |line| {
            seen.push(line == Line::Whole(b"two"));
            if seen.len() == 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        assert_eq!(seen, [false, true]);
    }
}
