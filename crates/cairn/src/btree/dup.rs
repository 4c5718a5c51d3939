//! Sorted duplicates (DUPSORT): the values of a key kept sorted and unique, in one of three
//! forms chosen by size (docs/design.md, "Sorted duplicates"):
//! - one value: a plain node (its value may live on overflow pages);
//! - several values whose node fits `format::dups_node_max`: an inline value set (NF_DUPS);
//! - more: a sub-tree (NF_SUBTREE) whose keys are the values, with empty data, ordered by the
//!   database's value order; the node holds the sub-tree's record. The sub-tree is an ordinary
//!   B+tree, so insert, delete and cursors are the main tree's code.
//!
//! Invariants (checked by `check.rs`):
//! - An inline set holds at least two values, strictly increasing by the value order, and its
//!   node fits `dups_node_max`.
//! - A sub-tree holds at least two values, and either is deeper than one leaf or its values
//!   would not fit an inline set of half `dups_node_max`: a set moves back inline only well
//!   below the size that moved it out, so one value coming and going cannot flap the form.
//! - The database record's `entries` counts pairs; its page counts include every sub-tree's.
//! - DUPFIXED: all values of a key have one size; a sub-tree's record keeps it in `flags`.
//!
//! Writes reuse one caller-owned scratch buffer for the sets they build: no allocation per
//! operation once it has grown.

use super::{
    delete, insert, node_value, packed, search, touch_descend, tree_page, PageSource, PageWriter,
    Path, MAX_DEPTH,
};
use crate::db::DbFlags;
use crate::error::{Error, Result};
use crate::format::{
    self, DbRecord, DupSet, DupSetBuilder, KeyCmp, Node, NF_DUPS, NF_SUBTREE, SUBTREE_REC,
};
use insert::{Mode, NewValue};
use std::cmp::Ordering;

/// The value order of a DUPSORT database.
#[derive(Clone, Debug)]
pub struct DupOrder {
    /// How values compare.
    pub cmp: KeyCmp,
    /// DUPFIXED: values of a key have one size and are packed.
    pub fixed: bool,
}

impl DupOrder {
    /// The order of a database with record flags `flags`, or `vcmp` when given.
    pub fn with(flags: u16, vcmp: Option<&KeyCmp>) -> DupOrder {
        let mut o = DupOrder::of(flags);
        if let Some(c) = vcmp {
            o.cmp = c.clone();
        }
        o
    }

    /// The order of a database with record flags `flags`.
    pub fn of(flags: u16) -> DupOrder {
        let f = DbFlags::from_bits_retain(u32::from(flags));
        DupOrder {
            cmp: crate::db::dup_cmp_for(f),
            fixed: f.contains(DbFlags::DUP_FIXED),
        }
    }
}

/// Whether a database record is a DUPSORT database's.
#[inline]
pub fn is_dupsort(rec: &DbRecord) -> bool {
    DbFlags::from_bits_retain(u32::from(rec.flags)).contains(DbFlags::DUP_SORT)
}

/// How one key's values are stored.
#[derive(Clone, Copy, Debug)]
pub enum Form<'a> {
    /// A single value.
    One(&'a [u8]),
    /// An inline value set.
    Inline(DupSet<'a>),
    /// A sub-tree, by its record.
    Tree(DbRecord),
}

impl Form<'_> {
    /// Number of values.
    pub fn count(&self) -> u64 {
        match self {
            Form::One(_) => 1,
            Form::Inline(s) => s.len() as u64,
            Form::Tree(r) => r.entries,
        }
    }
}

