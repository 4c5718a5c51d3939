//! One B+tree built bottom-up from its keys in order: the current leaf and one open branch
//! page per level above it. A full page is completed (queued in the sink, whose writer sets
//! its prefix and hints and seals it) and its first key's separator is carried to the level above, which opens when
//! first needed; [`Tree::finish`] completes the open pages bottom-up and returns the record.
//!
//! Invariants:
//! - Pages are filled by appends (`format::fill`): no slot moves, prefix and hints set once
//!   after the page completes, by the sink's writer (`out.rs`).
//! - Leaves are filled completely before the next starts (as appends through the write path
//!   leave them); every completed page holds at least one node (a branch's slot 0, keyless).
//! - Separators: on a hinted tree (bytewise order) the shortest prefix of a leaf's first key
//!   that sorts after the previous leaf's last key, else the whole first key; a branch page's
//!   separator is the separator of its first child, carried up. So every key under a branch
//!   slot lies at or above its separator and below the next one, as the checker requires.
//! - The keys pushed are strictly increasing (the caller checks, in the tree's order).

use super::Sink;
use crate::error::{Error, Result};
use crate::format::{
    self, DbRecord, NodeIn, PackedLeaf, PackedLeafMut, PageMut, KIND_BRANCH, KIND_LEAF,
};

/// A branch level: its open page, the separator of that page's first child (carried up when
/// the page completes; none for the first page of a level), and pages completed so far.
struct Level {
    page: Vec<u8>,
    n: usize,
    sep: Option<Vec<u8>>,
    done: u64,
}

/// A tree being built.
pub(crate) struct Tree {
    hinted: bool,
    /// Packed leaves of this value size (a DUPFIXED sub-tree), else slotted leaves.
    packed: Option<usize>,
    leaf: Vec<u8>,
    leaf_n: usize,
    /// The current leaf's separator (none for the first leaf).
    leaf_sep: Option<Vec<u8>>,
    /// The last key placed.
    last: Vec<u8>,
    levels: Vec<Level>,
    pub(crate) rec: DbRecord,
}

impl Tree {
    /// An empty tree with pages of `ps` bytes (`hinted`: bytewise order, prefix and hints kept;
    /// `packed`: a DUPFIXED sub-tree of values of that size).
    pub(crate) fn new(ps: usize, hinted: bool, packed: Option<usize>) -> Tree {
        let mut leaf = vec![0u8; ps];
        match packed {
            Some(size) => {
                PackedLeafMut::init(&mut leaf, size);
            }
            None => {
                PageMut::init(&mut leaf, KIND_LEAF, hinted);
            }
        }
        Tree {
            hinted,
            packed,
            leaf,
            leaf_n: 0,
            leaf_sep: None,
            last: Vec::new(),
            levels: Vec::new(),
            rec: DbRecord {
                flags: packed.map_or(0, |s| s as u16),
                ..DbRecord::default()
            },
        }
    }

    /// Whether nothing has been placed.
    pub(crate) fn is_empty(&self) -> bool {
        self.leaf_n == 0 && self.rec.leaf_pages == 0
    }

    /// Whether the leaves are packed (a DUPFIXED sub-tree).
    pub(crate) fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// The last key (value, in a sub-tree) placed.
    pub(crate) fn last_value(&self) -> &[u8] {
        &self.last
    }

    /// The separator between the last key placed and `next`, the first key of a new leaf.
    fn separator(&self, next: &[u8]) -> Vec<u8> {
        if self.hinted && self.packed.is_none() {
            let c = format::common_prefix(&self.last, next);
            next[..(c + 1).min(next.len())].to_vec()
        } else {
            next.to_vec()
        }
    }

    /// Places a node (slotted leaves) after every node placed so far; returns the leaf image
    /// and the slot it took, for the caller to read it back.
    pub(crate) fn push(&mut self, sink: &mut Sink, n: &NodeIn<'_>) -> Result<(&[u8], usize)> {
        if !PageMut::new(&mut self.leaf).append_unhinted(n) {
            self.complete_leaf(sink)?;
            self.leaf_sep = Some(self.separator(n.key));
            PageMut::init(&mut self.leaf, KIND_LEAF, self.hinted);
            if !PageMut::new(&mut self.leaf).append_unhinted(n) {
                return Err(Error::internal("a node larger than an empty leaf"));
            }
        }
        self.last.clear();
        self.last.extend_from_slice(n.key);
        self.leaf_n += 1;
        self.rec.entries += 1;
        Ok((&self.leaf, self.leaf_n - 1))
    }

