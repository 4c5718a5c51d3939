//! Key orders, and the search of a branch or leaf page by key: the inner loop of every
//! descent (a put walks about five pages, each searched once).
//!
//! Invariants the search relies on, and where each is checked:
//! - A [`Page`] comes from `Page::new`, which checked that the slot array ends at or before
//!   `upper` and `upper` within the page; the search still takes the slot array as one
//!   bounds-checked slice per call (`Page::slots`), after which its steps index that slice,
//!   which needs no page-sized check.
//! - Every node a step reads is checked where it is read: its offset lies in the node area
//!   (at or past `upper`) and its key (header included) within the page; on a hinted page
//!   also that the key is at least as long as the page prefix. A bad one is `Corrupted`.
//! - On a hinted page the search trusts that every key (slot 0 of a branch excepted) starts
//!   with the page prefix and that each slot's hint is its key's: a page that lies there
//!   gives wrong answers, not panics; `check_hints` (the checker's part) finds it.
//! - Keys are compared where they lie in the page image; nothing is copied.

use super::{Page, H_PREFIX, NODE_HDR, PREFIX_MAX, SLOT, SLOTS_AT};
use crate::error::Result;
use std::cmp::Ordering;

/// A user-supplied key order.
pub type CmpFn = std::sync::Arc<dyn Fn(&[u8], &[u8]) -> Ordering + Send + Sync>;

/// How a database orders its keys.
#[derive(Clone)]
pub enum KeyCmp {
    /// Bytewise (memcmp, shorter first on a tie).
    Bytes,
    /// Bytes compared from the end (REVERSEKEY).
    Reverse,
    /// Native unsigned 32- or 64-bit integers (INTEGERKEY).
    Integer,
    /// A user-supplied order (the C API's mdb_set_compare).
    Custom(CmpFn),
}

impl std::fmt::Debug for KeyCmp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = match self {
            KeyCmp::Bytes => "Bytes",
            KeyCmp::Reverse => "Reverse",
            KeyCmp::Integer => "Integer",
            KeyCmp::Custom(_) => "Custom",
        };
        f.write_str(s)
    }
}

/// Bytewise order (as `<[u8]>::cmp`: memcmp, then the shorter first). Keys are mostly short
/// and compared once per search step, where the call into libc's memcmp cost more than the
/// comparison: up to 32 common bytes are compared here as big-endian words, without a loop
/// over bytes. A common part of 4 to 8 bytes is one word made of its first and last 4 bytes,
/// of 8 to 32 bytes whole words then a last word overlapping the one before: where the
/// overlap starts the bytes are known equal, so the order of the words is the order of the
/// bytes.
#[inline(always)]
pub fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let (x, y) = (&a[..n], &b[..n]);
    let common = if n >= 8 {
        if n > 32 {
            return a.cmp(b);
        }
        cmp_words(x, y)
    } else if n >= 4 {
        let w = |c: &[u8]| (u64::from(be32(&c[..4])) << 32) | u64::from(be32(&c[n - 4..]));
        w(x).cmp(&w(y))
    } else if n > 0 {
        let w =
            |c: &[u8]| (u32::from(c[0]) << 16) | (u32::from(c[n / 2]) << 8) | u32::from(c[n - 1]);
        w(x).cmp(&w(y))
    } else {
        Ordering::Equal
    };
    common.then(a.len().cmp(&b.len()))
}

/// Order of two byte strings of one length, 8 to 32 bytes.
#[inline(always)]
fn cmp_words(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len();
    let mut i = 0;
    while i + 8 < n {
        let (x, y) = (be64(&a[i..i + 8]), be64(&b[i..i + 8]));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    be64(&a[n - 8..]).cmp(&be64(&b[n - 8..]))
}

#[inline(always)]
fn be64(c: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(c);
    u64::from_be_bytes(w)
}

#[inline(always)]
fn be32(c: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(c);
    u32::from_be_bytes(w)
}

impl KeyCmp {
    /// Compares two keys.
    #[inline]
    pub fn cmp(&self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            KeyCmp::Bytes => cmp_bytes(a, b),
            KeyCmp::Reverse => a.iter().rev().cmp(b.iter().rev()),
            KeyCmp::Integer => int_key(a).cmp(&int_key(b)),
            KeyCmp::Custom(f) => f(a, b),
        }
    }
}