/// The form of a leaf node's values.
#[inline]
pub fn form<'a, S: PageSource + ?Sized>(src: &'a S, n: &Node<'a>, fixed: bool) -> Result<Form<'a>> {
    if n.flags & NF_DUPS != 0 {
        Ok(Form::Inline(DupSet::new(n.val, fixed)?))
    } else if n.flags & NF_SUBTREE != 0 {
        let r = DbRecord::decode_sub(n.val)?;
        if r.root == 0 || r.depth == 0 || r.depth as usize > MAX_DEPTH {
            return Err(Error::corrupted(
                "empty or too deep sorted-duplicates sub-tree",
            ));
        }
        Ok(Form::Tree(r))
    } else if n.is_db() {
        // A main database that holds named databases is never DUP_SORT.
        Err(Error::corrupted(format!(
            "named-database node {:?} in a DUP_SORT database",
            String::from_utf8_lossy(n.key)
        )))
    } else {
        Ok(Form::One(node_value(src, n)?))
    }
}

/// The first (or last) key of a non-empty tree.
pub fn edge_key<'a, S: PageSource + ?Sized>(
    src: &'a S,
    rec: &DbRecord,
    last: bool,
) -> Result<&'a [u8]> {
    let mut pg = rec.root;
    for _ in 0..MAX_DEPTH {
        let b = src.page(pg)?;
        if format::is_packed(b) {
            // A DUPFIXED sub-tree's leaf, of the record's value size.
            let l = format::PackedLeaf::new(b, pg, Some(usize::from(rec.flags)))?;
            return l.key(if last { l.nkeys().wrapping_sub(1) } else { 0 });
        }
        let p = format::Page::new(b, pg)?;
        let n = p.nkeys();
        if n == 0 {
            return Err(Error::corrupted(format!(
                "page {pg}: empty page inside a tree"
            )));
        }
        let i = if last { n - 1 } else { 0 };
        if p.is_leaf() {
            return p.key(i);
        }
        pg = p.child(i)?;
    }
    Err(Error::corrupted("tree deeper than the depth limit"))
}

/// The first value of a node of a DUPSORT database (what `get` returns).
#[inline]
pub fn first_value<'a, S: PageSource + ?Sized>(
    src: &'a S,
    n: &Node<'a>,
    fixed: bool,
) -> Result<&'a [u8]> {
    match form(src, n, fixed)? {
        Form::One(v) => Ok(v),
        Form::Inline(s) => s.get(0),
        Form::Tree(r) => edge_key(src, &r, false),
    }
}

/// Number of values under `key` (0 if absent).
pub fn count<S: PageSource + ?Sized>(
    src: &S,
    rec: &DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
) -> Result<u64> {
    match search::find_leaf(src, rec, kcmp, key)? {
        Some((pg, i, true)) => {
            let p = tree_page(src, pg)?;
            let n = p.node(i)?;
            if !is_dupsort(rec) {
                return Ok(1);
            }
            Ok(form(src, &n, DupOrder::of(rec.flags).fixed)?.count())
        }
        _ => Ok(0),
    }
}

/// Options of a DUPSORT put.
#[derive(Clone, Copy, Debug, Default)]
pub struct DupPut {
    /// Fail with `KeyExists` if the key exists at all.
    pub no_overwrite: bool,
    /// Fail with `KeyExists` if the pair exists (else its put is a no-op).
    pub no_dup_data: bool,
    /// The key is the last key or sorts after it.
    pub append: bool,
    /// The value sorts after every value of its key.
    pub append_dup: bool,
}

fn exists(f: DupPut) -> Result<bool> {
    if f.no_dup_data {
        Err(Error::KeyExists)
    } else {
        Ok(false)
    }
}

fn check_fixed(fixed: bool, have: usize, given: usize) -> Result<()> {
    if fixed && have != given {
        return Err(Error::BadValueSize {
            len: given,
            expected: have,
        });
    }
    Ok(())
}

/// Adds the page counts a sub-tree gained (or lost) between `before` and `after` to `rec`.
fn add_pages(rec: &mut DbRecord, before: &DbRecord, after: &DbRecord) {
    rec.branch_pages = (rec.branch_pages + after.branch_pages).wrapping_sub(before.branch_pages);
    rec.leaf_pages = (rec.leaf_pages + after.leaf_pages).wrapping_sub(before.leaf_pages);
}

