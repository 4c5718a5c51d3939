//! Sorted duplicates (DUPSORT). A key with one value is a plain node. A key with several values
//! whose node stays under `dups_node_max` holds them inline (NF_DUPS): an inline value set. A
//! larger set becomes a sub-tree (NF_SUBTREE) whose keys are the values (with empty data); the
//! node's value area is then the sub-tree's 48-byte database record, whose `flags` field holds
//! the fixed value size of a DUPFIXED database (0 otherwise).
//!
//! Inline value set: count u16, then for variable-size values `count` u16 end offsets (relative
//! to the data), then the values packed in order. For DUPFIXED the offsets are left out: the
//! values are packed back to back, each (len - 2) / count bytes.

use super::{
    get_u16, node_max, put_u16, put_u32, KeyCmp, PageMut, DB_RECORD, H_UPPER, NF_BIG, NODE_HDR,
    SLOT, SLOTS_AT,
};
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

impl DupSet<'_> {
    /// The byte length of the set's value area.
    pub fn byte_len(&self) -> usize {
        self.b.len()
    }

    /// Checks the end offsets of values `from..` (which an in-place change rewrites) lie in
    /// the data, and returns where value `from` starts and (when `from` < len) ends in it.
    fn span_from(&self, from: usize) -> Result<(usize, usize)> {
        if from > self.n {
            return Err(Error::corrupted("inline value index out of range"));
        }
        if self.fixed {
            return Ok((from * self.size, (from + 1) * self.size));
        }
        let data = self.data_len();
        let off = |j: usize| get_u16(self.b, DUPSET_HDR + 2 * j) as usize;
        let start = if from == 0 { 0 } else { off(from - 1) };
        // Nondecreasing and inside the data from `from` on: the moves and the offset
        // arithmetic of the in-place changes stay in bounds.
        let mut prev = start;
        for j in from..self.n {
            if off(j) < prev || off(j) > data {
                return Err(Error::corrupted("inline value set offsets out of bounds"));
            }
            prev = off(j);
        }
        if start > data {
            return Err(Error::corrupted("inline value set offsets out of bounds"));
        }
        let end = if from < self.n { off(from) } else { start };
        Ok((start, end))
    }

    /// Bytes an in-place insertion of a `vlen`-byte value adds to the set.
    pub fn growth(&self, vlen: usize) -> usize {
        vlen + if self.fixed { 0 } else { 2 }
    }

    /// Plans inserting a value at index `pos` in place: checks what it will move and returns
    /// the start of value `pos` in the data, for [`dupset_insert`].
    pub fn insert_plan(&self, pos: usize) -> Result<usize> {
        Ok(self.span_from(pos)?.0)
    }

    /// Plans removing value `pos` (< len) in place: checks what it will move and returns its
    /// (start, end) in the data, for [`dupset_remove`].
    pub fn remove_plan(&self, pos: usize) -> Result<(usize, usize)> {
        if pos >= self.n {
            return Err(Error::corrupted("inline value index out of range"));
        }
        self.span_from(pos)
    }
}

/// Inserts `v` at index `pos` of an inline set of `n` values, in place: `area` is the set's
/// value area grown at its end by [`DupSet::growth`] bytes (the old set fills its start), and
/// `start` comes from [`DupSet::insert_plan`]. The values after `pos` (and, when sizes vary,
/// the offsets and the data before it) move by memmove; none is copied one by one.
pub fn dupset_insert(area: &mut [u8], n: usize, pos: usize, start: usize, v: &[u8], fixed: bool) {
    let len = v.len();
    if fixed {
        let at = DUPSET_HDR + start;
        let old_end = area.len() - len;
        area.copy_within(at..old_end, at + len);
        area[at..at + len].copy_from_slice(v);
    } else {
        let d_old = DUPSET_HDR + 2 * n;
        let old_end = area.len() - len - 2;
        // The data after the new value moves by an offset slot and the value, then the data
        // before it by a slot, then the offsets of the values after it shift and grow.
        area.copy_within(d_old + start..old_end, d_old + start + 2 + len);
        area.copy_within(d_old..d_old + start, d_old + 2);
        area[d_old + 2 + start..d_old + 2 + start + len].copy_from_slice(v);
        for j in (pos..n).rev() {
            let o = get_u16(area, DUPSET_HDR + 2 * j) as usize + len;
            put_u16(area, DUPSET_HDR + 2 * (j + 1), o as u16);
        }
        put_u16(area, DUPSET_HDR + 2 * pos, (start + len) as u16);
    }
    put_u16(area, 0, (n + 1) as u16);
}

