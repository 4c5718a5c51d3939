//! Sorted-duplicates sub-trees of DUPFIXED databases, whose leaves are packed (kind 5,
//! `format/packed.rs`: values back to back, no slots, no node headers; LMDB's LEAF2 pages).
//! Their branch pages are ordinary branch pages keyed by values, so the branch levels of a
//! split or a merge are the main tree's code (`insert::split`, `delete::rebalance`); this
//! module handles the leaf level: search, insertion (memmove) with splits, removal with merges.
//!
//! Invariants (checked by `check.rs`), beyond those of every tree:
//! - Every leaf of a DUPFIXED sub-tree is a packed leaf whose value size is the sub-tree
//!   record's `flags`; values strictly increase by the value order, within and across leaves.
//! - A leaf under a quarter full is merged into a sibling when both fit one leaf; an emptied
//!   leaf always leaves its parent.
//! - A sorted load (APPEND_DUP, or a set moved out of a node) leaves full leaves: a leaf split
//!   at its end keeps the left leaf full and starts the right one with the new value.

use super::{
    build_page, count_page, delete, hinted, insert, search, touch_branches, touch_path, tree_page,
    OwnedNode, PageSource, PageWriter, Path,
};
use crate::error::{Error, Result};
use crate::format::{
    self, DbRecord, DupSet, KeyCmp, Leaf, PackedLeaf, PackedLeafMut, PageMut, KIND_BRANCH,
    KIND_LEAF,
};
use insert::Outcome;
use std::cmp::Ordering;

/// The value size of the packed sub-tree of record `sub`.
#[inline]
pub fn value_size(sub: &DbRecord) -> usize {
    usize::from(sub.flags)
}

/// The packed leaf `pgno` of a sub-tree of `size`-byte values.
#[inline]
pub fn leaf<S: PageSource + ?Sized>(src: &S, pgno: u64, size: usize) -> Result<PackedLeaf<'_>> {
    PackedLeaf::new(src.page(pgno)?, pgno, Some(size))
}

/// A sub-tree leaf: packed when `size` is given (the sub-tree of a DUPFIXED database), else
/// a page of nodes.
#[inline]
pub fn any_leaf<S: PageSource + ?Sized>(
    src: &S,
    pgno: u64,
    size: Option<usize>,
) -> Result<Leaf<'_>> {
    match size {
        Some(s) => Ok(Leaf::Packed(leaf(src, pgno, s)?)),
        None => {
            let p = tree_page(src, pgno)?;
            if !p.is_leaf() {
                return Err(Error::corrupted(format!(
                    "page {pgno}: a branch at the leaf level"
                )));
            }
            Ok(Leaf::Nodes(p))
        }
    }
}

/// The leaf where `val` is or would be, the index there and whether it is there; records the
/// branches passed in `path` when given. Read-only.
fn find<S: PageSource + ?Sized>(
    src: &S,
    sub: &DbRecord,
    cmp: &KeyCmp,
    val: &[u8],
    path: Option<&mut Path>,
) -> Result<(u64, usize, bool)> {
    let pg = search::leaf_level(src, sub, cmp, val, path)?;
    let (i, exact) = leaf(src, pg, value_size(sub))?.lower_bound(val, cmp);
    Ok((pg, i, exact))
}

/// Adds `val` (of the sub-tree's value size) to the packed sub-tree `sub` (which may be
/// empty: root 0). `append`: `val` must sort after every value (else `AppendOrder`).
/// Returns `Inserted`, or `Exists` when it was there (nothing added; the path to its leaf
/// was still made writable, so the record's root may have moved).
pub fn put<W: PageWriter + ?Sized>(
    w: &mut W,
    sub: &mut DbRecord,
    cmp: &KeyCmp,
    val: &[u8],
    append: bool,
) -> Result<Outcome> {
    let size = value_size(sub);
    if size == 0 || val.len() != size {
        return Err(Error::internal("packed sub-tree put of a wrong size"));
    }
    if sub.root == 0 {
        let pg = w.alloc(1)?;
        PackedLeafMut::init(w.page_mut(pg)?, size);
        count_page(sub, KIND_LEAF, 1);
        sub.root = pg;
        sub.depth = 1;
    }
    let mut path = Path::default();
    let pg = touch_branches(w, sub, cmp, val, append, &mut path)?;
    // The leaf is dirty now: one lookup for reading and changing it.
    let b = w.page_mut(pg)?;
    let l = PackedLeaf::new(b, pg, Some(size))?;
    let (i, exact) = if append {
        let n = l.nkeys();
        if n > 0 && cmp.cmp(l.key(n - 1)?, val) != Ordering::Less {
            return Err(Error::AppendOrder);
        }
        (n, false)
    } else {
        l.lower_bound(val, cmp)
    };
    if exact {
        return Ok(Outcome::Exists);
    }
    sub.entries += 1;
    if !PackedLeafMut::new(b).insert(i, val)? {
        split(w, sub, cmp, path, (pg, i), val, append)?;
    }
    Ok(Outcome::Inserted)
}

/// Builds a packed sub-tree holding the values of the DUPFIXED inline set `set` (sorted).
pub fn build<W: PageWriter + ?Sized>(
    w: &mut W,
    set: &DupSet<'_>,
    cmp: &KeyCmp,
) -> Result<DbRecord> {
    let mut sub = DbRecord {
        flags: set.fixed_size() as u16,
        ..Default::default()
    };
    for j in 0..set.len() {
        put(w, &mut sub, cmp, set.get(j)?, true)?;
    }
    Ok(sub)
}

