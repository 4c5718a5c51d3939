//! Freeing a whole tree (dropping or clearing a database, replacing a sorted-duplicates
//! sub-tree).

use super::{PageWriter, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord};

/// Frees every page of a tree, sorted-duplicates sub-trees included.
pub(crate) fn free_tree<W: PageWriter + ?Sized>(w: &mut W, rec: &DbRecord) -> Result<()> {
    free_tree_level(w, rec, true)
}

/// Frees every page of one sorted-duplicates sub-tree (packed leaves included).
pub(crate) fn free_subtree<W: PageWriter + ?Sized>(w: &mut W, sub: &DbRecord) -> Result<()> {
    free_tree_level(w, sub, false)
}

fn free_tree_level<W: PageWriter + ?Sized>(w: &mut W, rec: &DbRecord, top: bool) -> Result<()> {
    if rec.root == 0 {
        return Ok(());
    }
    let ps = w.page_size();
    let mut stack = vec![(rec.root, 0usize)];
    let mut pages = Vec::new();
    let mut overflow = Vec::new();
    let mut subtrees = Vec::new();
    let limit = rec.branch_pages + rec.leaf_pages + 1;
    while let Some((pg, depth)) = stack.pop() {
        if depth > MAX_DEPTH || pages.len() as u64 > limit {
            return Err(Error::corrupted("tree larger than its record says"));
        }
        let b = w.page(pg)?;
        if !top && format::is_packed(b) {
            // A packed leaf of a DUPFIXED sub-tree: values only, nothing hangs below it.
            format::PackedLeaf::new(b, pg, Some(usize::from(rec.flags)))?;
            pages.push(pg);
            continue;
        }
        let p = format::Page::new(b, pg)?;
        for i in 0..p.nkeys() {
            let n = p.node(i)?;
            if p.is_leaf() {
                if n.flags & format::NF_SUBTREE != 0 {
                    // A sorted-duplicates sub-tree: its pages are counted in `rec` too.
                    if !top {
                        return Err(Error::corrupted("sub-tree inside a sub-tree"));
                    }
                    subtrees.push(DbRecord::decode_sub(n.val)?);
                } else if n.is_big() {
                    overflow.push((
                        format::decode_u64(n.val)?,
                        format::overflow_pages(ps, n.vlen as usize),
                    ));
                }
            } else {
                stack.push((format::decode_u64(n.val)?, depth + 1));
            }
        }
        pages.push(pg);
    }
    for pg in pages {
        w.free(pg, 1)?;
    }
    for (pg, span) in overflow {
        w.free(pg, span)?;
    }
    for sub in subtrees {
        if sub.root == 0 || sub.depth as usize > MAX_DEPTH {
            return Err(Error::corrupted("bad sorted-duplicates sub-tree record"));
        }
        free_tree_level(w, &sub, false)?;
    }
    Ok(())
}
