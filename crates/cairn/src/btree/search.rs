//! Point lookup: descend from the root by binary search, no allocation, no copy.

use super::{node_value, tree_page, PageSource, Path, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp, Page};

/// The leaf page and slot where `key` is or would be, plus whether it is there.
#[inline]
pub fn find_leaf<S: PageSource + ?Sized>(
    src: &S,
    rec: &DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
) -> Result<Option<(u64, usize, bool)>> {
    Ok(find_leaf_page(src, rec, cmp, key)?.map(|(pgno, _, i, exact)| (pgno, i, exact)))
}

/// As [`find_leaf`], with the leaf's checked view, so that the caller reads no page twice.
#[inline]
pub fn find_leaf_page<'a, S: PageSource + ?Sized>(
    src: &'a S,
    rec: &DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
) -> Result<Option<(u64, Page<'a>, usize, bool)>> {
    find_leaf_path(src, rec, cmp, key, None)
}

/// [`find_leaf_page`], also recording the branches and slots passed in `path` when given
/// (a delete's search, which changes the leaf in place when it is already dirty).
#[inline]
pub(crate) fn find_leaf_path<'a, S: PageSource + ?Sized>(
    src: &'a S,
    rec: &DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    path: Option<&mut Path>,
) -> Result<Option<(u64, Page<'a>, usize, bool)>> {
    if rec.root == 0 {
        return Ok(None);
    }
    let pgno = leaf_level(src, rec, cmp, key, path)?;
    let p = tree_page(src, pgno)?;
    if !p.is_leaf() {
        return Err(Error::corrupted(format!(
            "page {pgno}: a branch at the leaf level of a tree of depth {}",
            rec.depth
        )));
    }
    let (i, exact) = p.lower_bound(key, cmp, 0)?;
    Ok(Some((pgno, p, i, exact)))
}

/// The read-only descent through the branches of a non-empty tree: the page at the leaf level
/// where `key` belongs, unread (a node leaf, or a packed leaf in a DUPFIXED sub-tree,
/// `packed::find`), recording each branch and the slot taken there in `path` when given.
#[inline]
pub(crate) fn leaf_level<S: PageSource + ?Sized>(
    src: &S,
    rec: &DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    mut path: Option<&mut Path>,
) -> Result<u64> {
    let depth = usize::from(rec.depth);
    if rec.root == 0 || depth == 0 || depth > MAX_DEPTH {
        return Err(Error::corrupted(format!(
            "tree of depth {depth} with root {}",
            rec.root
        )));
    }
    let mut pgno = rec.root;
    for level in 1..depth {
        let p = tree_page(src, pgno)?;
        if p.is_leaf() {
            return Err(Error::corrupted(format!(
                "page {pgno}: a leaf at level {level} of a tree of depth {depth}"
            )));
        }
        let i = p.child_index(key, cmp)?;
        if let Some(path) = path.as_deref_mut() {
            path.push((pgno, i))?;
        }
        pgno = p.child(i)?;
    }
    Ok(pgno)
}

/// The value stored under `key`.
#[inline]
pub fn get<'a, S: PageSource + ?Sized>(
    src: &'a S,
    rec: &DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
) -> Result<Option<&'a [u8]>> {
    match find_leaf_page(src, rec, cmp, key)? {
        Some((_, p, i, true)) => {
            let n = p.node(i)?;
            if n.is_dups() {
                let fixed = super::dup::DupOrder::of(rec.flags).fixed;
                return Ok(Some(super::dup::first_value(src, &n, fixed)?));
            }
            Ok(Some(node_value(src, &n)?))
        }
        _ => Ok(None),
    }
}
