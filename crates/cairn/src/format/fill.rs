//! Filling a branch or leaf page in key order from empty (the bulk builder's pages): a node is
//! appended after the last slot with no slot moved and no prefix or hint kept up to date; once
//! the page is full, [`PageMut::refresh_prefix`] sets the prefix from its first and last keys
//! and every hint in one pass.
//!
//! Invariant: between the first append and `refresh_prefix` the page's prefix length is zero
//! and its hints are not meaningful; the page must not be read through a search until then.

use super::*;

impl PageMut<'_> {
    /// Appends `n` as the last node of a page filled in order (see the module's
    /// documentation); false, changing nothing, when it does not fit the gap.
    #[inline]
    pub fn append_unhinted(&mut self, n: &NodeIn) -> bool {
        let nk = self.nkeys();
        let need = n.footprint();
        if self.gap() < need {
            return false;
        }
        let off = self.upper() - (need - SLOT);
        let (klen, vlen) = (n.key.len(), n.val.len());
        self.b[off] = n.flags;
        put_u16(self.b, off + 1, klen as u16);
        put_u32(self.b, off + 3, n.vlen);
        let kat = off + NODE_HDR;
        self.b[kat..kat + klen].copy_from_slice(n.key);
        self.b[kat + klen..kat + klen + vlen].copy_from_slice(n.val);
        put_u32(self.b, H_UPPER, off as u32);
        let s = SLOTS_AT + nk * SLOT;
        put_u16(self.b, s, off as u16);
        put_u16(self.b, s + 2, 0);
        put_u16(self.b, H_NKEYS, (nk + 1) as u16);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page filled by appends and finished by `refresh_prefix` is the page the general
    /// insert builds from the same nodes: same nodes, prefix and hints (the bytes of the prefix
    /// area past its length may differ: nothing reads them).
    #[test]
    fn appends_then_refresh_equal_inserts() {
        for kind in [KIND_LEAF, KIND_BRANCH] {
            let mut a = vec![0u8; 4096];
            let mut b = vec![0u8; 4096];
            PageMut::init(&mut a, kind, true);
            PageMut::init(&mut b, kind, true);
            let child = 7u64.to_le_bytes();
            let keys: Vec<Vec<u8>> = (0..400u32)
                .map(|i| {
                    if kind == KIND_BRANCH && i == 0 {
                        Vec::new()
                    } else {
                        format!("user/{:05}", i * 3).into_bytes()
                    }
                })
                .collect();
            let mut n = 0;
            for k in &keys {
                let node = NodeIn {
                    flags: 0,
                    key: k,
                    val: if kind == KIND_LEAF { &k[..] } else { &child },
                    vlen: if kind == KIND_LEAF { k.len() as u32 } else { 8 },
                };
                let fits = PageMut::new(&mut a).append_unhinted(&node);
                assert_eq!(fits, PageMut::new(&mut b).insert(n, &node).unwrap());
                if !fits {
                    break;
                }
                n += 1;
            }
            assert!(n > 10 && n < 400, "{n}");
            PageMut::new(&mut a).refresh_prefix().unwrap();
            PageMut::new(&mut b).refresh_prefix().unwrap();
            let (pa, pb) = (Page::new(&a, 1).unwrap(), Page::new(&b, 1).unwrap());
            pa.check_hints().unwrap();
            assert_eq!(pa.nkeys(), pb.nkeys());
            assert!(pa.prefix() == pb.prefix(), "prefixes differ");
            assert_eq!(pa.upper(), pb.upper());
            let first = usize::from(kind == KIND_BRANCH);
            for i in 0..pa.nkeys() {
                let (x, y) = (pa.node(i).unwrap(), pb.node(i).unwrap());
                assert!(
                    x.key == y.key && x.val == y.val && x.flags == y.flags,
                    "node {i}"
                );
                if i >= first {
                    assert_eq!(pa.slot(i), pb.slot(i), "slot {i}");
                }
            }
        }
    }
}