/// Stores sub-tree record `sub` as `key`'s node (in place when the node already is one).
fn write_sub<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
    sub: &DbRecord,
) -> Result<()> {
    let b = sub.to_bytes();
    insert::put(
        w,
        rec,
        kcmp,
        key,
        NewValue::with_flags(&b, NF_SUBTREE),
        Mode::Upsert,
    )?;
    Ok(())
}

/// Stores sub-tree record `sub` as `key`'s node, which sits at slot `at.1` of leaf `at.0`
/// (found before the sub-tree changed, which leaves main-tree pages alone): in place when that
/// leaf is already dirty, the common case of many values put in one transaction.
fn update_sub<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
    (pgno, i): (u64, usize),
    sub: &DbRecord,
) -> Result<()> {
    if !w.is_dirty(pgno) {
        return write_sub(w, rec, kcmp, key, sub);
    }
    let mut pm = format::PageMut::new(w.page_mut(pgno)?);
    let area = pm.value_area_mut(i)?;
    if area.len() != SUBTREE_REC {
        return Err(Error::internal("sub-tree node moved"));
    }
    area.copy_from_slice(&sub.to_bytes());
    Ok(())
}

/// Builds a sub-tree holding the values of the inline set `set` (sorted), appending.
fn build_subtree<W: PageWriter + ?Sized>(
    w: &mut W,
    set: &[u8],
    ord: &DupOrder,
) -> Result<DbRecord> {
    let set = DupSet::new(set, ord.fixed)?;
    if ord.fixed {
        return packed::build(w, &set, &ord.cmp);
    }
    let mut sub = DbRecord {
        flags: if ord.fixed {
            set.fixed_size() as u16
        } else {
            0
        },
        ..Default::default()
    };
    for j in 0..set.len() {
        insert::put(
            w,
            &mut sub,
            &ord.cmp,
            set.get(j)?,
            NewValue::of(&[]),
            Mode::Append,
        )?;
    }
    Ok(sub)
}

/// Stores the inline set in `set` as `key`'s values: inline if its node fits, else as a new
/// sub-tree. `at`, when given, is where `key`'s node sits in a dirty leaf (a plain or
/// inline-set node): an inline set that fits the page there replaces it in place, since the
/// key stays and nothing above the leaf changes.
fn store_set<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
    set: &[u8],
    ord: &DupOrder,
    at: Option<(u64, usize)>,
) -> Result<()> {
    if format::node_size(key.len(), set.len()) <= format::dups_node_max(w.page_size()) {
        if let Some((pgno, i)) = at {
            let node = format::NodeIn {
                flags: NF_DUPS,
                key,
                val: set,
                vlen: set.len() as u32,
            };
            if format::PageMut::new(w.page_mut(pgno)?).replace(i, &node)? {
                return Ok(());
            }
        }
        insert::put(
            w,
            rec,
            kcmp,
            key,
            NewValue::with_flags(set, NF_DUPS),
            Mode::Upsert,
        )?;
        return Ok(());
    }
    let sub = build_subtree(w, set, ord)?;
    add_pages(rec, &DbRecord::default(), &sub);
    write_sub(w, rec, kcmp, key, &sub)?;
    // The key's node shrank from a set near `dups_node_max` to a sub-tree record, and its
    // leaf split while the sets grew: it may now be mostly empty. It is merged as a leaf a
    // delete left sparse, so that the main tree does not stay deeper than its keys need (once
    // per key that moves out; without it 1,000 keys grown together stayed in 313 leaves).
    let mut path = Path::default();
    let pg = touch_descend(w, rec, kcmp, key, false, &mut path)?.0;
    delete::rebalance(w, rec, kcmp, path, pg, true, 0)
}

/// The orders of a DUPSORT tree: its keys', and a user-supplied order of its values (None:
/// the flags' order).
#[derive(Clone, Copy)]
pub struct Orders<'a> {
    /// The key order.
    pub keys: &'a KeyCmp,
    /// The user's value order, if one is set.
    pub values: Option<&'a KeyCmp>,
}

