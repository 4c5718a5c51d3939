//! Deletion: remove from the leaf, then merge pages that fell under a quarter full into a
//! sibling when the two fit in one page, up to the root, which collapses when it has one child.

use super::{
    build_page, build_page_in, count_page, hinted, page_nodes, search, touch_path, tree_page,
    PageWriter, Path,
};
use crate::error::Result;
use crate::format::{self, DbRecord, KeyCmp, NodeIn, PageMut, KIND_BRANCH, KIND_LEAF};

/// The nodes of a page, borrowed from its image.
fn borrowed_nodes<'a>(p: &format::Page<'a>) -> Result<Vec<NodeIn<'a>>> {
    (0..p.nkeys())
        .map(|i| p.node(i).map(|n| NodeIn::from_node(&n)))
        .collect()
}

/// Deletes `key`; false if it was absent (nothing is touched then).
pub fn delete<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
) -> Result<bool> {
    delete_with(w, rec, cmp, key, true)
}

/// Deletes `key`; with `merge` false, pages are merged only when they become empty (the free
/// tree's own updates at commit use this, so that merging and splitting cannot take turns
/// forever while the free set is being persisted).
pub fn delete_with<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    merge: bool,
) -> Result<bool> {
    delete_node_at(w, rec, cmp, key, merge, false, &mut None)
}

/// Deletes the node of the named database `name` from the main tree (dropping the
/// database); false if absent. A plain key of that name is refused.
pub fn delete_db_node<W: PageWriter + ?Sized>(
    w: &mut W,
    main: &mut DbRecord,
    cmp: &KeyCmp,
    name: &[u8],
) -> Result<bool> {
    delete_node_at(w, main, cmp, name, true, true, &mut None)
}

/// `delete_with` without merging (the free tree's updates at commit), also returning the leaf
/// the key was deleted from and the slot before the key's, when the leaf keeps other keys (no
/// page was freed then, rebalancing had nothing to do): a hint for [`delete_in_leaf`] and
/// [`super::insert::put_in_leaf`], so that a run of sorted deletes descends once per leaf, not
/// once per key. None when the key was absent or the leaf emptied.
pub fn delete_landing<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
) -> Result<Option<(u64, usize)>> {
    let mut landed = None;
    delete_node_at(w, rec, cmp, key, false, false, &mut landed)?;
    Ok(landed)
}

/// `delete_with` of a node that is a named database's (`db`) or is not: the other kind is
/// refused, changing nothing. Sets `landed` to the leaf and the slot before the key's when
/// the leaf kept other keys and nothing was merged (`merge` false).
fn delete_node_at<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    merge: bool,
    db: bool,
    landed: &mut Option<(u64, usize)>,
) -> Result<bool> {
    // A read-only descent first, so that deleting an absent key touches nothing. When it ends
    // in a dirty leaf, the whole path is dirty (a page is made writable only below a writable
    // parent) and serves as it is; else the path it recorded is made writable.
    let mut path = Path::default();
    let Some((pg, p, i, true)) = search::find_leaf_path(w, rec, cmp, key, Some(&mut path))? else {
        return Ok(false);
    };
    let found_db = p.node(i)?.is_db();
    if found_db != db {
        return Err(super::db_node_mismatch(key, found_db));
    }
    let pg = if w.is_dirty(pg) {
        pg
    } else {
        touch_path(w, rec, &mut path, pg)?
    };
    // Without merging, a leaf that keeps a key is left where it is (rebalancing acts only on
    // an emptied one), so it stays a dirty leaf of the tree.
    let keeps = !merge && tree_page(w, pg)?.nkeys() >= 2;
    remove_at(w, rec, cmp, path, pg, i, merge)?;
    if keeps {
        *landed = Some((pg, i.saturating_sub(1)));
    }
    Ok(true)
}

/// Deletes `key` straight from `leaf` when it is there and the leaf keeps other keys: the
/// shortcut of a run of sorted deletes (the free tree's updates at commit), with `leaf` a
/// dirty leaf of the tree of `rec` (where the previous change of the run landed, no page
/// freed since). Returns the key's former slot, or None, having changed nothing, when the
/// shortcut does not apply. Without merging (the free tree's rule) a leaf that keeps a key
/// needs nothing above it to change.
pub fn delete_in_leaf<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    leaf: u64,
    key: &[u8],
) -> Result<Option<usize>> {
    let p = tree_page(w, leaf)?;
    if !p.is_leaf() || p.nkeys() < 2 {
        return Ok(None);
    }
    let (i, exact) = p.lower_bound(key, cmp, 0)?;
    if !exact || p.node(i)?.flags & (format::NF_BIG | format::NF_DB) != 0 {
        return Ok(None);
    }
    PageMut::new(w.page_mut(leaf)?).remove(i);
    rec.entries = rec.entries.saturating_sub(1);
    Ok(Some(i))
}

/// Removes slot `i` of dirty leaf `pg` reached by the dirty `path`, then rebalances.
fn remove_at<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    path: Path,
    pg: u64,
    i: usize,
    merge: bool,
) -> Result<()> {
    let ps = w.page_size();
    let n = tree_page(w, pg)?.node(i)?;
    let removed = format::SLOT + format::NODE_HDR + n.key.len() + n.val.len();
    if n.is_big() {
        let opg = format::decode_u64(n.val)?;
        let span = format::overflow_pages(ps, n.vlen as usize);
        w.free(opg, span)?;
        count_page(rec, format::KIND_OVERFLOW, -(span as i64));
    }
    PageMut::new(w.page_mut(pg)?).remove(i);
    rec.entries = rec.entries.saturating_sub(1);
    rebalance(w, rec, cmp, path, pg, merge, removed)
}

