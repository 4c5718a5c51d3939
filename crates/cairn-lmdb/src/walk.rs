//! Walking trees in key order, one page per level in memory: a database's pairs, duplicates
//! (sub-pages and sub-trees) and overflow values included.
//!
//! Bounds: a tree is at most its record's depth (itself at most [`format::MAX_DEPTH`]) deep,
//! every page number is checked against the snapshot's last page before it is read, every page
//! is visited at most once per walk (a second visit is a cycle, or pages shared between trees,
//! and an error), so a walk reads each page at most once and ends. Memory: one page buffer per
//! level of the tree and of a duplicate sub-tree, the current key and value, and one bit per
//! page of the file for the visited set.

use crate::env::{LmdbEnv, PageRef};
use crate::error::{Error, Result};
use crate::format::{
    self, DbRecord, Node, Slotted, F_BIGDATA, F_DUPDATA, F_SUBDATA, NO_PAGE, PAGE_HEADER, P_BRANCH,
    P_LEAF, P_LEAF2, P_META, P_OVERFLOW, P_SUBP,
};
use std::cmp::Ordering;

/// Pages already visited: one bit per page of the snapshot.
#[derive(Debug)]
pub struct Seen {
    bits: Vec<u64>,
}

impl Seen {
    /// An empty set over `npages` pages.
    pub fn new(npages: u64) -> Seen {
        Seen {
            bits: vec![0; npages.div_ceil(64) as usize],
        }
    }

    /// Marks `pgno` (in range: checked by the caller); false if it was marked already.
    pub fn visit(&mut self, pgno: u64) -> bool {
        let (w, b) = ((pgno / 64) as usize, pgno % 64);
        let old = self.bits[w];
        self.bits[w] = old | (1 << b);
        old & (1 << b) == 0
    }

    /// Whether `pgno` was visited.
    pub fn contains(&self, pgno: u64) -> bool {
        self.bits
            .get((pgno / 64) as usize)
            .is_some_and(|w| w & (1 << (pgno % 64)) != 0)
    }

    /// Adds `other`'s pages to this set; the first page both held, if any (a page two trees
    /// claim).
    pub fn merge(&mut self, other: &Seen) -> Option<u64> {
        let mut first = None;
        for (i, (a, b)) in self.bits.iter_mut().zip(&other.bits).enumerate() {
            if first.is_none() && *a & *b != 0 {
                first = Some(i as u64 * 64 + u64::from((*a & *b).trailing_zeros()));
            }
            *a |= *b;
        }
        first
    }

    /// Pages visited.
    pub fn count(&self) -> u64 {
        self.bits.iter().map(|w| u64::from(w.count_ones())).sum()
    }
}

#[derive(Debug)]
struct Level {
    buf: PageRef,
    pgno: u64,
    idx: usize,
    s: Slotted,
    leaf: bool,
}

/// Pages a walk counted, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageCounts {
    /// Branch pages.
    pub branch: u64,
    /// Leaf pages.
    pub leaf: u64,
    /// Overflow pages.
    pub overflow: u64,
}

/// An in-order walk over a tree's leaf entries.
#[derive(Debug)]
pub struct Walk {
    root: u64,
    depth: u16,
    leaf2: bool,
    stack: Vec<Level>,
    started: bool,
    /// Pages of this tree, by kind.
    pub counts: PageCounts,
}

impl Walk {
    /// A walk over the tree of `rec`; `leaf2`: its leaves are fixed-size (a DUPFIXED set).
    pub fn new(rec: &DbRecord, leaf2: bool) -> Walk {
        Walk {
            root: rec.root,
            depth: rec.depth,
            leaf2,
            stack: Vec::new(),
            started: false,
            counts: PageCounts::default(),
        }
    }

    /// Moves to the next leaf entry; false at the end.
    pub fn next(&mut self, env: &LmdbEnv, seen: &mut Seen) -> Result<bool> {
        if !self.started {
            self.started = true;
            if self.root == NO_PAGE {
                return Ok(false);
            }
            self.push(env, seen, self.root, None)?;
        } else if let Some(top) = self.stack.last_mut() {
            top.idx += 1;
        } else {
            return Ok(false);
        }
        loop {
            let Some(top) = self.stack.last() else {
                return Ok(false);
            };
            if top.idx >= top.s.count {
                self.stack.pop();
                if let Some(t) = self.stack.last_mut() {
                    t.idx += 1;
                }
                continue;
            }
            if top.leaf {
                return Ok(true);
            }
            let n = format::node(&top.buf, &top.s, top.idx, true)
                .map_err(|w| Error::corrupt(top.pgno, w))?;
            let from = (top.pgno, top.idx);
            self.push(env, seen, n.child, Some(from))?;
        }
    }