/// The numeric value of an INTEGERKEY key (checked to be 4 or 8 bytes at put).
#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGERKEY keys are native integers, as in LMDB"
)]
pub(crate) fn int_key(k: &[u8]) -> u64 {
    match k.len() {
        4 => u64::from(u32::from_ne_bytes([k[0], k[1], k[2], k[3]])),
        8 => {
            let mut a = [0u8; 8];
            a.copy_from_slice(k);
            u64::from_ne_bytes(a)
        }
        // Only reachable with a corrupted file; any total order will do.
        _ => k.iter().fold(0u64, |acc, &x| {
            acc.wrapping_mul(257).wrapping_add(u64::from(x))
        }),
    }
}

/// The hint of a key: the two bytes after the prefix, big-endian, zero-padded.
#[inline]
pub fn hint_of(key: &[u8], plen: usize) -> u16 {
    let a = key.get(plen).copied().unwrap_or(0);
    let b = key.get(plen + 1).copied().unwrap_or(0);
    u16::from_be_bytes([a, b])
}

/// Node offset held by a slot.
#[inline(always)]
fn slot_offset(s: &[u8; SLOT]) -> usize {
    usize::from(u16::from_le_bytes([s[0], s[1]]))
}

/// Key hint held by a slot.
#[inline(always)]
fn slot_hint(s: &[u8; SLOT]) -> u16 {
    u16::from_le_bytes([s[2], s[3]])
}