/// Removes child `idx` from the dirty branch `parent` (the child was freed).
pub(crate) fn unlink_child<W: PageWriter + ?Sized>(
    w: &mut W,
    parent: u64,
    idx: usize,
    hint: bool,
) -> Result<()> {
    if idx > 0 {
        PageMut::new(w.page_mut(parent)?).remove(idx);
        return Ok(());
    }
    // Slot 0 of a branch carries no key: the next child takes its place.
    let mut nodes = page_nodes(&tree_page(w, parent)?)?;
    nodes.remove(0);
    if let Some(first) = nodes.first_mut() {
        first.key = Vec::new();
    }
    build_page(w.page_mut(parent)?, KIND_BRANCH, hint, &nodes)
}

/// Restores the fill invariants from `pg` upward (the leaf level of a packed sub-tree is
/// `btree/packed.rs`'s, which hands its parent over).
pub(crate) fn rebalance<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    mut path: Path,
    mut pg: u64,
    merge: bool,
    // Bytes of the node just removed from the leaf `pg` (0 for any other page): see the fill
    // check below.
    mut removed: usize,
) -> Result<()> {
    let ps = w.page_size();
    let hint = hinted(cmp);
    loop {
        let removed_here = std::mem::take(&mut removed);
        let p = tree_page(w, pg)?;
        let nk = p.nkeys();
        let leaf = p.is_leaf();
        let kind = if leaf { KIND_LEAF } else { KIND_BRANCH };
        let Some((parent, idx)) = path.last() else {
            // The root: an empty leaf empties the tree, a branch with one child steps down.
            // Without merging (the free tree at commit), an empty root leaf stays: freeing it
            // would change the free set it records, and the tree would need it again.
            if leaf && nk == 0 && merge {
                w.free(pg, 1)?;
                count_page(rec, KIND_LEAF, -1);
                rec.root = 0;
                rec.depth = 0;
            } else if !leaf && nk == 0 {
                // Every child left: the tree is empty (the free tree keeps an empty root leaf,
                // rebuilt in place from the dirty root).
                if merge {
                    w.free(pg, 1)?;
                    count_page(rec, KIND_BRANCH, -1);
                    rec.root = 0;
                    rec.depth = 0;
                } else {
                    build_page(w.page_mut(pg)?, KIND_LEAF, hint, &[])?;
                    count_page(rec, KIND_BRANCH, -1);
                    count_page(rec, KIND_LEAF, 1);
                    rec.depth = 1;
                }
            } else if !leaf && nk == 1 {
                let child = p.child(0)?;
                w.free(pg, 1)?;
                count_page(rec, KIND_BRANCH, -1);
                rec.root = child;
                rec.depth -= 1;
                if rec.depth == 1 {
                    // A non-empty leaf (possibly packed) is a valid root as it is.
                    return Ok(());
                }
                pg = child;
                continue;
            }
            return Ok(());
        };
        if nk == 0 {
            // An empty page leaves its parent whatever its siblings hold (a sibling too full
            // to absorb a small page can leave a branch with one child, which may empty later).
            // The parent is dirty: it is on the path.
            w.free(pg, 1)?;
            count_page(rec, kind, -1);
            unlink_child(w, parent, idx, hint)?;
            path.pop();
            pg = parent;
            continue;
        }
        // The fill check sums every node; after a removal from a leaf whose other nodes are
        // like the one removed it is skipped while they would fill half the page. Merging is
        // for space only (readers accept any fill), so a misjudged page just stays sparse.
        let like_removed = removed_here > 0 && format::SLOTS_AT + nk * removed_here >= ps / 2;
        if !merge || like_removed || p.uses_at_least(ps / 4)? {
            return Ok(());
        }
        // Merge with a sibling: the right page of the pair is absorbed by the left one.
        let pp = tree_page(w, parent)?;
        let pn = pp.nkeys();
        if pn < 2 {
            return Ok(());
        }
        let (li, ri) = if idx > 0 { (idx - 1, idx) } else { (0, 1) };
        let sep = pp.key(ri)?.to_vec();
        let (lpg0, rpg0) = (pp.child(li)?, pp.child(ri)?);
        let lpg = w.touch(lpg0)?;
        let rpg = w.touch(rpg0)?;
        let mut pm = PageMut::new(w.page_mut(parent)?);
        pm.value_area_mut(li)?.copy_from_slice(&lpg.to_le_bytes());
        pm.value_area_mut(ri)?.copy_from_slice(&rpg.to_le_bytes());
        // Both pages read from copies while the left one is rebuilt (two buffers, not an
        // allocation per node).
        let limg = w.page(lpg)?.to_vec();
        let rimg = w.page(rpg)?.to_vec();
        let mut nodes = borrowed_nodes(&format::Page::new(&limg, lpg)?)?;
        let mut right = borrowed_nodes(&format::Page::new(&rimg, rpg)?)?;
        if !leaf {
            right[0].key = &sep;
        }
        let fits = format::SLOTS_AT
            + nodes
                .iter()
                .chain(right.iter())
                .map(NodeIn::footprint)
                .sum::<usize>()
            <= ps;
        if !fits {
            return Ok(());
        }
        nodes.append(&mut right);
        build_page_in(w.page_mut(lpg)?, kind, hint, &nodes)?;
        super::debug_assert_built(w, lpg, kind, nodes.len());
        w.free(rpg, 1)?;
        count_page(rec, kind, -1);
        PageMut::new(w.page_mut(parent)?).remove(ri);
        debug_assert_eq!(tree_page(w, parent).map(|p| p.nkeys()).ok(), Some(pn - 1));
        path.pop();
        pg = parent;
    }
}