    fn push(
        &mut self,
        env: &LmdbEnv,
        seen: &mut Seen,
        pgno: u64,
        from: Option<(u64, usize)>,
    ) -> Result<()> {
        let level = self.stack.len() + 1;
        // The description is made only for an error: this runs once per page read.
        let blame = from.map_or(pgno, |(p, _)| p);
        let via = || match from {
            Some((_, i)) => format!("branch node {i} points to page {pgno}"),
            None => format!("root page {pgno}"),
        };
        if pgno < 2 || pgno >= env.pages() {
            return Err(Error::corrupt(
                blame,
                format!("{}, outside pages 2..={}", via(), env.pages() - 1),
            ));
        }
        if level > usize::from(self.depth) {
            return Err(Error::corrupt(
                blame,
                format!(
                    "{} at level {level}, below the tree's recorded depth {}",
                    via(),
                    self.depth
                ),
            ));
        }
        if !seen.visit(pgno) {
            return Err(Error::corrupt(
                blame,
                format!(
                    "{}, which was visited already (a cycle, or a page in two trees)",
                    via()
                ),
            ));
        }
        let buf = env.page(pgno)?;
        let s = format::slotted(&buf).map_err(|w| Error::corrupt(pgno, w))?;
        if s.hdr.pgno != pgno {
            return Err(Error::corrupt(
                pgno,
                format!("its page number field says {} ({})", s.hdr.pgno, via()),
            ));
        }
        let kind = s.hdr.flags & (P_BRANCH | P_LEAF | P_OVERFLOW | P_META | P_LEAF2 | P_SUBP);
        let bottom = level == usize::from(self.depth);
        let leaf = if bottom {
            let want = if self.leaf2 { P_LEAF | P_LEAF2 } else { P_LEAF };
            if kind != want {
                return Err(Error::corrupt(
                    pgno,
                    format!(
                        "page flags {:#x} at the leaf level {level} where a {} page belongs",
                        s.hdr.flags,
                        if self.leaf2 {
                            "fixed-size leaf"
                        } else {
                            "leaf"
                        }
                    ),
                ));
            }
            if s.count == 0 && level > 1 {
                return Err(Error::corrupt(
                    pgno,
                    "a leaf page with no entries below a branch",
                ));
            }
            self.counts.leaf += 1;
            true
        } else {
            if kind != P_BRANCH {
                return Err(Error::corrupt(
                    pgno,
                    format!(
                        "page flags {:#x} at level {level} of a tree of depth {}, where a branch page belongs",
                        s.hdr.flags, self.depth
                    ),
                ));
            }
            if s.count == 0 {
                return Err(Error::corrupt(pgno, "a branch page with no children"));
            }
            self.counts.branch += 1;
            false
        };
        self.stack.push(Level {
            buf,
            pgno,
            idx: 0,
            s,
            leaf,
        });
        Ok(())
    }

    /// The current leaf page's bytes.
    pub fn leaf_bytes(&self) -> &[u8] {
        &self.stack.last().expect("positioned").buf
    }

    /// Whether the current entry is its leaf page's last.
    pub fn at_leaf_end(&self) -> bool {
        self.stack.last().is_some_and(|t| t.idx + 1 >= t.s.count)
    }

    /// The current leaf's page number and entry index.
    pub fn position(&self) -> (u64, usize) {
        let t = self.stack.last().expect("positioned");
        (t.pgno, t.idx)
    }

    /// The current entry of a regular leaf: its page number and node.
    pub fn leaf_node(&self) -> Result<(u64, Node)> {
        let t = self.stack.last().expect("positioned");
        let n = format::node(&t.buf, &t.s, t.idx, false).map_err(|w| Error::corrupt(t.pgno, w))?;
        Ok((t.pgno, n))
    }

    /// The current entry's key range: a node's key, or a fixed-size leaf's item.
    fn key_range(&self) -> Result<(u64, (usize, usize))> {
        let t = self.stack.last().expect("positioned");
        if t.s.hdr.flags & P_LEAF2 != 0 {
            Ok((t.pgno, format::leaf2_key(&t.s, t.idx)))
        } else {
            let n =
                format::node(&t.buf, &t.s, t.idx, false).map_err(|w| Error::corrupt(t.pgno, w))?;
            Ok((t.pgno, n.key))
        }
    }
}

