//! Packed leaves (kind 5, LMDB's LEAF2 pages): the leaves of the sorted-duplicates sub-trees of
//! DUPFIXED databases. After the common 40-byte page header, the values lie back to back,
//! `size` bytes each, sorted by the database's value order, with no slots and no node
//! headers: an 8-byte value costs 8 bytes.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0..24 | | common page header (checksum, page number, writer) |
//! | 24 | 1 | kind 5 |
//! | 25 | 1 | flags: 0 |
//! | 26 | 2 | count of values |
//! | 28 | 4 | value size (>= 1), equal to the sub-tree record's `flags` |
//! | 32 | 8 | zero |
//! | 40 | count x size | the values |
//!
//! Invariants, checked when a page is read ([`PackedLeaf::new`]): the kind, zero flags and
//! padding, a value size of at least one byte, and `count * size` inside the page. Order,
//! uniqueness and the size against the sub-tree record are the checker's (and the sub-tree
//! code's, which passes the record's size to `new`).

use super::{
    get_u16, get_u32, get_u64, put_u16, put_u32, Page, H_FLAGS, H_KIND, H_NKEYS, H_PGNO, H_PLEN,
    H_UPPER, MAX_PAGE_SIZE, PAGE_FIELDS,
};
use crate::error::{Error, Result};
use crate::format::search::int_key;
use crate::format::KeyCmp;
use std::cmp::Ordering;

/// Page kind of a packed leaf.
pub const KIND_LEAF_FIXED: u8 = 5;
/// Offset of the first value.
pub const PACKED_AT: usize = PAGE_FIELDS;
const H_SIZE: usize = H_UPPER;
const H_PAD: usize = H_PLEN;

/// Up to 8 bytes as a big-endian integer, zero-padded on the right: for values of one size,
/// the integers' order is the bytewise order.
#[inline(always)]
fn be_padded(v: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w[..v.len()].copy_from_slice(v);
    u64::from_be_bytes(w)
}

/// How many values of `size` bytes a packed leaf of `page_size` holds.
#[inline]
pub fn packed_capacity(page_size: usize, size: usize) -> usize {
    (page_size - PACKED_AT) / size.max(1)
}

/// Whether the page image `b` claims to be a packed leaf (its kind byte alone).
#[inline]
pub fn is_packed(b: &[u8]) -> bool {
    b.get(H_KIND) == Some(&KIND_LEAF_FIXED)
}

/// Read view of a packed leaf whose header has been checked.
#[derive(Clone, Copy, Debug)]
pub struct PackedLeaf<'a> {
    b: &'a [u8],
    n: usize,
    size: usize,
}

impl<'a> PackedLeaf<'a> {
    /// Checks the header of a packed leaf and wraps it. `size`, when given, is the value size
    /// the sub-tree's record says its leaves hold.
    #[inline]
    pub fn new(b: &'a [u8], pgno: u64, size: Option<usize>) -> Result<PackedLeaf<'a>> {
        let bad = |what: String| Error::corrupted(format!("page {pgno}: packed leaf: {what}"));
        if b.len() < PACKED_AT || b.len() > MAX_PAGE_SIZE {
            return Err(bad(format!("{} bytes is not a page", b.len())));
        }
        if b[H_KIND] != KIND_LEAF_FIXED {
            return Err(bad(format!("kind {}", b[H_KIND])));
        }
        if b[H_FLAGS] != 0 || get_u64(b, H_PAD) != 0 {
            return Err(bad("nonzero flags or padding".into()));
        }
        let n = get_u16(b, H_NKEYS) as usize;
        let sz = get_u32(b, H_SIZE) as usize;
        if sz == 0 || size.is_some_and(|s| s != sz) {
            return Err(bad(format!(
                "value size {sz}, the sub-tree's is {}",
                size.unwrap_or(0)
            )));
        }
        if n * sz > b.len() - PACKED_AT {
            return Err(bad(format!("{n} values of {sz} bytes overflow the page")));
        }
        Ok(PackedLeaf { b, n, size: sz })
    }

    /// Number of values.
    #[inline]
    pub fn nkeys(&self) -> usize {
        self.n
    }

    /// Size of each value.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Value `i` (< count).
    #[inline]
    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        if i >= self.n {
            return Err(Error::corrupted(format!(
                "page {}: value {i} past the count {}",
                get_u64(self.b, H_PGNO),
                self.n
            )));
        }
        let at = PACKED_AT + i * self.size;
        Ok(&self.b[at..at + self.size])
    }