    /// Places a value (packed leaves) after every value placed so far; returns the value as
    /// it lies in the leaf.
    pub(crate) fn push_packed(&mut self, sink: &mut Sink, v: &[u8]) -> Result<&[u8]> {
        let size = self
            .packed
            .ok_or_else(|| Error::internal("packed value in a slotted tree"))?;
        if !PackedLeafMut::new(&mut self.leaf).append(v)? {
            self.complete_leaf(sink)?;
            self.leaf_sep = Some(self.separator(v));
            PackedLeafMut::init(&mut self.leaf, size);
            if !PackedLeafMut::new(&mut self.leaf).append(v)? {
                return Err(Error::internal("a value larger than an empty packed leaf"));
            }
        }
        self.last.clear();
        self.last.extend_from_slice(v);
        self.leaf_n += 1;
        self.rec.entries += 1;
        PackedLeaf::new(&self.leaf, 0, Some(size))?.key(self.leaf_n - 1)
    }

    /// Completes the current leaf and carries it up.
    fn complete_leaf(&mut self, sink: &mut Sink) -> Result<()> {
        let pg = sink.page(&mut self.leaf)?;
        self.rec.leaf_pages += 1;
        self.leaf_n = 0;
        let sep = self.leaf_sep.take();
        self.carry(sink, 0, sep, pg)
    }

    /// Adds child `pg` (whose separator is `sep`) to branch level `at`, completing full pages
    /// and carrying them up (bounded by the tree's height: each step goes one level up).
    fn carry(
        &mut self,
        sink: &mut Sink,
        mut at: usize,
        mut sep: Option<Vec<u8>>,
        mut pg: u64,
    ) -> Result<()> {
        let ps = sink.page_size();
        for _ in 0..=usize::from(format::MAX_TREE_DEPTH) {
            if at == self.levels.len() {
                let mut page = vec![0u8; ps];
                PageMut::init(&mut page, KIND_BRANCH, self.hinted);
                self.levels.push(Level {
                    page,
                    n: 0,
                    sep: None,
                    done: 0,
                });
            }
            let hinted = self.hinted;
            let l = &mut self.levels[at];
            let child = pg.to_le_bytes();
            let keyless = NodeIn {
                flags: 0,
                key: &[],
                val: &child,
                vlen: 8,
            };
            if l.n == 0 {
                if !PageMut::new(&mut l.page).append_unhinted(&keyless) {
                    return Err(Error::internal("a child reference does not fit a branch"));
                }
                l.n = 1;
                l.sep = sep;
                return Ok(());
            }
            let key = sep
                .as_deref()
                .ok_or_else(|| Error::internal("a later child without a separator"))?;
            let node = NodeIn {
                flags: 0,
                key,
                val: &child,
                vlen: 8,
            };
            if PageMut::new(&mut l.page).append_unhinted(&node) {
                l.n += 1;
                return Ok(());
            }
            // Full: complete it; the child opens the level's next page.
            let done = sink.page(&mut l.page)?;
            l.done += 1;
            let up = l.sep.take();
            PageMut::init(&mut l.page, KIND_BRANCH, hinted);
            if !PageMut::new(&mut l.page).append_unhinted(&keyless) {
                return Err(Error::internal("a child reference does not fit a branch"));
            }
            l.n = 1;
            l.sep = sep;
            self.rec.branch_pages += 1;
            at += 1;
            sep = up;
            pg = done;
        }
        Err(Error::internal(
            "a bulk-built tree deeper than the depth limit",
        ))
    }

    /// Completes every open page bottom-up and returns the tree's record (root 0 when
    /// nothing was placed).
    pub(crate) fn finish(mut self, sink: &mut Sink) -> Result<DbRecord> {
        if self.is_empty() {
            return Ok(self.rec);
        }
        if self.levels.is_empty() {
            // One leaf: it is the root.
            self.rec.root = sink.page(&mut self.leaf)?;
            self.rec.leaf_pages += 1;
            self.rec.depth = 1;
            return Ok(self.rec);
        }
        self.complete_leaf(sink)?;
        let mut at = 0;
        // Bounded: a level is added above `at` only while completing it.
        while at < self.levels.len() {
            let top = at + 1 == self.levels.len();
            let l = &mut self.levels[at];
            let pg = sink.page(&mut l.page)?;
            self.rec.branch_pages += 1;
            if top && l.done == 0 {
                // The level's only page, with at least two children: the root.
                self.rec.root = pg;
                self.rec.depth = u16::try_from(at + 2)
                    .map_err(|_| Error::internal("bulk-built tree too deep"))?;
                return Ok(self.rec);
            }
            l.done += 1;
            let sep = l.sep.take();
            self.carry(sink, at + 1, sep, pg)?;
            at += 1;
        }
        Err(Error::internal("a bulk-built tree without a root"))
    }
}