/// Removes value `pos` of an inline set of `n` (>= 2) values in place, whose value area is
/// `area` and (start, end) comes from [`DupSet::remove_plan`]; returns the set's new length
/// (the caller shrinks the node to it).
pub fn dupset_remove(
    area: &mut [u8],
    n: usize,
    pos: usize,
    (start, end): (usize, usize),
    fixed: bool,
) -> usize {
    let len = end - start;
    let total = area.len();
    if fixed {
        let at = DUPSET_HDR + start;
        area.copy_within(at + len..total, at);
        put_u16(area, 0, (n - 1) as u16);
        return total - len;
    }
    let d_old = DUPSET_HDR + 2 * n;
    for j in pos..n - 1 {
        let o = get_u16(area, DUPSET_HDR + 2 * (j + 1)) as usize - len;
        put_u16(area, DUPSET_HDR + 2 * j, o as u16);
    }
    // The data before the value moves back by the freed offset slot, the data after it by the
    // slot and the value.
    area.copy_within(d_old..d_old + start, d_old - 2);
    area.copy_within(d_old + end..total, d_old - 2 + start);
    put_u16(area, 0, (n - 1) as u16);
    total - 2 - len
}

/// In-place changes of a node's value area, for inline sets that grow and shrink in their
/// leaf (the page layout is format/page.rs's).
impl PageMut<'_> {
    /// Grows the value area of leaf node `i` (not on overflow pages) to `new_len` bytes in
    /// place, keeping its bytes; the added bytes, at its end, are the caller's to fill (through
    /// [`PageMut::value_area_mut`]). The nodes from the lowest through `i` move down by the
    /// growth (after a compaction if the free bytes are scattered); no other node moves, no
    /// slot is added. Returns false (page untouched) if the page cannot hold it.
    pub fn grow_value(&mut self, i: usize, new_len: usize) -> Result<bool> {
        let (klen, vlen, flags) = {
            let v = self.view();
            let n = v.node(i)?;
            (n.key.len(), n.vlen as usize, n.flags)
        };
        if flags & NF_BIG != 0 || new_len < vlen || new_len > u16::MAX as usize {
            return Err(Error::internal("a value area grown in place"));
        }
        let d = new_len - vlen;
        if d == 0 {
            return Ok(true);
        }
        if self.gap() < d {
            if self.view().used_bytes()? + d > self.b.len() {
                return Ok(false);
            }
            self.compact()?;
        }
        let off = get_u16(self.b, SLOTS_AT + i * SLOT) as usize;
        let upper = self.upper();
        let end = off + NODE_HDR + klen + vlen;
        if off < upper || end > self.b.len() {
            return Err(Error::internal("node offset"));
        }
        self.b.copy_within(upper..end, upper - d);
        for j in 0..self.nkeys() {
            let s = SLOTS_AT + j * SLOT;
            let o = get_u16(self.b, s) as usize;
            if o <= off {
                put_u16(self.b, s, (o - d) as u16);
            }
        }
        put_u32(self.b, H_UPPER, (upper - d) as u32);
        put_u32(self.b, off - d + 3, new_len as u32);
        Ok(true)
    }

    /// Shrinks the value area of leaf node `i` (not on overflow pages) to its first `new_len`
    /// bytes in place; the rest becomes dead space until the next compaction.
    pub fn shrink_value(&mut self, i: usize, new_len: usize) -> Result<()> {
        let (vlen, flags) = {
            let n = self.view().node(i)?;
            (n.vlen as usize, n.flags)
        };
        if flags & NF_BIG != 0 || new_len > vlen {
            return Err(Error::internal("a value area shrunk in place"));
        }
        self.set_node_vlen(i, flags, new_len as u32);
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    // The page helpers of format/mod.rs's tests.
    use crate::format::tests::{contents, leaf, node_in};
    use crate::format::{Page, NODE_HDR, SLOT, SLOTS_AT};

    /// A value area grows in place (the nodes below it move down, compacting first when the
    /// free bytes are scattered) and shrinks in place; a growth the page cannot hold is
    /// refused with the page untouched.
    #[test]
    fn values_grow_and_shrink_in_place() {
        let mut b = leaf(4096);
        let mut want = Vec::new();
        for i in 0..12u32 {
            let k = format!("key{i:04}").into_bytes();
            let v = vec![i as u8; 40];
            assert!(PageMut::new(&mut b)
                .insert(i as usize, &node_in(&k, &v))
                .unwrap());
            want.push((k, v));
        }
        // Dead space: one node removed.
        PageMut::new(&mut b).remove(3);
        want.remove(3);
        let mut grown = 0;
        for round in 0..200usize {
            let i = (round * 7) % want.len();
            let new_len = want[i].1.len() + 1 + round % 13;
            let mut pm = PageMut::new(&mut b);
            if pm.grow_value(i, new_len).unwrap() {
                let area = pm.value_area_mut(i).unwrap();
                assert_eq!(&area[..want[i].1.len()], &want[i].1[..]);
                area.fill(round as u8);
                want[i].1 = vec![round as u8; new_len];
                grown += 1;
            } else {
                assert_eq!(contents(&b), want);
            }
            if round % 5 == 0 {
                let j = (round * 3) % want.len();
                let keep = want[j].1.len() / 2;
                PageMut::new(&mut b).shrink_value(j, keep).unwrap();
                want[j].1.truncate(keep);
            }
            assert_eq!(contents(&b), want);
        }
        assert!(grown > 50);
        let p = Page::new(&b, 1).unwrap();
        let live: usize = want
            .iter()
            .map(|(k, v)| SLOT + NODE_HDR + k.len() + v.len())
            .sum();
        assert_eq!(p.used_bytes().unwrap(), SLOTS_AT + live);
    }

    fn build(vals: &[Vec<u8>], fixed: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = DupSetBuilder::new(&mut out, vals.len(), fixed);
        for v in vals {
            b.push(v);
        }
        out
    }

    /// Every insertion and removal position, for fixed and variable sizes: the in-place
    /// change gives byte for byte the set a rebuild gives.
    #[test]
    fn in_place_insert_and_remove_match_a_rebuild() {
        for fixed in [true, false] {
            for n in 2..12usize {
                let vals: Vec<Vec<u8>> = (0..n)
                    .map(|j| {
                        let len = if fixed { 8 } else { 1 + (j * 5) % 7 };
                        vec![(j * 2 + 1) as u8; len]
                    })
                    .collect();
                let set = build(&vals, fixed);
                for pos in 0..=n {
                    let v = vec![(pos * 2) as u8; if fixed { 8 } else { 3 }];
                    let view = DupSet::new(&set, fixed).unwrap();
                    let start = view.insert_plan(pos).unwrap();
                    let mut area = set.clone();
                    area.resize(set.len() + view.growth(v.len()), 0xEE);
                    dupset_insert(&mut area, n, pos, start, &v, fixed);
                    let mut want = vals.clone();
                    want.insert(pos, v);
                    assert_eq!(
                        area,
                        build(&want, fixed),
                        "insert {pos} of {n}, fixed {fixed}"
                    );
                }
                for pos in 0..n {
                    let view = DupSet::new(&set, fixed).unwrap();
                    let span = view.remove_plan(pos).unwrap();
                    let mut area = set.clone();
                    let len = dupset_remove(&mut area, n, pos, span, fixed);
                    let mut want = vals.clone();
                    want.remove(pos);
                    assert_eq!(
                        &area[..len],
                        &build(&want, fixed)[..],
                        "remove {pos} of {n}"
                    );
                }
            }
        }
    }

    /// Offsets that go backwards or past the data are refused before anything moves.
    #[test]
    fn hostile_offsets_are_refused_by_the_plans() {
        let vals = vec![vec![1u8; 3], vec![2u8; 3], vec![3u8; 3]];
        let mut set = build(&vals, false);
        put_u16(&mut set, DUPSET_HDR + 2, 1); // end of value 1 before the end of value 0
        let view = DupSet::new(&set, false).unwrap();
        assert!(view.insert_plan(1).is_err());
        assert!(view.remove_plan(1).is_err());
        assert!(view.remove_plan(3).is_err());
        let mut set = build(&vals, false);
        put_u16(&mut set, DUPSET_HDR + 4, 500); // past the data
        let view = DupSet::new(&set, false).unwrap();
        assert!(view.insert_plan(2).is_err());
        assert!(view.insert_plan(0).is_err());
    }
}
