//! A small writer of LMDB-format files for the tests, for what LMDB on this machine cannot be
//! asked to write: page sizes other than the OS page size (LMDB 0.9 takes the OS's for a new
//! environment, and reads whatever size an existing file's meta records). One main database of
//! sorted pairs: leaves filled in order, overflow runs for big values, one branch level above
//! when there is more than one leaf. LMDB's own tools (mdb_dump) read what it writes.

#![allow(dead_code)]

const P_BRANCH: u16 = 0x01;
const P_LEAF: u16 = 0x02;
const P_OVERFLOW: u16 = 0x04;
const P_META: u16 = 0x08;
const F_BIGDATA: u16 = 0x01;

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

struct Page {
    buf: Vec<u8>,
    lower: usize,
    upper: usize,
}

impl Page {
    fn new(psize: usize, pgno: u64, flags: u16) -> Page {
        let mut buf = vec![0u8; psize];
        put64(&mut buf, 0, pgno);
        put16(&mut buf, 10, flags);
        Page {
            buf,
            lower: 16,
            upper: psize,
        }
    }

    fn fits(&self, node: usize) -> bool {
        self.lower + 2 + node.next_multiple_of(2) <= self.upper
    }

    /// Appends a node (header fields given) with `key` and `data`.
    fn add(&mut self, lo: u16, hi: u16, flags: u16, key: &[u8], data: &[u8]) {
        let size = (8 + key.len() + data.len()).next_multiple_of(2);
        self.upper -= size;
        let o = self.upper;
        put16(&mut self.buf, o, lo);
        put16(&mut self.buf, o + 2, hi);
        put16(&mut self.buf, o + 4, flags);
        put16(&mut self.buf, o + 6, key.len() as u16);
        self.buf[o + 8..o + 8 + key.len()].copy_from_slice(key);
        self.buf[o + 8 + key.len()..o + 8 + key.len() + data.len()].copy_from_slice(data);
        let l = self.lower;
        put16(&mut self.buf, l, o as u16);
        self.lower += 2;
    }

    fn finish(mut self) -> Vec<u8> {
        let (l, u) = (self.lower as u16, self.upper as u16);
        put16(&mut self.buf, 12, l);
        put16(&mut self.buf, 14, u);
        self.buf
    }
}

/// An LMDB data file of page size `psize` whose main database holds `pairs` (sorted by key,
/// unique keys). Values longer than a quarter page go to overflow runs.
pub fn lmdb_file(psize: usize, pairs: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut pages: Vec<Vec<u8>> = vec![Vec::new(), Vec::new()];
    let mut leaves: Vec<(u64, Vec<u8>)> = Vec::new(); // (pgno, first key)
    let mut cur: Option<(Page, Vec<u8>)> = None;
    let mut overflow = 0u64;
    // Leaves and overflow runs get page numbers as they are made; a leaf's number is taken
    // when it is started, so its runs follow it.
    let mut pending: Vec<(usize, Page)> = Vec::new();
    let mut next = 2u64;
    let mut slots: Vec<Option<Vec<u8>>> = Vec::new();
    let mut alloc = |n: u64, slots: &mut Vec<Option<Vec<u8>>>| {
        let p = next;
        next += n;
        for _ in 0..n {
            slots.push(None);
        }
        p
    };
    for (k, v) in pairs {
        let big = v.len() > psize / 4;
        let node = 8 + k.len() + if big { 8 } else { v.len() };
        if cur.as_ref().is_none_or(|(p, _)| !p.fits(node)) {
            if let Some((p, first)) = cur.take() {
                let pg = u64::from_le_bytes(p.buf[0..8].try_into().unwrap());
                leaves.push((pg, first));
                pending.push(((pg - 2) as usize, p));
            }
            let pg = alloc(1, &mut slots);
            cur = Some((Page::new(psize, pg, P_LEAF), k.clone()));
        }
        let (page, _) = cur.as_mut().unwrap();
        if big {
            let n = (v.len() + 16).div_ceil(psize) as u64;
            let first = alloc(n, &mut slots);
            let mut run = vec![0u8; n as usize * psize];
            put64(&mut run, 0, first);
            put16(&mut run, 10, P_OVERFLOW);
            put32(&mut run, 12, n as u32);
            run[16..16 + v.len()].copy_from_slice(v);
            for i in 0..n as usize {
                slots[(first - 2) as usize + i] = Some(run[i * psize..(i + 1) * psize].to_vec());
            }
            overflow += n;
            let len = v.len() as u32;
            page.add(
                len as u16,
                (len >> 16) as u16,
                F_BIGDATA,
                k,
                &first.to_le_bytes(),
            );
        } else {
            let len = v.len() as u32;
            page.add(len as u16, (len >> 16) as u16, 0, k, v);
        }
    }
    if let Some((p, first)) = cur.take() {
        let pg = u64::from_le_bytes(p.buf[0..8].try_into().unwrap());
        leaves.push((pg, first));
        pending.push(((pg - 2) as usize, p));
    }
    for (i, p) in pending {
        slots[i] = Some(p.finish());
    }
    let (root, depth, branches) = match leaves.len() {
        0 => (u64::MAX, 0u16, 0u64),
        1 => (leaves[0].0, 1, 0),
        _ => {
            let pg = alloc(1, &mut slots);
            let mut b = Page::new(psize, pg, P_BRANCH);
            for (i, (child, first)) in leaves.iter().enumerate() {
                let key: &[u8] = if i == 0 { &[] } else { first };
                assert!(
                    b.fits(8 + key.len()),
                    "one branch page is too small for this test"
                );
                b.add(
                    *child as u16,
                    (*child >> 16) as u16,
                    (*child >> 32) as u16,
                    key,
                    &[],
                );
            }
            slots[(pg - 2) as usize] = Some(b.finish());
            (pg, 2, 1)
        }
    };
    for s in slots {
        pages.push(s.expect("every page written"));
    }
    let npages = pages.len() as u64;
    for (slot, txnid) in [(0usize, 2u64), (1, 1)] {
        let mut m = vec![0u8; psize];
        put64(&mut m, 0, slot as u64);
        put16(&mut m, 10, P_META);
        put32(&mut m, 16, 0xBEEF_C0DE);
        put32(&mut m, 20, 1);
        put64(
            &mut m,
            32,
            (npages * psize as u64).next_multiple_of(1 << 20) * 2,
        );
        // Free database: empty, its pad the page size, INTEGERKEY.
        put32(&mut m, 40, psize as u32);
        put16(&mut m, 44, 0x08);
        put64(&mut m, 40 + 40, u64::MAX);
        // Main database.
        put16(&mut m, 88 + 6, depth);
        put64(&mut m, 88 + 8, branches);
        put64(&mut m, 88 + 16, leaves.len() as u64);
        put64(&mut m, 88 + 24, overflow);
        put64(&mut m, 88 + 32, pairs.len() as u64);
        put64(&mut m, 88 + 40, root);
        put64(&mut m, 136, npages - 1);
        put64(&mut m, 144, txnid);
        pages[slot] = m;
    }
    pages.concat()
}