/// The order of keys (or of duplicates) that a database's flags choose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Byte-wise.
    Bytes,
    /// Byte-wise from the last byte (REVERSEKEY / REVERSEDUP), and for native-endian unsigned
    /// integers of one size (INTEGERKEY / INTEGERDUP) on a little-endian machine.
    Reverse,
}

impl Order {
    /// The key order of `flags`.
    pub fn keys(flags: u16) -> Order {
        if flags & (format::REVERSEKEY | format::INTEGERKEY) != 0 {
            Order::Reverse
        } else {
            Order::Bytes
        }
    }

    /// The duplicate order of `flags`.
    pub fn dups(flags: u16) -> Order {
        if flags & (format::REVERSEDUP | format::INTEGERDUP) != 0 {
            Order::Reverse
        } else {
            Order::Bytes
        }
    }

    /// Compares as LMDB's comparator for this order does.
    pub fn cmp(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            Order::Bytes => a.cmp(b),
            Order::Reverse => a
                .iter()
                .rev()
                .cmp(b.iter().rev())
                .then(a.len().cmp(&b.len())),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Val {
    /// A range of the main leaf page.
    Leaf(usize, usize),
    /// The overflow buffer.
    Overflow,
    /// A range of the duplicate sub-tree's leaf page.
    Sub(usize, usize),
}

#[derive(Debug)]
enum Dup {
    None,
    /// A sub-page inside the current leaf node: where it starts, its header, the entry.
    Page {
        base: usize,
        len: usize,
        s: Slotted,
        idx: usize,
    },
    /// A sub-tree: its walk, how many values it records and how many were read.
    Tree {
        walk: Walk,
        expected: u64,
        got: u64,
    },
}

/// A pair as [`Pairs::next_entry`] gives it: key, value, whether it is a named database's
/// record.
pub type Entry<'p> = (&'p [u8], &'p [u8], bool);

/// A database's pairs in order (see [`LmdbEnv::pairs`]). A lending iterator: each pair
/// borrows the walk until the next call.
#[derive(Debug)]
pub struct Pairs<'e> {
    env: &'e LmdbEnv,
    rec: DbRecord,
    main: bool,
    walk: Walk,
    seen: Seen,
    dup: Dup,
    key: (usize, usize),
    val: Val,
    ov: Vec<u8>,
    count: u64,
    /// The last key of the leaf page before the current one (see `advance`).
    last_key: Vec<u8>,
    /// The page of the key returned last (`u64::MAX`: none yet).
    key_pg: u64,
    last_val: Vec<u8>,
    key_order: Order,
    dup_order: Order,
    failed: bool,
    done: bool,
    /// The pair last returned is a named database's record.
    named: bool,
    /// Pages of duplicate sub-trees, by kind.
    pub sub_counts: PageCounts,
    overflow_pages: u64,
}

impl<'e> Pairs<'e> {
    pub(crate) fn new(env: &'e LmdbEnv, rec: &DbRecord, main: bool) -> Pairs<'e> {
        Pairs {
            env,
            rec: *rec,
            main,
            walk: Walk::new(rec, false),
            seen: Seen::new(env.pages()),
            dup: Dup::None,
            key: (0, 0),
            val: Val::Leaf(0, 0),
            ov: Vec::new(),
            count: 0,
            last_key: Vec::new(),
            key_pg: u64::MAX,
            last_val: Vec::new(),
            key_order: Order::keys(rec.flags),
            dup_order: Order::dups(rec.flags),
            failed: false,
            done: false,
            named: false,
            sub_counts: PageCounts::default(),
            overflow_pages: 0,
        }
    }

    /// Pairs read so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The pages visited so far (this tree's and its sub-trees').
    pub fn seen(&self) -> &Seen {
        &self.seen
    }

    /// This tree's own pages read so far (sub-trees apart), by kind.
    pub fn counts(&self) -> PageCounts {
        PageCounts {
            overflow: self.overflow_pages,
            ..self.walk.counts
        }
    }

    /// Whether the pair [`Self::next`] returned last is a named database's record (the main
    /// database's pairs only).
    pub fn is_named_db(&self) -> bool {
        self.named
    }

    /// The pair [`Self::next`] returned last as a named database, its record checked as
    /// [`LmdbEnv::named_dbs`] checks it; None when it is not one.
    pub fn named_db(&self) -> Option<Result<crate::NamedDb>> {
        if !self.named || self.dup_active() {
            return None;
        }
        let (page, _) = self.walk.position();
        let buf = self.walk.leaf_bytes();
        let name = &buf[self.key.0..self.key.1];
        let Val::Leaf(s, e) = self.val else {
            return None;
        };
        Some(
            self.env
                .named_record(page, name, e - s, &buf[s..e])
                .map(|record| crate::NamedDb {
                    name: name.to_vec(),
                    record,
                }),
        )
    }

    fn dup_active(&self) -> bool {
        !matches!(self.dup, Dup::None)
    }

    /// The next pair, or None at the end. After an error the walk is over (every later call
    /// returns None).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<(&[u8], &[u8])>> {
        Ok(self.next_entry()?.map(|(k, v, _)| (k, v)))
    }

