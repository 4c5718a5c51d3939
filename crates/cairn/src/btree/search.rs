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
    mut path: Option<&mut Path>,
) -> Result<Option<(u64, Page<'a>, usize, bool)>> {
    if rec.root == 0 {
        return Ok(None);
    }
    let mut pgno = rec.root;
    let depth = usize::from(rec.depth).min(MAX_DEPTH);
    for level in 1..=depth {
        let p = tree_page(src, pgno)?;
        if p.is_leaf() != (level == depth) {
            return Err(Error::corrupted(format!(
                "page {pgno} at level {level} of a tree of depth {depth}"
            )));
        }
        if p.is_leaf() {
            let (i, exact) = p.lower_bound(key, cmp, 0)?;
            return Ok(Some((pgno, p, i, exact)));
        }
        let i = p.child_index(key, cmp)?;
        if let Some(path) = path.as_deref_mut() {
            path.push((pgno, i))?;
        }
        pgno = p.child(i)?;
    }
    Err(Error::corrupted(format!(
        "tree of depth {depth} with root {}",
        rec.root
    )))
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
                let fixed = super::dups::DupOrder::of(rec.flags).fixed;
                return Ok(Some(super::dups::first_value(src, &n, fixed)?));
            }
            Ok(Some(node_value(src, &n)?))
        }
        _ => Ok(None),
    }
}