    /// The values from `i` on, packed as they lie in the page.
    #[inline]
    pub fn values_from(&self, i: usize) -> &'a [u8] {
        let i = i.min(self.n);
        &self.b[PACKED_AT + i * self.size..PACKED_AT + self.n * self.size]
    }

    /// First index whose value is not less than `key` (by `cmp`), and whether it is equal.
    ///
    /// Values of up to 8 bytes under the bytewise or the INTEGERDUP order compare as one
    /// integer each (the order maps them to integers one to one), so the search decides the
    /// comparator once, not per step; other orders and sizes compare through `cmp`.
    #[inline]
    pub fn lower_bound(&self, key: &[u8], cmp: &KeyCmp) -> (usize, bool) {
        let size = self.size;
        if key.len() == size {
            match (cmp, size) {
                (KeyCmp::Integer, 4 | 8) => return self.search_by(key, int_key),
                (KeyCmp::Bytes, 1..=8) => return self.search_by(key, be_padded),
                _ => {}
            }
        }
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = PACKED_AT + mid * size;
            match cmp.cmp(&self.b[at..at + size], key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return (mid, true),
            }
        }
        (lo, false)
    }

    /// `lower_bound` for an order in which `rank` maps the values (and `key`, of the same
    /// size) to integers one to one, in order.
    #[inline(always)]
    fn search_by(&self, key: &[u8], rank: impl Fn(&[u8]) -> u64) -> (usize, bool) {
        let (size, want) = (self.size, rank(key));
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let at = PACKED_AT + mid * size;
            let v = rank(&self.b[at..at + size]);
            match v.cmp(&want) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return (mid, true),
            }
        }
        (lo, false)
    }
}

/// A leaf of either kind: the node leaf of every tree, or a packed leaf of a DUPFIXED
/// sub-tree. Cursors and iterators that walk sub-tree leaves read values through it.
#[derive(Clone, Copy)]
pub enum Leaf<'a> {
    /// A leaf of nodes.
    Nodes(Page<'a>),
    /// A packed leaf.
    Packed(PackedLeaf<'a>),
}

impl<'a> Leaf<'a> {
    /// Number of keys (values of a sub-tree).
    #[inline(always)]
    pub fn nkeys(&self) -> usize {
        match self {
            Leaf::Nodes(p) => p.nkeys(),
            Leaf::Packed(p) => p.nkeys(),
        }
    }

    /// Key `i` (a value, in a sub-tree). Always inlined: iterators step through a leaf with
    /// it, and a call per value costs more than the step itself.
    #[inline(always)]
    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        match self {
            Leaf::Nodes(p) => p.key(i),
            Leaf::Packed(p) => p.key(i),
        }
    }
}

/// Mutable view of a packed leaf owned by a write transaction (built or checked by this
/// process: the header is trusted, slices still bound every access).
pub struct PackedLeafMut<'a> {
    b: &'a mut [u8],
}