/// Adds the pair `key`/`val` to a DUPSORT tree. Returns whether it was added (false: it was
/// there already). Keys and values are checked for size by the caller.
pub fn put_ordered<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    Orders {
        keys: kcmp,
        values: vcmp,
    }: Orders<'_>,
    key: &[u8],
    val: &[u8],
    f: DupPut,
    scratch: &mut Vec<u8>,
) -> Result<bool> {
    let ord = DupOrder::with(rec.flags, vcmp);
    // The key's leaf made writable at once: the set or sub-tree record changes in place there.
    let (pgno, i) = match insert::touch_leaf(w, rec, kcmp, key)? {
        Some((pg, i, true)) => (pg, i),
        _ => {
            let mode = if f.append { Mode::Append } else { Mode::Upsert };
            insert::put(w, rec, kcmp, key, NewValue::of(val), mode)?;
            return Ok(true);
        }
    };
    if f.no_overwrite {
        return Err(Error::KeyExists);
    }
    if f.append && kcmp.cmp(edge_key(w, rec, true)?, key) != Ordering::Equal {
        return Err(Error::AppendOrder);
    }
    let p = tree_page(w, pgno)?;
    let n = p.node(i)?;
    // A single value on overflow pages takes the ordinary path, which frees them.
    let replaceable = !n.is_big();
    let fm = form(w, &n, ord.fixed)?;
    match fm {
        Form::One(v0) => {
            check_fixed(ord.fixed, v0.len(), val.len())?;
            let o = ord.cmp.cmp(v0, val);
            if f.append_dup && o != Ordering::Less {
                return Err(Error::AppendOrder);
            }
            if o == Ordering::Equal {
                return exists(f);
            }
            let (a, b) = if o == Ordering::Less {
                (v0, val)
            } else {
                (val, v0)
            };
            let mut bld = DupSetBuilder::new(scratch, 2, ord.fixed);
            bld.push(a);
            bld.push(b);
        }
        Form::Inline(set) => {
            check_fixed(ord.fixed, set.fixed_size(), val.len())?;
            let (pos, exact) = set.search(val, &ord.cmp)?;
            if f.append_dup && pos != set.len() {
                return Err(Error::AppendOrder);
            }
            if exact {
                return exists(f);
            }
            if replaceable {
                let plan = InsertPlan {
                    n: set.len(),
                    pos,
                    start: set.insert_plan(pos)?,
                    old: set.byte_len(),
                    new: set.byte_len() + set.growth(val.len()),
                };
                if insert_in_place(w, key, (pgno, i), plan, val, ord.fixed)? {
                    rec.entries += 1;
                    return Ok(true);
                }
            }
            // Not in place: the set is read again (the page did not change) and rebuilt.
            let set = match form(w, &tree_page(w, pgno)?.node(i)?, ord.fixed)? {
                Form::Inline(s) => s,
                _ => return Err(Error::internal("inline value set moved")),
            };
            let mut bld = DupSetBuilder::new(scratch, set.len() + 1, ord.fixed);
            for j in 0..pos {
                bld.push(set.get(j)?);
            }
            bld.push(val);
            for j in pos..set.len() {
                bld.push(set.get(j)?);
            }
        }
        Form::Tree(mut sub) => {
            check_fixed(ord.fixed, usize::from(sub.flags), val.len())?;
            let before = sub;
            let mode = if f.append_dup {
                Mode::Append
            } else {
                Mode::NoOverwrite
            };
            let out = if ord.fixed {
                packed::put(w, &mut sub, &ord.cmp, val, f.append_dup)
            } else {
                insert::put(w, &mut sub, &ord.cmp, val, NewValue::of(&[]), mode)
            };
            // The descent copied the sub-tree's path even when nothing was added: the
            // record must follow its new root in every case.
            add_pages(rec, &before, &sub);
            if sub != before {
                update_sub(w, rec, kcmp, key, (pgno, i), &sub)?;
            }
            if out? == insert::Outcome::Exists {
                return exists(f);
            }
            rec.entries += 1;
            return Ok(true);
        }
    }
    store_set(
        w,
        rec,
        kcmp,
        key,
        scratch,
        &ord,
        replaceable.then_some((pgno, i)),
    )?;
    rec.entries += 1;
    Ok(true)
}