/// Splits the full dirty leaf `pg` while inserting `val` at index `at`, then carries the new
/// separator (the right leaf's first value) up the path.
fn split<W: PageWriter + ?Sized>(
    w: &mut W,
    sub: &mut DbRecord,
    cmp: &KeyCmp,
    mut path: Path,
    (pg, at): (u64, usize),
    val: &[u8],
    append: bool,
) -> Result<()> {
    let size = value_size(sub);
    let (n, mut all) = {
        let l = leaf(w, pg, size)?;
        (l.nkeys(), l.values_from(0).to_vec())
    };
    all.splice(at * size..at * size, val.iter().copied());
    // At the end of the leaf (a sorted load): the left leaf stays full, the right one starts
    // with the new value. At its start: the new value alone on the left. Else halves.
    let m = if append || at == n {
        n
    } else if at == 0 {
        1
    } else {
        n.div_ceil(2)
    };
    let internal = || Error::internal("packed leaf split overflows");
    let mut lm = PackedLeafMut::new(w.page_mut(pg)?);
    lm.truncate(0);
    if !lm.append(&all[..m * size])? {
        return Err(internal());
    }
    let rpg = w.alloc(1)?;
    if !PackedLeafMut::init(w.page_mut(rpg)?, size).append(&all[m * size..])? {
        return Err(internal());
    }
    count_page(sub, KIND_LEAF, 1);
    let up = OwnedNode {
        flags: 0,
        key: all[m * size..(m + 1) * size].to_vec(),
        val: rpg.to_le_bytes().to_vec(),
        vlen: 8,
    };
    match path.pop() {
        None => {
            let left = OwnedNode {
                flags: 0,
                key: Vec::new(),
                val: pg.to_le_bytes().to_vec(),
                vlen: 8,
            };
            let root = w.alloc(1)?;
            build_page(w.page_mut(root)?, KIND_BRANCH, hinted(cmp), &[left, up])?;
            count_page(sub, KIND_BRANCH, 1);
            sub.root = root;
            sub.depth += 1;
            Ok(())
        }
        Some((parent, idx)) => {
            if PageMut::new(w.page_mut(parent)?).insert(idx + 1, &up.as_in())? {
                return Ok(());
            }
            // A branch split: no leaf landing to report.
            insert::split(w, sub, cmp, path, parent, idx + 1, up, append).map(drop)
        }
    }
}

/// Deletes `val` from the packed sub-tree `sub`; false if it was absent (nothing is touched
/// then). The sub-tree may end empty (root 0).
pub fn delete<W: PageWriter + ?Sized>(
    w: &mut W,
    sub: &mut DbRecord,
    cmp: &KeyCmp,
    val: &[u8],
) -> Result<bool> {
    let size = value_size(sub);
    if val.len() != size {
        return Ok(false);
    }
    // A read-only search first; a dirty leaf has a dirty path, else the path it recorded is
    // made writable (see `delete::delete_with`).
    let mut path = Path::default();
    let (pg, i, exact) = find(w, sub, cmp, val, Some(&mut path))?;
    if !exact {
        return Ok(false);
    }
    let pg = if w.is_dirty(pg) {
        pg
    } else {
        touch_path(w, sub, &mut path, pg)?
    };
    PackedLeafMut::new(w.page_mut(pg)?).remove(i);
    sub.entries = sub.entries.saturating_sub(1);
    rebalance(w, sub, cmp, path, pg)?;
    Ok(true)
}

/// After a removal from the dirty leaf `pg`: an empty leaf leaves its parent; one under a
/// quarter full absorbs (or is absorbed by) a sibling when both fit one leaf; then the
/// branches above are rebalanced as in any tree.
fn rebalance<W: PageWriter + ?Sized>(
    w: &mut W,
    sub: &mut DbRecord,
    cmp: &KeyCmp,
    mut path: Path,
    pg: u64,
) -> Result<()> {
    let size = value_size(sub);
    let n = leaf(w, pg, size)?.nkeys();
    let Some((parent, idx)) = path.last() else {
        if n == 0 {
            w.free(pg, 1)?;
            count_page(sub, KIND_LEAF, -1);
            sub.root = 0;
            sub.depth = 0;
        }
        return Ok(());
    };
    if n == 0 {
        w.free(pg, 1)?;
        count_page(sub, KIND_LEAF, -1);
        delete::unlink_child(w, parent, idx, hinted(cmp))?;
        path.pop();
        return delete::rebalance(w, sub, cmp, path, parent, true, 0);
    }
    let cap = format::packed_capacity(w.page_size(), size);
    if n * 4 >= cap {
        return Ok(());
    }
    let pp = tree_page(w, parent)?;
    if pp.nkeys() < 2 {
        return Ok(());
    }
    let (li, ri) = if idx > 0 { (idx - 1, idx) } else { (0, 1) };
    let (lpg0, rpg) = (pp.child(li)?, pp.child(ri)?);
    let right = leaf(w, rpg, size)?;
    if leaf(w, lpg0, size)?.nkeys() + right.nkeys() > cap {
        return Ok(());
    }
    let rvals = right.values_from(0).to_vec();
    // The left leaf takes the right one's values; the right one is freed (never copied).
    let lpg = w.touch(lpg0)?;
    if lpg != lpg0 {
        PageMut::new(w.page_mut(parent)?)
            .value_area_mut(li)?
            .copy_from_slice(&lpg.to_le_bytes());
    }
    if !PackedLeafMut::new(w.page_mut(lpg)?).append(&rvals)? {
        return Err(Error::internal("packed leaf merge overflows"));
    }
    w.free(rpg, 1)?;
    count_page(sub, KIND_LEAF, -1);
    PageMut::new(w.page_mut(parent)?).remove(ri);
    path.pop();
    delete::rebalance(w, sub, cmp, path, parent, true, 0)
}
