//! Sorted duplicates (DUPSORT). A key with one value is a plain node. A key with several values
//! whose node stays under `dups_node_max` holds them inline (NF_DUPS): an inline value set. A
//! larger set becomes a sub-tree (NF_SUBTREE) whose keys are the values (with empty data); the
//! node's value area is then the sub-tree's 48-byte database record, whose `flags` field holds
//! the fixed value size of a DUPFIXED database (0 otherwise).
//!
//! Inline value set: count u16, then for variable-size values `count` u16 end offsets (relative
//! to the data), then the values packed in order. For DUPFIXED the offsets are left out: the
//! values are packed back to back, each (len - 2) / count bytes.

use super::{get_u16, node_max, put_u16, KeyCmp, DB_RECORD, NODE_HDR};
use crate::error::{Error, Result};
use std::cmp::Ordering;

/// Bytes of a sub-tree record (a [`super::DbRecord`]) in an NF_SUBTREE node's value area.
pub const SUBTREE_REC: usize = DB_RECORD;
/// Bytes of an inline value set's header (the value count).
pub const DUPSET_HDR: usize = 2;

/// Largest node holding an inline value set: a set whose node would be larger moves to a
/// sub-tree. Half a node keeps leaves of inline sets at several keys a page.
pub fn dups_node_max(page_size: usize) -> usize {
    node_max(page_size) / 2
}

/// Largest key of a DUPSORT database: its node must be able to hold a sub-tree record.
pub fn max_dup_key_size(page_size: usize) -> usize {
    node_max(page_size) - NODE_HDR - SUBTREE_REC
}

/// Size of an inline value set of `n` values totalling `data` bytes.
pub fn dupset_size(n: usize, data: usize, fixed: bool) -> usize {
    DUPSET_HDR + if fixed { 0 } else { 2 * n } + data
}

/// Read view of an inline value set. Every access is bounds-checked: a hostile set gives
/// `Corrupted`, never a panic. Order and uniqueness are the checker's to verify.
#[derive(Clone, Copy, Debug)]
pub struct DupSet<'a> {
    b: &'a [u8],
    n: usize,
    fixed: bool,
    /// Size of each value (DUPFIXED).
    size: usize,
}

impl<'a> DupSet<'a> {
    /// Wraps the value area of an NF_DUPS node.
    #[inline]
    pub fn new(b: &'a [u8], fixed: bool) -> Result<DupSet<'a>> {
        if b.len() < DUPSET_HDR {
            return Err(Error::corrupted("inline value set shorter than its header"));
        }
        let n = get_u16(b, 0) as usize;
        if n == 0 {
            return Err(Error::corrupted("empty inline value set"));
        }
        let data = b.len() - DUPSET_HDR;
        let size = if fixed {
            if !data.is_multiple_of(n) {
                return Err(Error::corrupted("inline fixed-size values of unequal size"));
            }
            data / n
        } else {
            if DUPSET_HDR + 2 * n > b.len() {
                return Err(Error::corrupted("inline value set offsets overrun"));
            }
            0
        };
        Ok(DupSet { b, n, fixed, size })
    }

    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        self.n
    }

    /// Never true for a valid set (kept for the `len` convention).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Size of each value of a DUPFIXED set (0 when sizes vary).
    pub fn fixed_size(&self) -> usize {
        self.size
    }

    fn data_at(&self) -> usize {
        DUPSET_HDR + if self.fixed { 0 } else { 2 * self.n }
    }

    /// Value `i` (< len).
    #[inline]
    pub fn get(&self, i: usize) -> Result<&'a [u8]> {
        if i >= self.n {
            return Err(Error::corrupted("inline value index out of range"));
        }
        if self.fixed {
            let at = DUPSET_HDR + i * self.size;
            return Ok(&self.b[at..at + self.size]);
        }
        let d = DUPSET_HDR + 2 * self.n;
        let start = if i == 0 {
            0
        } else {
            get_u16(self.b, DUPSET_HDR + 2 * (i - 1)) as usize
        };
        let end = get_u16(self.b, DUPSET_HDR + 2 * i) as usize;
        if start > end || d + end > self.b.len() {
            return Err(Error::corrupted("inline value set offsets out of bounds"));
        }
        Ok(&self.b[d + start..d + end])
    }

    /// Total bytes of the values.
    pub fn data_len(&self) -> usize {
        self.b.len() - self.data_at()
    }

    /// The packed values `from..` of a DUPFIXED set.
    pub fn packed_from(&self, from: usize) -> &'a [u8] {
        let at = DUPSET_HDR + from.min(self.n) * self.size;
        &self.b[at..]
    }

    /// First index whose value is not less than `v`, and whether it is equal.
    #[inline]
    pub fn search(&self, v: &[u8], cmp: &KeyCmp) -> Result<(usize, bool)> {
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match cmp.cmp(self.get(mid)?, v) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok((mid, true)),
            }
        }
        Ok((lo, false))
    }
}

/// Builds an inline value set in a caller's buffer (reused across operations: no allocation
/// once it has grown). Values must be pushed in order; exactly `n` of them.
pub struct DupSetBuilder<'b> {
    out: &'b mut Vec<u8>,
    i: usize,
    fixed: bool,
    n: usize,
}

impl<'b> DupSetBuilder<'b> {
    /// Starts a set of `n` (1..=65535) values in `out`.
    pub fn new(out: &'b mut Vec<u8>, n: usize, fixed: bool) -> DupSetBuilder<'b> {
        out.clear();
        let hdr = DUPSET_HDR + if fixed { 0 } else { 2 * n };
        out.resize(hdr, 0);
        put_u16(out, 0, n as u16);
        DupSetBuilder {
            out,
            i: 0,
            fixed,
            n,
        }
    }

    /// Appends the next value.
    pub fn push(&mut self, v: &[u8]) {
        self.out.extend_from_slice(v);
        if !self.fixed {
            let d = DUPSET_HDR + 2 * self.n;
            let end = (self.out.len() - d) as u16;
            put_u16(self.out, DUPSET_HDR + 2 * self.i, end);
        }
        self.i += 1;
    }
}
