//! Loading one database: its pairs in order become leaf nodes, overflow runs, inline value
//! sets or sub-trees, as the write path would leave them (docs/design.md, "Bulk builder").
//!
//! Invariants:
//! - Pairs arrive in the database's order (keys strictly increasing; in a DUPSORT database the
//!   values of one key strictly increasing in the value order): checked here, typed errors.
//! - A DUPSORT key's values are held in memory only while they could still form an inline set
//!   (at most `dups_node_max` bytes); the value that would overflow it starts a sub-tree, which
//!   takes the held values and every later one as they come (a key of 100,000 values holds
//!   one sub-tree page per level, not its values). The forms are the ones the write path
//!   picks: one value, a plain node; an inline set while its node fits `dups_node_max`;
//!   beyond, a sub-tree (never back: that happens only on deletes).
//! - Every pair is read back, right after it is placed, from the page image just built
//!   (through the format's read side: the node's key, its value or overflow reference, the
//!   inline set, the sub-tree leaf) and compared with the pair given; a difference is an
//!   error. This is the migration's verification in place of reading the new file back. A
//!   value on overflow pages is written from the bytes given (its reference and length are
//!   compared).

use super::tree::Tree;
use super::BulkWriter;
use crate::db::{cmp_for, dup_cmp_for, DbFlags};
use crate::error::{Error, Result};
use crate::format::{
    self, DbRecord, DupSet, DupSetBuilder, KeyCmp, NodeIn, NF_BIG, NF_DB, NF_DUPS, NF_SUBTREE,
};
use std::cmp::Ordering;

/// What a finished load returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Loaded {
    /// The database's record (for the meta, or for its name's node in the main database).
    pub record: DbRecord,
    /// Pairs loaded and read back (named databases' records in the main database not
    /// counted).
    pub pairs: u64,
}

/// The values of the current DUPSORT key not yet in a sub-tree.
#[derive(Default)]
struct Held {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Held {
    fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }
    fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
    }
}

/// One database being loaded (see the module's documentation).
pub struct DbLoad {
    ps: usize,
    flags: u16,
    kcmp: KeyCmp,
    /// DUPSORT: the value order and whether values have one size (DUPFIXED).
    dups: Option<(KeyCmp, bool)>,
    tree: Tree,
    pairs: u64,
    /// Entries of the record (pairs plus named databases' records).
    entries: u64,
    /// Overflow pages and the pages of finished sub-trees.
    extra: DbRecord,
    /// DUPSORT: the current key, its values held inline and its sub-tree once it has one.
    key: Vec<u8>,
    has_key: bool,
    held: Held,
    sub: Option<Tree>,
    set: Vec<u8>,
    key_max: usize,
}

impl DbLoad {
    pub(super) fn new(ps: usize, flags: u16) -> Result<DbLoad> {
        if flags & !format::DB_RECORD_FLAGS != 0 {
            return Err(Error::Invalid(format!("database flags {flags:#x}")));
        }
        let f = DbFlags::from_bits_retain(u32::from(flags));
        let kcmp = cmp_for(f);
        let dups = f
            .contains(DbFlags::DUP_SORT)
            .then(|| (dup_cmp_for(f), f.contains(DbFlags::DUP_FIXED)));
        if dups.is_none()
            && [
                DbFlags::DUP_FIXED,
                DbFlags::INTEGER_DUP,
                DbFlags::REVERSE_DUP,
            ]
            .iter()
            .any(|&x| f.contains(x))
        {
            return Err(Error::Invalid(
                "DUP_FIXED, INTEGER_DUP and REVERSE_DUP need DUP_SORT".into(),
            ));
        }
        let hinted = crate::btree::hinted(&kcmp);
        Ok(DbLoad {
            ps,
            flags,
            kcmp,
            dups,
            tree: Tree::new(ps, hinted, None),
            pairs: 0,
            entries: 0,
            extra: DbRecord::default(),
            key: Vec::new(),
            has_key: false,
            held: Held::default(),
            sub: None,
            set: Vec::new(),
            key_max: format::max_key_size(ps),
        })
    }

    /// Whether `k` may follow the previous key, and is a key this database can hold.
    fn check_key(&self, k: &[u8], last: Option<&[u8]>) -> Result<()> {
        if k.len() > self.key_max {
            return Err(Error::KeyTooLarge {
                len: k.len(),
                max: self.key_max,
            });
        }
        if matches!(self.kcmp, KeyCmp::Integer) && k.len() != 4 && k.len() != 8 {
            return Err(Error::BadIntegerKey { len: k.len() });
        }
        if let Some(l) = last {
            if self.kcmp.cmp(l, k) != Ordering::Less {
                return Err(Error::Invalid(format!(
                    "bulk load: key {k:?} does not sort after the key before it ({l:?})"
                )));
            }
        }
        Ok(())
    }

