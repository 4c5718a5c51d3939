//! Page-number collections. `PageSet`, an ordered set of page numbers as a two-level bitmap,
//! is the index of reusable free runs by first page (`alloc.rs`): insert and remove are a bit
//! flip each; finding the lowest member scans from a low-water mark, so that taking pages from
//! the lowest run costs no search-tree descent per page. `PageMap` is a hash map keyed by page
//! number (the dirty pages of a write transaction, the allocator's pending groups).
//!
//! Invariants:
//! - Bit `p % 64` of `words[p / 64]` is set iff `p` is a member; bit `w % 64` of
//!   `summary[w / 64]` is set iff `words[w]` is non-zero.
//! - No member lies in a summary word below `low`.
//! - Memory is one bit per page up to the largest member ever inserted (members are run
//!   starts, below the file's high-water mark, which the file's length bounds).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// An ordered set of page numbers.
#[derive(Default, Clone, Debug)]
pub(crate) struct PageSet {
    words: Vec<u64>,
    summary: Vec<u64>,
    low: usize,
}

impl PageSet {
    /// Adds `p`.
    pub fn insert(&mut self, p: u64) {
        let w = (p / 64) as usize;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
            self.summary.resize(self.words.len().div_ceil(64), 0);
        }
        if self.words[w] == 0 {
            self.summary[w / 64] |= 1 << (w % 64);
        }
        self.words[w] |= 1 << (p % 64);
        self.low = self.low.min(w / 64);
    }

    /// Removes `p` (nothing if absent).
    pub fn remove(&mut self, p: u64) {
        let w = (p / 64) as usize;
        if let Some(word) = self.words.get_mut(w) {
            *word &= !(1 << (p % 64));
            if *word == 0 {
                self.summary[w / 64] &= !(1 << (w % 64));
            }
        }
    }

    /// The lowest member; moves the low-water mark past the empty summary words it skipped.
    pub fn first(&mut self) -> Option<u64> {
        while self.summary.get(self.low) == Some(&0) {
            self.low += 1;
        }
        let s = *self.summary.get(self.low)?;
        let w = self.low * 64 + s.trailing_zeros() as usize;
        Some(w as u64 * 64 + u64::from(self.words[w].trailing_zeros()))
    }

    /// The lowest member at or after `from`.
    pub fn next_from(&self, from: u64) -> Option<u64> {
        let w = (from / 64) as usize;
        let here = *self.words.get(w)? & (!0u64 << (from % 64));
        if here != 0 {
            return Some(w as u64 * 64 + u64::from(here.trailing_zeros()));
        }
        // The next non-empty word, through the summary.
        let w = w + 1;
        let mut s = w / 64;
        let mut bits = *self.summary.get(s)? & (!0u64 << (w % 64));
        while bits == 0 {
            s += 1;
            bits = *self.summary.get(s)?;
        }
        let w = s * 64 + bits.trailing_zeros() as usize;
        Some(w as u64 * 64 + u64::from(self.words[w].trailing_zeros()))
    }

    /// The highest member below `x`. Scans down from `x` and stops at the low-water mark: a
    /// bit test per word, a summary word per 4,096 pages between `x` and the member found.
    pub fn last_before(&self, x: u64) -> Option<u64> {
        let p = x.checked_sub(1)?;
        let last = self.words.len().checked_sub(1)?;
        let (w, bits) = match usize::try_from(p / 64) {
            Ok(w) if w <= last => (w, self.words[w] & (!0u64 >> (63 - p % 64))),
            _ => (last, self.words[last]),
        };
        if bits != 0 {
            return Some(w as u64 * 64 + u64::from(63 - bits.leading_zeros()));
        }
        // The previous non-empty word, through the summary.
        let w = w.checked_sub(1)?;
        let mut s = w / 64;
        let mut sb = self.summary[s] & (!0u64 >> (63 - w % 64));
        while sb == 0 {
            if s <= self.low {
                return None;
            }
            s -= 1;
            sb = self.summary[s];
        }
        let w = s * 64 + (63 - sb.leading_zeros()) as usize;
        Some(w as u64 * 64 + u64::from(63 - self.words[w].leading_zeros()))
    }

    /// Members in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut at = self.next_from(0);
        std::iter::from_fn(move || {
            let p = at?;
            at = self.next_from(p + 1);
            Some(p)
        })
    }
}

/// A hasher for page numbers (they are already well spread; SipHash would dominate lookups).
#[derive(Default)]
pub(crate) struct PgnoHasher(u64);
impl Hasher for PgnoHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}
/// A map keyed by page number.
pub(crate) type PageMap<V> = HashMap<u64, V, BuildHasherDefault<PgnoHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u64),
        Remove(u64),
        First,
        NextFrom(u64),
        LastBefore(u64),
    }

    fn op(range: u64) -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..range).prop_map(Op::Insert),
            (0..range).prop_map(Op::Remove),
            Just(Op::First),
            (0..range + 100).prop_map(Op::NextFrom),
            (0..range + 100).prop_map(Op::LastBefore),
        ]
    }

    proptest! {
        /// Model-based: every answer as a `BTreeSet`'s, over dense and sparse page ranges.
        #[test]
        fn behaves_like_a_btreeset(
            ops in prop::collection::vec(op(300), 0..400),
            wide in prop::collection::vec(op(300_000), 0..200),
        ) {
            for ops in [ops, wide] {
                let mut s = PageSet::default();
                let mut m = BTreeSet::new();
                for o in ops {
                    match o {
                        Op::Insert(p) => {
                            s.insert(p);
                            m.insert(p);
                        }
                        Op::Remove(p) => {
                            s.remove(p);
                            m.remove(&p);
                        }
                        Op::First => prop_assert_eq!(s.first(), m.first().copied()),
                        Op::NextFrom(p) => {
                            prop_assert_eq!(s.next_from(p), m.range(p..).next().copied())
                        }
                        Op::LastBefore(p) => {
                            prop_assert_eq!(s.last_before(p), m.range(..p).next_back().copied())
                        }
                    }
                }
                prop_assert_eq!(s.iter().collect::<Vec<_>>(), m.iter().copied().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn word_and_summary_edges() {
        let mut s = PageSet::default();
        for p in [63, 64, 4095, 4096, 4097, 262_143, 262_144] {
            s.insert(p);
        }
        assert_eq!(s.next_from(0), Some(63));
        assert_eq!(s.next_from(65), Some(4095));
        assert_eq!(s.next_from(4098), Some(262_143));
        assert_eq!(s.next_from(262_145), None);
        assert_eq!(s.last_before(0), None);
        assert_eq!(s.last_before(63), None);
        assert_eq!(s.last_before(64), Some(63));
        assert_eq!(s.last_before(4095), Some(64));
        assert_eq!(s.last_before(262_144), Some(262_143));
        assert_eq!(s.last_before(u64::MAX), Some(262_144));
        s.remove(63);
        s.remove(64);
        assert_eq!(s.first(), Some(4095));
        s.insert(1);
        assert_eq!(s.first(), Some(1));
    }
}