impl<'a> Page<'a> {
    /// The slot array, one 4-byte slot per node: one bounds check for a whole search.
    #[inline(always)]
    fn slots(&self) -> Result<&'a [[u8; SLOT]]> {
        match self.b.get(SLOTS_AT..SLOTS_AT + self.nkeys * SLOT) {
            Some(s) => Ok(s.as_chunks::<SLOT>().0),
            None => Err(self.bad("slot array past the page")),
        }
    }

    /// The key of the node at `off` (a slot's offset) without its first `skip` bytes (the page
    /// prefix): checks that the node lies in the node area and its key within the page and
    /// not shorter than `skip`, as two range checks.
    #[inline(always)]
    fn key_tail(&self, off: usize, skip: usize) -> Result<&'a [u8]> {
        let b = self.b;
        if off < self.upper {
            return Err(self.bad("node offset"));
        }
        let klen = match b.get(off + 1..off + 3) {
            Some(&[l0, l1]) => usize::from(u16::from_le_bytes([l0, l1])),
            _ => return Err(self.bad("node offset")),
        };
        let kat = off + NODE_HDR;
        match b.get(kat + skip..kat + klen) {
            Some(k) => Ok(k),
            None if klen < skip => Err(self.bad("key shorter than the page prefix")),
            None => Err(self.bad("node runs past the page")),
        }
    }

    /// First index `i >= first` whose key is not less than `key` (by `cmp`), and whether it
    /// is equal. `first` is 1 on branch pages (slot 0 has no key) and 0 on leaves.
    #[inline]
    pub fn lower_bound(&self, key: &[u8], cmp: &KeyCmp, first: usize) -> Result<(usize, bool)> {
        let slots = self.slots()?;
        if self.hinted() && matches!(cmp, KeyCmp::Bytes) {
            return self.lower_bound_hinted(slots, key, first);
        }
        let (mut lo, mut hi) = (first, slots.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let k = self.key_tail(slot_offset(&slots[mid]), 0)?;
            match cmp.cmp(k, key) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok((mid, true)),
            }
        }
        Ok((lo, false))
    }

    /// [`Page::lower_bound`] of a hinted page: the key's prefix part is compared once with
    /// the page prefix, then each step compares the hint in the slot and, only on a tie, the
    /// bytes of the node's key after the prefix.
    #[inline(always)]
    fn lower_bound_hinted(
        &self,
        slots: &'a [[u8; SLOT]],
        key: &[u8],
        first: usize,
    ) -> Result<(usize, bool)> {
        // At most PREFIX_MAX (`Page::new` checked it); said again so that the compiler
        // drops the prefix compare's path for long strings.
        let plen = self.plen.min(PREFIX_MAX);
        let prefix = &self.b[H_PREFIX..H_PREFIX + plen];
        let (head, rest) = key.split_at(plen.min(key.len()));
        match cmp_bytes(head, prefix) {
            Ordering::Less => return Ok((first, false)),
            Ordering::Greater => return Ok((slots.len(), false)),
            Ordering::Equal => {}
        }
        let kh = hint_of(key, plen);
        let (mut lo, mut hi) = (first, slots.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let s = &slots[mid];
            let sh = slot_hint(s);
            if sh < kh {
                lo = mid + 1;
                continue;
            }
            if sh > kh {
                hi = mid;
                continue;
            }
            match cmp_bytes(self.key_tail(slot_offset(s), plen)?, rest) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Ok((mid, true)),
            }
        }
        Ok((lo, false))
    }

    /// Checks what binary search trusts on a hinted page: every key (slot 0 of a branch
    /// excepted) carries the page prefix and its slot holds its hint. The checker's part:
    /// reads trust both, so a page that lies here would hide keys from lookups.
    pub fn check_hints(&self) -> Result<()> {
        if !self.hinted() {
            return Ok(());
        }
        let first = usize::from(!self.is_leaf());
        for i in first..self.nkeys {
            let k = self.key(i)?;
            if !k.starts_with(self.prefix()) {
                return Err(self.bad(&format!("key {i} lacks the page prefix")));
            }
            if self.slot(i).1 != hint_of(k, self.plen) {
                return Err(self.bad(&format!("slot {i} holds a wrong hint")));
            }
        }
        Ok(())
    }

    /// Index of the child of a branch page that covers `key`.
    #[inline]
    pub fn child_index(&self, key: &[u8], cmp: &KeyCmp) -> Result<usize> {
        if self.nkeys == 0 {
            return Err(self.bad("empty branch page"));
        }
        let (i, exact) = self.lower_bound(key, cmp, 1)?;
        Ok(if exact { i } else { i - 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::leaf;
    use super::super::{common_prefix, NodeIn, PageMut, KIND_BRANCH, KIND_LEAF};
    use super::*;
    use proptest::prelude::Rng;
    use proptest::test_runner::{RngAlgorithm, TestRng};

    /// The word-wise compare is `<[u8]>::cmp` exactly: every length up to past the 32-byte
    /// switch, differences at every position, prefixes of each other.
    #[test]
    fn cmp_bytes_is_slice_order() {
        let lens = if cfg!(miri) { 12 } else { 41 };
        for la in 0..lens {
            for lb in 0..lens {
                let a: Vec<u8> = (0..la).map(|i| (i * 7) as u8).collect();
                let mut b: Vec<u8> = (0..lb).map(|i| (i * 7) as u8).collect();
                assert_eq!(cmp_bytes(&a, &b), a.cmp(&b), "{la} {lb}");
                for at in 0..lb {
                    for d in [1u8, 0x80, 0xff] {
                        let keep = b[at];
                        b[at] = keep.wrapping_add(d);
                        assert_eq!(cmp_bytes(&a, &b), a.cmp(&b), "{la} {lb} {at} {d}");
                        assert_eq!(cmp_bytes(&b, &a), b.cmp(&a), "{la} {lb} {at} {d}");
                        b[at] = keep;
                    }
                }
            }
        }
    }

    /// Search on a hinted leaf: every key found, keys between them placed, and a key without
    /// the prefix shrinks it and stays findable.
    #[test]
    fn insert_search_and_prefix() {
        let mut b = leaf(4096);
        let keys: Vec<Vec<u8>> = (0..50u32)
            .map(|i| format!("key{:05}", i * 7).into_bytes())
            .collect();
        for (i, k) in keys.iter().enumerate().rev() {
            let n = NodeIn {
                flags: 0,
                key: k,
                val: b"v",
                vlen: 1,
            };
            assert!(PageMut::new(&mut b).insert(0, &n).unwrap(), "insert {i}");
        }
        PageMut::new(&mut b).refresh_prefix().unwrap();
        let p = Page::new(&b, 0).unwrap();
        assert_eq!(p.prefix(), b"key00");
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(p.lower_bound(k, &KeyCmp::Bytes, 0).unwrap(), (i, true));
            let mut below = k.clone();
            below.push(0);
            assert_eq!(
                p.lower_bound(&below, &KeyCmp::Bytes, 0).unwrap(),
                (i + 1, false)
            );
        }
        assert_eq!(p.lower_bound(b"a", &KeyCmp::Bytes, 0).unwrap(), (0, false));
        assert_eq!(p.lower_bound(b"z", &KeyCmp::Bytes, 0).unwrap(), (50, false));
        // A key outside the prefix shrinks it and keeps search right.
        PageMut::new(&mut b)
            .insert(
                0,
                &NodeIn {
                    flags: 0,
                    key: b"aaa",
                    val: b"",
                    vlen: 0,
                },
            )
            .unwrap();
        let p = Page::new(&b, 0).unwrap();
        assert_eq!(p.prefix(), b"");
        assert_eq!(p.lower_bound(b"aaa", &KeyCmp::Bytes, 0).unwrap(), (0, true));
        assert_eq!(
            p.lower_bound(&keys[10], &KeyCmp::Bytes, 0).unwrap(),
            (11, true)
        );
    }

    /// The random stream of these tests: the same on every run.
    fn rng() -> TestRng {
        TestRng::deterministic_rng(RngAlgorithm::ChaCha)
    }

    /// A number below `n`.
    fn below(r: &mut TestRng, n: usize) -> usize {
        (r.next_u64() % n as u64) as usize
    }

    /// A random key of the page's shape: a shared head (long common prefixes) then a short
    /// tail from few byte values (many equal hints, tails of every length, zero bytes that
    /// pad like a hint's padding).
    #[allow(
        clippy::host_endian_bytes,
        reason = "INTEGERKEY keys are native integers, as in LMDB"
    )]
    fn random_key(r: &mut TestRng, head: &[u8], order: &KeyCmp) -> Vec<u8> {
        if matches!(order, KeyCmp::Integer) {
            // One width per page (the head's length picks it), as INTEGERKEY keys are.
            let v = r.next_u64() >> below(r, 64);
            return if head.len().is_multiple_of(2) {
                (v as u32).to_ne_bytes().to_vec()
            } else {
                v.to_ne_bytes().to_vec()
            };
        }
        let mut k = head[..below(r, head.len() + 1).max(head.len() * 3 / 4)].to_vec();
        for _ in 0..below(r, 7) {
            k.push([0u8, b'0', b'1', b'9', 0xff][below(r, 5)]);
        }
        k
    }

    /// A page of `kind` holding as many of `keys` (sorted, distinct) as fit; a branch gets
    /// the empty key of slot 0 first. Returns the keys it holds, slot 0 included.
    fn build(b: &mut [u8], kind: u8, hinted: bool, keys: &[Vec<u8>]) -> Vec<Vec<u8>> {
        PageMut::init(b, kind, hinted);
        let mut held = Vec::new();
        let branch = kind == KIND_BRANCH;
        let firsts = if branch { vec![Vec::new()] } else { Vec::new() };
        for k in firsts.iter().chain(keys) {
            let val = if branch { &[7u8; 8][..] } else { &b"value"[..] };
            let n = NodeIn {
                flags: 0,
                key: k,
                val,
                vlen: val.len() as u32,
            };
            if !PageMut::new(b).insert(held.len(), &n).unwrap() {
                break;
            }
            held.push(k.clone());
        }
        PageMut::new(b).refresh_prefix().unwrap();
        held
    }

    /// The plain search the page search must equal: a scan of every key from `first`.
    fn scan(p: &Page, key: &[u8], cmp: &KeyCmp, first: usize) -> (usize, bool) {
        for i in first..p.nkeys() {
            match cmp.cmp(p.node(i).unwrap().key, key) {
                Ordering::Less => {}
                o => return (i, o == Ordering::Equal),
            }
        }
        (p.nkeys(), false)
    }

    /// The page search (hinted or not, on leaves and branches, in every built-in order)
    /// finds what a scan of the page finds, for keys on the page, next to them and elsewhere.
    #[test]
    fn search_matches_a_plain_scan() {
        let mut r = rng();
        let orders = [
            (KeyCmp::Bytes, true),
            (KeyCmp::Bytes, false),
            (KeyCmp::Reverse, false),
            (KeyCmp::Integer, false),
        ];
        let pages = if cfg!(miri) { 8 } else { 600 };
        let mut b = vec![0u8; 4096];
        for round in 0..pages {
            let (order, hinted) = &orders[round % orders.len()];
            let kind = if (round / orders.len()).is_multiple_of(2) {
                KIND_LEAF
            } else {
                KIND_BRANCH
            };
            let head: Vec<u8> = (0..below(&mut r, 40))
                .map(|_| b"0123"[below(&mut r, 4)])
                .collect();
            let want = [1, 2, 3, 5, 9, 30, 300][below(&mut r, 7)];
            let mut keys: Vec<Vec<u8>> = (0..want)
                .map(|_| random_key(&mut r, &head, order))
                .collect();
            if kind == KIND_BRANCH {
                // Slot 0's empty key is the branch's own; the others are separators.
                keys.retain(|k| !k.is_empty());
            }
            keys.sort_by(|a, b| order.cmp(a, b));
            keys.dedup_by(|a, b| order.cmp(a, b) == Ordering::Equal);
            let held = build(&mut b, kind, *hinted, &keys);
            let p = Page::new(&b, 1).unwrap();
            p.check_hints().unwrap();
            let first = usize::from(kind == KIND_BRANCH);
            let mut queries: Vec<Vec<u8>> = Vec::new();
            for k in &held {
                queries.push(k.clone());
                let mut longer = k.clone();
                longer.push(below(&mut r, 256) as u8);
                queries.push(longer);
                if let Some((last, short)) = k.split_last() {
                    queries.push(short.to_vec());
                    let mut next = short.to_vec();
                    next.push(last.wrapping_add(1));
                    queries.push(next);
                }
            }
            for _ in 0..20 {
                queries.push(random_key(&mut r, &head, order));
            }
            queries.push(Vec::new());
            queries.push(vec![0xff; 40]);
            for q in &queries {
                let got = p.lower_bound(q, order, first).unwrap();
                assert_eq!(
                    got,
                    scan(&p, q, order, first),
                    "{order:?} {hinted} {kind} {q:?}"
                );
                if kind == KIND_BRANCH && !held.is_empty() {
                    let (i, exact) = got;
                    let child = if exact { i } else { i - 1 };
                    assert_eq!(p.child_index(q, order).unwrap(), child);
                }
            }
        }
    }

    /// A search of a page whose slots or nodes were damaged ends in a result or a typed error,
    /// never a panic; a node offset into the slot array, a key past the page and (hinted) a key
    /// shorter than the page prefix are errors when a search step reads them.
    #[test]
    fn damaged_pages_are_errors() {
        let mut r = rng();
        let keys: Vec<Vec<u8>> = (0..120u32)
            .map(|i| format!("0000000000{:06}", i * 37).into_bytes())
            .collect();
        for kind in [KIND_LEAF, KIND_BRANCH] {
            let mut clean = vec![0u8; 4096];
            let held = build(&mut clean, kind, true, &keys);
            let first = usize::from(kind == KIND_BRANCH);
            let n = held.len();
            let upper = Page::new(&clean, 1).unwrap().upper();
            let slot = |i: usize| SLOTS_AT + i * SLOT;
            let at =
                |b: &[u8], i: usize| usize::from(u16::from_le_bytes([b[slot(i)], b[slot(i) + 1]]));
            let mid = (first + n) / 2;
            let probe = held[mid].clone();
            // A node offset below the node area.
            let mut b = clean.clone();
            b[slot(mid)..slot(mid) + 2].copy_from_slice(&(SLOTS_AT as u16).to_le_bytes());
            let p = Page::new(&b, 1).unwrap();
            assert!(p.lower_bound(&probe, &KeyCmp::Bytes, first).is_err());
            assert!(p.lower_bound(&probe, &KeyCmp::Reverse, first).is_err());
            // A key length past the page.
            let mut b = clean.clone();
            let off = at(&b, mid);
            b[off + 1..off + 3].copy_from_slice(&4000u16.to_le_bytes());
            let p = Page::new(&b, 1).unwrap();
            assert!(p.lower_bound(&probe, &KeyCmp::Bytes, first).is_err());
            assert!(p.lower_bound(&probe, &KeyCmp::Reverse, first).is_err());
            // A key shorter than the prefix (its hint kept, so that the step reads it).
            let mut b = clean.clone();
            b[off + 1..off + 3].copy_from_slice(&1u16.to_le_bytes());
            let p = Page::new(&b, 1).unwrap();
            assert!(p.prefix().len() > 1);
            assert!(p.lower_bound(&probe, &KeyCmp::Bytes, first).is_err());
            assert!(p.check_hints().is_err());
            // Random damage to the slots and the node area: any answer but a panic.
            for _ in 0..if cfg!(miri) { 20 } else { 3000 } {
                let mut b = clean.clone();
                for _ in 0..1 + below(&mut r, 4) {
                    let pos = if below(&mut r, 2) == 0 {
                        slot(below(&mut r, n))
                    } else {
                        upper + below(&mut r, 4096 - upper)
                    } + below(&mut r, 4);
                    b[pos.min(4095)] = r.next_u64() as u8;
                }
                let p = Page::new(&b, 1).unwrap();
                for q in [&probe, &held[first], &held[n - 1], &keys[0]] {
                    for order in [KeyCmp::Bytes, KeyCmp::Reverse] {
                        let _ = p.lower_bound(q, &order, first);
                        let _ = p.child_index(q, &order);
                    }
                }
            }
        }
    }

    /// A page filled from empty one insert at a time, in random order (a tree's first leaf),
    /// has the common prefix of its keys, not none: the first insert sets the prefix to the
    /// whole key and later ones shrink it.
    #[test]
    fn inserts_from_empty_keep_the_common_prefix() {
        let mut r = rng();
        for kind in [KIND_LEAF, KIND_BRANCH] {
            let mut b = vec![0u8; 4096];
            PageMut::init(&mut b, kind, true);
            let mut held: Vec<Vec<u8>> = Vec::new();
            if kind == KIND_BRANCH {
                let n = NodeIn {
                    flags: 0,
                    key: b"",
                    val: &[1u8; 8],
                    vlen: 8,
                };
                assert!(PageMut::new(&mut b).insert(0, &n).unwrap());
            }
            let first = usize::from(kind == KIND_BRANCH);
            for _ in 0..100 {
                let k = format!("0000000000{:06}", below(&mut r, 300_000)).into_bytes();
                let p = Page::new(&b, 1).unwrap();
                let (i, exact) = p.lower_bound(&k, &KeyCmp::Bytes, first).unwrap();
                if exact {
                    continue;
                }
                let n = NodeIn {
                    flags: 0,
                    key: &k,
                    val: &[2u8; 8],
                    vlen: 8,
                };
                assert!(PageMut::new(&mut b).insert(i, &n).unwrap());
                held.insert(i - first, k);
                let p = Page::new(&b, 1).unwrap();
                p.check_hints().unwrap();
                let common = if held.len() == 1 {
                    held[0].len()
                } else {
                    common_prefix(&held[0], &held[held.len() - 1])
                };
                assert_eq!(p.prefix().len(), common);
            }
            assert!(held.len() > 90);
            assert!(Page::new(&b, 1).unwrap().prefix().len() >= 10);
        }
    }
}