/// Inserts `val` at index `pos` of the inline set `set` of `key`'s node, which sits at slot
/// `at.1` of the dirty leaf `at.0`: the node grows in place and the values after `pos` move
/// up by a memmove (no rebuild of the set). False (nothing changed) when the grown node would
/// be too large for an inline set or the leaf cannot hold it: the caller takes the general
/// path (a sub-tree, or a split).
fn insert_in_place<W: PageWriter + ?Sized>(
    w: &mut W,
    key: &[u8],
    (pgno, i): (u64, usize),
    plan: InsertPlan,
    val: &[u8],
    fixed: bool,
) -> Result<bool> {
    if format::node_size(key.len(), plan.new) > format::dups_node_max(w.page_size()) {
        return Ok(false);
    }
    let mut pm = format::PageMut::new(w.page_mut(pgno)?);
    if !pm.grow_value(i, plan.new)? {
        return Ok(false);
    }
    let area = pm.value_area_mut(i)?;
    if area.len() != plan.new || plan.new < plan.old {
        return Err(Error::internal("inline value set grown in place"));
    }
    format::dupset_insert(area, plan.n, plan.pos, plan.start, val, fixed);
    Ok(true)
}

/// An in-place insertion into an inline set, checked against the set before the page
/// changes ([`DupSet::insert_plan`]).
struct InsertPlan {
    /// Values in the set.
    n: usize,
    /// Index of the new value.
    pos: usize,
    /// Where value `pos` starts in the data.
    start: usize,
    /// Bytes of the set before and after.
    old: usize,
    new: usize,
}

/// The leaf slot of `key`'s node, found at `at` by a read-only search, made writable: `at`
/// itself when the leaf is dirty, else after a copy-on-write descent.
fn writable_leaf<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
    at: (u64, usize),
) -> Result<(u64, usize)> {
    if w.is_dirty(at.0) {
        return Ok(at);
    }
    match insert::touch_leaf(w, rec, kcmp, key)? {
        Some((pg, i, true)) => Ok((pg, i)),
        _ => Err(Error::internal("a key found by a search is gone")),
    }
}

/// Removes value `pos` from the inline set (of three values or more) of the node at slot
/// `at.1` of the dirty leaf `at.0`: the values after it move down by a memmove and the node
/// shrinks in place.
fn remove_in_place<W: PageWriter + ?Sized>(
    w: &mut W,
    (pgno, i): (u64, usize),
    pos: usize,
    fixed: bool,
) -> Result<()> {
    let mut pm = format::PageMut::new(w.page_mut(pgno)?);
    let (n, span) = {
        let v = pm.view();
        let node = v.node(i)?;
        if node.flags & NF_DUPS == 0 {
            return Err(Error::internal("inline value set moved"));
        }
        let set = DupSet::new(node.val, fixed)?;
        if set.len() < 3 {
            return Err(Error::internal("inline value set shrank"));
        }
        (set.len(), set.remove_plan(pos)?)
    };
    let area = pm.value_area_mut(i)?;
    let new = format::dupset_remove(area, n, pos, span, fixed);
    pm.shrink_value(i, new)
}

/// Makes `val` the only value of `key`: a plain node (on overflow pages if large).
fn store_one<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
    val: &[u8],
) -> Result<()> {
    insert::put(w, rec, kcmp, key, NewValue::of(val), Mode::Upsert)?;
    Ok(())
}

/// Frees a whole sub-tree and takes its pages out of the database's counts.
fn drop_subtree<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    sub: &DbRecord,
) -> Result<()> {
    super::free::free_subtree(w, sub)?;
    add_pages(rec, sub, &DbRecord::default());
    Ok(())
}