impl<'a> PackedLeafMut<'a> {
    /// Wraps a packed leaf image.
    pub fn new(b: &'a mut [u8]) -> PackedLeafMut<'a> {
        PackedLeafMut { b }
    }

    /// Formats `b` as an empty packed leaf of `size`-byte values.
    pub fn init(b: &'a mut [u8], size: usize) -> PackedLeafMut<'a> {
        b[H_KIND..PACKED_AT].fill(0);
        b[H_KIND] = KIND_LEAF_FIXED;
        put_u32(b, H_SIZE, size as u32);
        PackedLeafMut { b }
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        get_u16(self.b, H_NKEYS) as usize
    }

    /// Whether it holds no value.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn size(&self) -> usize {
        get_u32(self.b, H_SIZE) as usize
    }

    /// Inserts `v` (of the page's size) at index `i` (<= len), moving the values after it;
    /// false, changing nothing, when the page is full.
    pub fn insert(&mut self, i: usize, v: &[u8]) -> Result<bool> {
        let (n, sz) = (self.len(), self.size());
        if v.len() != sz || i > n {
            return Err(Error::internal("packed insert of a wrong size"));
        }
        if (n + 1) * sz > self.b.len() - PACKED_AT {
            return Ok(false);
        }
        let at = PACKED_AT + i * sz;
        let end = PACKED_AT + n * sz;
        self.b.copy_within(at..end, at + sz);
        self.b[at..at + sz].copy_from_slice(v);
        put_u16(self.b, H_NKEYS, (n + 1) as u16);
        Ok(true)
    }

    /// Removes value `i` (< len).
    pub fn remove(&mut self, i: usize) {
        let (n, sz) = (self.len(), self.size());
        if i >= n {
            return;
        }
        let at = PACKED_AT + i * sz;
        let end = PACKED_AT + n * sz;
        self.b.copy_within(at + sz..end, at);
        self.b[end - sz..end].fill(0);
        put_u16(self.b, H_NKEYS, (n - 1) as u16);
    }

    /// Appends the packed values `vals` (a whole number of values); false, changing nothing,
    /// when they do not fit.
    pub fn append(&mut self, vals: &[u8]) -> Result<bool> {
        let (n, sz) = (self.len(), self.size());
        if !vals.len().is_multiple_of(sz) {
            return Err(Error::internal("packed append of a wrong size"));
        }
        let end = PACKED_AT + n * sz;
        if end + vals.len() > self.b.len() {
            return Ok(false);
        }
        self.b[end..end + vals.len()].copy_from_slice(vals);
        put_u16(self.b, H_NKEYS, (n + vals.len() / sz) as u16);
        Ok(true)
    }

    /// Keeps the first `keep` values, zeroing the rest of the value area.
    pub fn truncate(&mut self, keep: usize) {
        let (n, sz) = (self.len(), self.size());
        if keep >= n {
            return;
        }
        self.b[PACKED_AT + keep * sz..PACKED_AT + n * sz].fill(0);
        put_u16(self.b, H_NKEYS, keep as u16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(ps: usize, size: usize) -> Vec<u8> {
        let mut b = vec![0u8; ps];
        PackedLeafMut::init(&mut b, size);
        b
    }

    #[test]
    fn insert_remove_search() {
        let mut b = leaf(4096, 8);
        let cap = packed_capacity(4096, 8);
        assert_eq!(cap, 507);
        let mut m = PackedLeafMut::new(&mut b);
        for i in (0..cap as u64).rev() {
            assert!(m.insert(0, &(2 * i).to_be_bytes()).unwrap());
        }
        assert!(!m.insert(0, &[1; 8]).unwrap(), "full");
        m.remove(3);
        let p = PackedLeaf::new(&b, 1, Some(8)).unwrap();
        assert_eq!(p.nkeys(), cap - 1);
        assert_eq!(p.key(3).unwrap(), 8u64.to_be_bytes());
        assert_eq!(
            p.lower_bound(&6u64.to_be_bytes(), &KeyCmp::Bytes),
            (3, false)
        );
        assert_eq!(
            p.lower_bound(&8u64.to_be_bytes(), &KeyCmp::Bytes),
            (3, true)
        );
        assert_eq!(p.values_from(cap - 2).len(), 8);
        assert!(p.key(cap - 1).is_err());
    }

    /// The integer-ranked searches agree with a linear scan through the comparator, for
    /// every order and size they cover and for the generic path beside them.
    #[test]
    #[allow(
        clippy::host_endian_bytes,
        reason = "INTEGERDUP values are native integers, as in LMDB"
    )]
    fn lower_bound_agrees_with_the_comparator() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let cases: [(KeyCmp, &[usize]); 3] = [
            (KeyCmp::Bytes, &[1, 2, 3, 5, 8, 9, 16]),
            (KeyCmp::Integer, &[4, 8]),
            (KeyCmp::Reverse, &[4, 8]),
        ];
        for (cmp, sizes) in &cases {
            for &size in *sizes {
                // Values drawn from a small range, so that searches hit equal values too.
                let draw = |r: u64| -> Vec<u8> {
                    let mut v: Vec<u8> = (0..size).map(|i| (r >> (i % 8 * 8)) as u8 & 3).collect();
                    if matches!(cmp, KeyCmp::Integer) {
                        v = match size {
                            4 => ((r % 5000) as u32).to_ne_bytes().to_vec(),
                            _ => (r % 5000).to_ne_bytes().to_vec(),
                        };
                    }
                    v
                };
                let mut vals: Vec<Vec<u8>> = (0..300).map(|_| draw(next())).collect();
                vals.sort_by(|a, b| cmp.cmp(a, b));
                vals.dedup();
                vals.truncate(packed_capacity(4096, size));
                let mut b = leaf(4096, size);
                let mut m = PackedLeafMut::new(&mut b);
                for v in &vals {
                    let n = m.len();
                    assert!(m.insert(n, v).unwrap());
                }
                let p = PackedLeaf::new(&b, 1, Some(size)).unwrap();
                for _ in 0..500 {
                    let k = draw(next());
                    let want = vals.iter().position(|v| cmp.cmp(v, &k) != Ordering::Less);
                    let i = want.unwrap_or(vals.len());
                    let exact = want.is_some_and(|i| cmp.cmp(&vals[i], &k) == Ordering::Equal);
                    assert_eq!(p.lower_bound(&k, cmp), (i, exact), "{size} bytes {k:?}");
                }
            }
        }
    }

    #[test]
    fn hostile_headers_are_errors() {
        let mut b = leaf(4096, 8);
        assert!(
            PackedLeaf::new(&b, 1, Some(4)).is_err(),
            "size against the record"
        );
        put_u16(&mut b, H_NKEYS, 600);
        assert!(PackedLeaf::new(&b, 1, None).is_err(), "count past the page");
        put_u16(&mut b, H_NKEYS, 1);
        put_u32(&mut b, H_SIZE, 0);
        assert!(PackedLeaf::new(&b, 1, None).is_err(), "size zero");
        put_u32(&mut b, H_SIZE, u32::MAX);
        assert!(PackedLeaf::new(&b, 1, None).is_err(), "huge size");
        put_u32(&mut b, H_SIZE, 8);
        b[H_FLAGS] = 1;
        assert!(PackedLeaf::new(&b, 1, None).is_err(), "flags");
        b[H_FLAGS] = 0;
        assert!(PackedLeaf::new(&b[..30], 1, None).is_err(), "short");
        assert!(PackedLeaf::new(&b, 1, None).is_ok());
    }
}