    /// Adds a pair. Keys (and a DUPSORT key's values) must come in order.
    pub fn push(&mut self, w: &mut BulkWriter, k: &[u8], v: &[u8]) -> Result<()> {
        if self.dups.is_some() {
            return self.push_dup(w, k, v);
        }
        let last = (!self.tree.is_empty()).then_some(());
        self.check_key(k, last.map(|()| self.last_key()))?;
        self.place_single(w, k, v)?;
        Ok(())
    }

    /// The last key placed: the tree's own copy, but in a DUPSORT database, whose current
    /// key is held here until its node is written.
    fn last_key(&self) -> &[u8] {
        if self.dups.is_none() {
            self.tree.last_value()
        } else {
            &self.key
        }
    }

    /// Places a key with one value (inline, or on an overflow run) and hashes it back.
    fn place_single(&mut self, w: &mut BulkWriter, k: &[u8], v: &[u8]) -> Result<()> {
        if v.len() > format::MAX_VALUE {
            return Err(Error::ValueTooLarge {
                len: v.len(),
                max: format::MAX_VALUE,
            });
        }
        let sink = &mut w.sink;
        if format::value_inline(self.ps, k.len(), v.len()) {
            let (b, i) = self.tree.push(
                sink,
                &NodeIn {
                    flags: 0,
                    key: k,
                    val: v,
                    vlen: v.len() as u32,
                },
            )?;
            let p = format::Page::new(b, 0)?;
            let n = p.node(i)?;
            if n.key != k || n.val != v || n.flags != 0 {
                return Err(misread(k));
            }
        } else {
            let (pg, span) = sink.overflow(v)?;
            self.extra.overflow_pages += span;
            let r = pg.to_le_bytes();
            let (b, i) = self.tree.push(
                sink,
                &NodeIn {
                    flags: NF_BIG,
                    key: k,
                    val: &r,
                    vlen: v.len() as u32,
                },
            )?;
            let p = format::Page::new(b, 0)?;
            let n = p.node(i)?;
            if n.key != k || format::decode_u64(n.val)? != pg || n.vlen as usize != v.len() {
                return Err(misread(k));
            }
        }
        self.pairs += 1;
        self.entries += 1;
        Ok(())
    }

    /// Adds a named database's record under its name (main database only; the name sorts
    /// among the keys as any key).
    pub fn push_db(&mut self, w: &mut BulkWriter, name: &[u8], rec: &DbRecord) -> Result<()> {
        if self.dups.is_some() || matches!(self.kcmp, KeyCmp::Integer) {
            return Err(Error::Incompatible {
                existing: u32::from(self.flags),
                requested: 0,
                what: "a DUP_SORT or INTEGER_KEY main database holds no named databases".into(),
            });
        }
        if name.is_empty() {
            return Err(Error::Invalid("an empty database name".into()));
        }
        let last = (!self.tree.is_empty()).then_some(());
        self.check_key(name, last.map(|()| self.last_key()))?;
        // The named database's pages are its own record's, not the main database's.
        self.push_record(w, NF_DB, name, rec)?;
        self.entries += 1;
        Ok(())
    }

    /// Places a node whose value area is a database record: a named database's (NF_DB) or a
    /// key's sub-tree (NF_SUBTREE; the same 48-byte layout).
    fn push_record(
        &mut self,
        w: &mut BulkWriter,
        flags: u8,
        key: &[u8],
        rec: &DbRecord,
    ) -> Result<()> {
        let mut b = [0u8; format::DB_RECORD];
        rec.encode(&mut b);
        self.tree.push(
            &mut w.sink,
            &NodeIn {
                flags,
                key,
                val: &b,
                vlen: format::DB_RECORD as u32,
            },
        )?;
        Ok(())
    }