/// After a value left sub-tree `sub` of `key`: back to a single value or an inline set when
/// small enough, else the record is written back.
fn shrink<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
    (sub, at): (DbRecord, (u64, usize)),
    ord: &DupOrder,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    if sub.entries == 1 {
        scratch.clear();
        scratch.extend_from_slice(edge_key(w, &sub, false)?);
        drop_subtree(w, rec, &sub)?;
        store_one(w, rec, kcmp, key, scratch)?;
        return Ok(());
    }
    if sub.depth == 1 {
        let size = ord.fixed.then_some(packed::value_size(&sub));
        let p = packed::any_leaf(w, sub.root, size)?;
        let nk = p.nkeys();
        let mut data = 0;
        for j in 0..nk {
            data += p.key(j)?.len();
        }
        let size = format::dupset_size(nk, data, ord.fixed);
        if format::node_size(key.len(), size) <= format::dups_node_max(w.page_size()) / 2 {
            let mut bld = DupSetBuilder::new(scratch, nk, ord.fixed);
            for j in 0..nk {
                bld.push(p.key(j)?);
            }
            drop_subtree(w, rec, &sub)?;
            let set = NewValue {
                bytes: Some(scratch),
                len: size,
                flags: NF_DUPS,
            };
            insert::put(w, rec, kcmp, key, set, Mode::Upsert)?;
            return Ok(());
        }
    }
    update_sub(w, rec, kcmp, key, at, &sub)
}

/// Deletes the pair `key`/`val` from a DUPSORT tree; false if it was absent (nothing changed
/// then).
pub fn delete_pair_ordered<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    Orders {
        keys: kcmp,
        values: vcmp,
    }: Orders<'_>,
    key: &[u8],
    val: &[u8],
    scratch: &mut Vec<u8>,
) -> Result<bool> {
    let ord = DupOrder::with(rec.flags, vcmp);
    let Some((pgno, i, true)) = search::find_leaf(w, rec, kcmp, key)? else {
        return Ok(false);
    };
    let p = tree_page(w, pgno)?;
    let n = p.node(i)?;
    let fm = form(w, &n, ord.fixed)?;
    match fm {
        Form::One(v0) => {
            if ord.cmp.cmp(v0, val) != Ordering::Equal {
                return Ok(false);
            }
            return delete::delete(w, rec, kcmp, key);
        }
        Form::Inline(set) => {
            let (pos, exact) = set.search(val, &ord.cmp)?;
            if !exact {
                return Ok(false);
            }
            if set.len() == 2 {
                scratch.clear();
                scratch.extend_from_slice(set.get(1 - pos)?);
                store_one(w, rec, kcmp, key, scratch)?;
            } else {
                let at = writable_leaf(w, rec, kcmp, key, (pgno, i))?;
                remove_in_place(w, at, pos, ord.fixed)?;
            }
        }
        Form::Tree(mut sub) => {
            let before = sub;
            let gone = if ord.fixed {
                packed::delete(w, &mut sub, &ord.cmp, val)?
            } else {
                delete::delete(w, &mut sub, &ord.cmp, val)?
            };
            if !gone {
                return Ok(false);
            }
            add_pages(rec, &before, &sub);
            shrink(w, rec, kcmp, key, (sub, (pgno, i)), &ord, scratch)?;
        }
    }
    rec.entries = rec.entries.saturating_sub(1);
    Ok(true)
}

/// Deletes `key` with all its values; returns how many values it had (0: absent).
pub fn delete_all<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    kcmp: &KeyCmp,
    key: &[u8],
) -> Result<u64> {
    let Some((pgno, i, true)) = search::find_leaf(w, rec, kcmp, key)? else {
        return Ok(0);
    };
    let p = tree_page(w, pgno)?;
    let n = p.node(i)?;
    let fm = form(w, &n, DupOrder::of(rec.flags).fixed)?;
    let count = fm.count();
    if let Form::Tree(sub) = fm {
        drop_subtree(w, rec, &sub)?;
    }
    delete::delete(w, rec, kcmp, key)?;
    rec.entries = rec.entries.saturating_sub(count - 1);
    Ok(count)
}