    /// As [`Self::next`], with whether the pair is a named database's record (see
    /// [`Self::is_named_db`]).
    pub fn next_entry(&mut self) -> Result<Option<Entry<'_>>> {
        if self.failed || self.done {
            return Ok(None);
        }
        match self.advance() {
            Ok(true) => {}
            Ok(false) => {
                self.done = true;
                return Ok(None);
            }
            Err(e) => {
                self.failed = true;
                return Err(e);
            }
        }
        let kb = &self.walk.leaf_bytes()[self.key.0..self.key.1];
        let vb: &[u8] = match self.val {
            Val::Leaf(s, e) => &self.walk.leaf_bytes()[s..e],
            Val::Overflow => &self.ov,
            Val::Sub(s, e) => match &self.dup {
                Dup::Tree { walk, .. } => &walk.leaf_bytes()[s..e],
                _ => &[],
            },
        };
        Ok(Some((kb, vb, self.named)))
    }

    fn advance(&mut self) -> Result<bool> {
        self.named = false;
        if self.next_dup()? {
            self.count += 1;
            return Ok(true);
        }
        if !self.walk.next(self.env, &mut self.seen)? {
            self.finish()?;
            return Ok(false);
        }
        let (pgno, node) = self.walk.leaf_node()?;
        let prev_key = self.key;
        self.key = node.key;
        let key = &self.walk.leaf_bytes()[node.key.0..node.key.1];
        // The key before this one: on the same page, read in place (a page is visited once
        // per walk, so the same number is the same image); else the copy made of the last
        // key of the page before.
        let prev: &[u8] = if self.key_pg == pgno {
            &self.walk.leaf_bytes()[prev_key.0..prev_key.1]
        } else {
            &self.last_key
        };
        if self.count > 0 && self.key_order.cmp(prev, key) != Ordering::Less {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "key of node {} is not after the key before it",
                    self.walk.position().1
                ),
            ));
        }
        self.key_pg = pgno;
        if self.walk.at_leaf_end() {
            self.last_key.clear();
            self.last_key.extend_from_slice(key);
        }
        let plen = self.walk.leaf_bytes().len();
        let dsize = node.data_size as usize;
        let inline = |what: &str| -> Result<(usize, usize)> {
            if node.data_start + dsize > plen {
                return Err(Error::corrupt(
                    pgno,
                    format!(
                        "node {}: {what} of {dsize} bytes runs past the page end",
                        self.walk.position().1
                    ),
                ));
            }
            Ok((node.data_start, node.data_start + dsize))
        };
        let dupsort = self.rec.flags & format::DUPSORT != 0;
        match node.flags & (F_BIGDATA | F_SUBDATA | F_DUPDATA) {
            0 => {
                let (s, e) = inline("value")?;
                self.val = Val::Leaf(s, e);
            }
            F_SUBDATA if self.main && !dupsort => {
                if dsize != format::DB_RECORD {
                    return Err(Error::corrupt(
                        pgno,
                        format!(
                            "node {}: database record of {dsize} bytes",
                            self.walk.position().1
                        ),
                    ));
                }
                let (s, e) = inline("database record")?;
                self.val = Val::Leaf(s, e);
                self.named = true;
            }
            F_BIGDATA => {
                self.read_overflow(pgno, node)?;
                self.val = Val::Overflow;
            }
            F_DUPDATA if dupsort => {
                let (s, e) = inline("duplicate sub-page")?;
                let sub = &self.walk.leaf_bytes()[s..e];
                let ss = format::slotted(sub).map_err(|w| {
                    Error::corrupt(
                        pgno,
                        format!("node {}'s duplicate sub-page: {w}", self.walk.position().1),
                    )
                })?;
                let want_leaf2 = self.rec.flags & format::DUPFIXED != 0;
                let kind = ss.hdr.flags & (P_BRANCH | P_LEAF | P_LEAF2 | P_OVERFLOW | P_META);
                let ok = if want_leaf2 {
                    kind == P_LEAF | P_LEAF2 || kind == P_LEAF2
                } else {
                    kind == P_LEAF
                };
                if !ok || ss.hdr.flags & P_SUBP == 0 || ss.count == 0 {
                    return Err(Error::corrupt(
                        pgno,
                        format!(
                            "node {}'s duplicate sub-page: flags {:#x}, {} entries",
                            self.walk.position().1,
                            ss.hdr.flags,
                            ss.count
                        ),
                    ));
                }
                self.dup = Dup::Page {
                    base: s,
                    len: e - s,
                    s: ss,
                    idx: 0,
                };
                self.last_val.clear();
                self.set_page_dup(pgno, true)?;
            }
            f if f == F_DUPDATA | F_SUBDATA && dupsort => {
                let (s, e) = inline("duplicate sub-tree record")?;
                let blame = |w: String| {
                    Error::corrupt(
                        pgno,
                        format!("node {}'s duplicate sub-tree: {w}", self.walk.position().1),
                    )
                };
                if e - s != format::DB_RECORD {
                    return Err(blame(format!("record of {} bytes", e - s)));
                }
                let rec = DbRecord::decode(&self.walk.leaf_bytes()[s..e]).expect("48 bytes");
                format::check_record_shape(&rec, self.env.pages() - 1).map_err(blame)?;
                if rec.root == NO_PAGE {
                    return Err(blame("empty".into()));
                }
                let leaf2 = self.rec.flags & format::DUPFIXED != 0;
                let mut walk = Walk::new(&rec, leaf2);
                if !walk.next(self.env, &mut self.seen)? {
                    return Err(blame("holds no values".into()));
                }
                self.dup = Dup::Tree {
                    walk,
                    expected: rec.entries,
                    got: 0,
                };
                self.last_val.clear();
                self.set_tree_dup(true)?;
            }
            f => {
                return Err(Error::corrupt(
                    pgno,
                    format!(
                        "node {}: flags {f:#x} in a {} database",
                        self.walk.position().1,
                        if dupsort {
                            "DUPSORT"
                        } else if self.main {
                            "main"
                        } else {
                            "non-DUPSORT"
                        }
                    ),
                ));
            }
        }
        self.count += 1;
        Ok(true)
    }

    /// Moves within the current duplicate set; false when it is over (or there is none).
    fn next_dup(&mut self) -> Result<bool> {
        match &mut self.dup {
            Dup::None => Ok(false),
            Dup::Page { idx, s, .. } => {
                *idx += 1;
                if *idx >= s.count {
                    self.dup = Dup::None;
                    return Ok(false);
                }
                let pgno = self.walk.position().0;
                self.set_page_dup(pgno, false)?;
                Ok(true)
            }
            Dup::Tree { walk, .. } => {
                if walk.next(self.env, &mut self.seen)? {
                    self.set_tree_dup(false)?;
                    return Ok(true);
                }
                let Dup::Tree {
                    walk,
                    expected,
                    got,
                } = std::mem::replace(&mut self.dup, Dup::None)
                else {
                    unreachable!()
                };
                let c = walk.counts;
                self.sub_counts.branch += c.branch;
                self.sub_counts.leaf += c.leaf;
                if got != expected {
                    let (pgno, idx) = self.walk.position();
                    return Err(Error::corrupt(
                        pgno,
                        format!("node {idx}'s duplicate sub-tree records {expected} values and holds {got}"),
                    ));
                }
                Ok(false)
            }
        }
    }

    fn check_dup_order(
        &mut self,
        pgno: u64,
        v: (usize, usize),
        first: bool,
        sub: bool,
    ) -> Result<()> {
        let bytes = if sub {
            match &self.dup {
                Dup::Tree { walk, .. } => &walk.leaf_bytes()[v.0..v.1],
                _ => &[][..],
            }
        } else {
            &self.walk.leaf_bytes()[v.0..v.1]
        };
        if !first && self.dup_order.cmp(&self.last_val, bytes) != Ordering::Less {
            return Err(Error::corrupt(pgno, "duplicate values out of order"));
        }
        self.last_val.clear();
        self.last_val.extend_from_slice(bytes);
        Ok(())
    }

    fn set_page_dup(&mut self, pgno: u64, first: bool) -> Result<()> {
        let Dup::Page { base, len, s, idx } = &self.dup else {
            unreachable!()
        };
        let (base, len, s, idx) = (*base, *len, *s, *idx);
        let sub = &self.walk.leaf_bytes()[base..base + len];
        let r = if s.hdr.flags & P_LEAF2 != 0 {
            format::leaf2_key(&s, idx)
        } else {
            format::node(sub, &s, idx, false)
                .map_err(|w| Error::corrupt(pgno, format!("duplicate sub-page: {w}")))?
                .key
        };
        let v = (base + r.0, base + r.1);
        self.val = Val::Leaf(v.0, v.1);
        self.check_dup_order(pgno, v, first, false)
    }

    fn set_tree_dup(&mut self, first: bool) -> Result<()> {
        let Dup::Tree { walk, got, .. } = &mut self.dup else {
            unreachable!()
        };
        *got += 1;
        let (pgno, r) = walk.key_range()?;
        self.val = Val::Sub(r.0, r.1);
        self.check_dup_order(pgno, r, first, true)
    }

    fn read_overflow(&mut self, pgno: u64, node: Node) -> Result<()> {
        let idx = self.walk.position().1;
        let buf = self.walk.leaf_bytes();
        let Some(first) = format::u64_at(buf, node.data_start) else {
            return Err(Error::corrupt(
                pgno,
                format!("node {idx}: overflow page number past the page end"),
            ));
        };
        let size = node.data_size as u64;
        let psize = self.env.page_size() as u64;
        let last = self.env.pages() - 1;
        if first < 2 || first > last {
            return Err(Error::corrupt(
                pgno,
                format!("node {idx}: overflow page {first} outside pages 2..={last}"),
            ));
        }
        let mut head = [0u8; PAGE_HEADER];
        self.env.read_at(first, 0, &mut head)?;
        let h = format::PageHeader::decode(&head).expect("16 bytes");
        let run = u64::from(format::PageHeader::overflow_pages(&head).unwrap_or(0));
        if h.flags & (P_OVERFLOW | P_BRANCH | P_LEAF | P_LEAF2 | P_META) != P_OVERFLOW
            || h.pgno != first
        {
            return Err(Error::corrupt(
                first,
                format!("not an overflow page (flags {:#x}, page number field {}), referenced by page {pgno} node {idx}", h.flags, h.pgno),
            ));
        }
        if run == 0 || first + run - 1 > last {
            return Err(Error::corrupt(
                first,
                format!("overflow run of {run} pages from page {first} past the last page {last}"),
            ));
        }
        if size + PAGE_HEADER as u64 > run * psize {
            return Err(Error::corrupt(
                first,
                format!("value of {size} bytes does not fit its run of {run} pages"),
            ));
        }
        // A run may be longer than its value needs: LMDB rewrites a smaller value into the
        // pages of the old one.
        for p in first..first + run {
            if !self.seen.visit(p) {
                return Err(Error::corrupt(
                    pgno,
                    format!("node {idx}: overflow page {p} was visited already (a cycle, or a page in two trees)"),
                ));
            }
        }
        self.overflow_pages += run;
        self.ov.clear();
        self.ov.resize(size as usize, 0);
        self.env.read_at(first, PAGE_HEADER, &mut self.ov)
    }

    /// At the end: the pairs and pages counted against the record.
    fn finish(&mut self) -> Result<()> {
        let root = self.rec.root;
        if self.count != self.rec.entries {
            return Err(Error::corrupt(
                root,
                format!(
                    "the database records {} entries and holds {}",
                    self.rec.entries, self.count
                ),
            ));
        }
        let c = self.counts();
        let r = &self.rec;
        if (c.branch, c.leaf, c.overflow) != (r.branch_pages, r.leaf_pages, r.overflow_pages) {
            return Err(Error::corrupt(
                root,
                format!(
                    "the database records {}/{}/{} branch/leaf/overflow pages and holds {}/{}/{}",
                    r.branch_pages, r.leaf_pages, r.overflow_pages, c.branch, c.leaf, c.overflow
                ),
            ));
        }
        Ok(())
    }
}