    fn push_dup(&mut self, w: &mut BulkWriter, k: &[u8], v: &[u8]) -> Result<()> {
        let (vcmp, fixed) = self.dups.clone().expect("a DUPSORT load");
        let same = self.has_key && self.kcmp.cmp(&self.key, k) == Ordering::Equal;
        if !same {
            let last = self.has_key.then_some(());
            self.check_key(k, last.map(|()| self.last_key()))?;
            if self.has_key {
                self.end_key(w)?;
            }
            self.key.clear();
            self.key.extend_from_slice(k);
            self.has_key = true;
        }
        // Values are sub-tree keys: limited like keys, INTEGERDUP ones 4 or 8 bytes, DUPFIXED
        // ones all of one size, and strictly increasing.
        if v.len() > self.key_max {
            return Err(Error::ValueTooLarge {
                len: v.len(),
                max: self.key_max,
            });
        }
        if matches!(vcmp, KeyCmp::Integer) && v.len() != 4 && v.len() != 8 {
            return Err(Error::BadValueSize {
                len: v.len(),
                expected: if v.len() < 6 { 4 } else { 8 },
            });
        }
        let count = self.held.ends.len() as u64 + self.sub.as_ref().map_or(0, |s| s.rec.entries);
        if count > 0 {
            let prev: &[u8] = match &self.sub {
                Some(s) if self.held.ends.is_empty() => s.last_value(),
                _ => self.held.get(self.held.ends.len() - 1),
            };
            if fixed && prev.len() != v.len() {
                return Err(Error::BadValueSize {
                    len: v.len(),
                    expected: prev.len(),
                });
            }
            if vcmp.cmp(prev, v) != Ordering::Less {
                return Err(Error::Invalid(format!(
                    "bulk load: key {k:?}: value {v:?} does not sort after the value before it"
                )));
            }
        }
        if let Some(sub) = &mut self.sub {
            if sub_push(sub, &mut w.sink, v)? != v {
                return Err(misread(k));
            }
            return Ok(());
        }
        self.held.data.extend_from_slice(v);
        self.held.ends.push(self.held.data.len());
        let n = self.held.ends.len();
        let inline = format::dupset_size(n, self.held.data.len(), fixed);
        if n >= 2 && format::node_size(self.key.len(), inline) > format::dups_node_max(self.ps) {
            // Too large for an inline set: every value so far goes to a new sub-tree.
            let mut sub = Tree::new(
                self.ps,
                crate::btree::hinted(&vcmp),
                fixed.then_some(v.len()),
            );
            for i in 0..n {
                let v = self.held.get(i);
                if sub_push(&mut sub, &mut w.sink, v)? != v {
                    return Err(misread(&self.key));
                }
            }
            self.held.clear();
            self.sub = Some(sub);
        }
        Ok(())
    }

    /// Writes the current DUPSORT key's node: one value, an inline set or its sub-tree.
    fn end_key(&mut self, w: &mut BulkWriter) -> Result<()> {
        let fixed = self.dups.as_ref().is_some_and(|d| d.1);
        let key = std::mem::take(&mut self.key);
        let r = self.end_key_of(w, &key, fixed);
        self.key = key;
        r
    }

    fn end_key_of(&mut self, w: &mut BulkWriter, key: &[u8], fixed: bool) -> Result<()> {
        if let Some(sub) = self.sub.take() {
            let rec = sub.finish(&mut w.sink)?;
            self.push_record(w, NF_SUBTREE, key, &rec)?;
            self.extra.branch_pages += rec.branch_pages;
            self.extra.leaf_pages += rec.leaf_pages;
            self.pairs += rec.entries;
            self.entries += rec.entries;
            return Ok(());
        }
        let n = self.held.ends.len();
        if n == 1 {
            let v = std::mem::take(&mut self.held.data);
            let r = self.place_single(w, key, &v);
            self.held.data = v;
            self.held.clear();
            return r;
        }
        let mut b = DupSetBuilder::new(&mut self.set, n, fixed);
        for i in 0..n {
            b.push(self.held.get(i));
        }
        let (page, i) = self.tree.push(
            &mut w.sink,
            &NodeIn {
                flags: NF_DUPS,
                key,
                val: &self.set,
                vlen: self.set.len() as u32,
            },
        )?;
        let p = format::Page::new(page, 0)?;
        let nd = p.node(i)?;
        let set = DupSet::new(nd.val, fixed)?;
        if nd.key != key || nd.flags != NF_DUPS || set.len() != n {
            return Err(misread(key));
        }
        for j in 0..n {
            if set.get(j)? != self.held.get(j) {
                return Err(misread(key));
            }
        }
        self.pairs += n as u64;
        self.entries += n as u64;
        self.held.clear();
        Ok(())
    }

    /// Completes the database: its record and pair count.
    pub fn finish(mut self, w: &mut BulkWriter) -> Result<Loaded> {
        if self.dups.is_some() && self.has_key {
            self.end_key(w)?;
        }
        let mut record = self.tree.finish(&mut w.sink)?;
        record.entries = self.entries;
        record.branch_pages += self.extra.branch_pages;
        record.leaf_pages += self.extra.leaf_pages;
        record.overflow_pages += self.extra.overflow_pages;
        record.flags = self.flags;
        record.order = 0;
        Ok(Loaded {
            record,
            pairs: self.pairs,
        })
    }
}

/// The error for a pair that does not read back from its page as it was given (a bug in the
/// builder or the format, never the input's fault).
#[cold]
fn misread(k: &[u8]) -> Error {
    Error::internal(format!(
        "bulk build: the pair of key {k:?} does not read back from its page as given"
    ))
}

/// Pushes a value into a sub-tree (packed or slotted leaves); returns it as it lies there.
fn sub_push<'t>(sub: &'t mut Tree, sink: &mut super::Sink, v: &[u8]) -> Result<&'t [u8]> {
    if sub.is_packed() {
        return sub.push_packed(sink, v);
    }
    let (b, i) = sub.push(
        sink,
        &NodeIn {
            flags: 0,
            key: v,
            val: &[],
            vlen: 0,
        },
    )?;
    format::Page::new(b, 0)?.key(i)
}
