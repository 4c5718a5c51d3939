//! Insertion: copy-on-write descent, then insert into the leaf, splitting pages upward as
//! needed. Appends at the right edge split "at the end" so that sorted loads fill pages.

use super::{
    build_page, build_page_in, count_page, hinted, touch_descend, tree_page, OwnedNode, PageWriter,
    Path,
};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, NodeIn, PageMut, KIND_BRANCH, KIND_LEAF, NF_BIG};

/// How to treat an existing key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Replace its value.
    Upsert,
    /// Leave it and report it.
    NoOverwrite,
    /// The key must be greater than every key of the tree.
    Append,
}

/// What `put` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A new key was added.
    Inserted,
    /// An existing key's value was replaced.
    Replaced,
    /// NoOverwrite and the key exists; nothing changed.
    Exists,
}

/// The value of a node to put: `len` bytes copied from `bytes` (or left zeroed for the caller
/// to fill, when `bytes` is None: RESERVE), stored with node flags `flags` (NF_DUPS or
/// NF_SUBTREE for sorted duplicates, whose value is always small enough to stay inline; else
/// 0).
#[derive(Clone, Copy, Debug)]
pub struct NewValue<'a> {
    /// The bytes, or None for a zeroed value of `len` bytes.
    pub bytes: Option<&'a [u8]>,
    /// The value's length.
    pub len: usize,
    /// The node's NF_* flags.
    pub flags: u8,
}

impl<'a> NewValue<'a> {
    /// A plain value: these bytes.
    pub fn of(bytes: &'a [u8]) -> NewValue<'a> {
        NewValue {
            bytes: Some(bytes),
            len: bytes.len(),
            flags: 0,
        }
    }

    /// These bytes, as a node with flags `flags`.
    pub fn with_flags(bytes: &'a [u8], flags: u8) -> NewValue<'a> {
        NewValue {
            flags,
            ..NewValue::of(bytes)
        }
    }
}

/// Inserts or replaces `key` with the value `val`.
pub fn put<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    val: NewValue<'_>,
    mode: Mode,
) -> Result<Outcome> {
    put_landing(w, rec, cmp, key, val, mode).map(|(o, _)| o)
}

/// Makes the path to the leaf where `key` is or would be writable (copy-on-write, as the
/// descent of a put does), and returns that leaf, the slot, and whether `key` is there; None
/// for an empty tree. For updates of a node in place (a sorted-duplicates value set), where
/// a read-only search followed by a put would descend twice.
pub fn touch_leaf<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
) -> Result<Option<(u64, usize, bool)>> {
    if rec.root == 0 {
        return Ok(None);
    }
    let (pg, p) = touch_descend(w, rec, cmp, key, false, &mut Path::default())?;
    let (i, exact) = p.lower_bound(key, cmp, 0)?;
    Ok(Some((pg, i, exact)))
}

/// [`put`], also returning the (dirty) leaf that holds the key afterwards and the key's slot
/// there, when no page was split: a hint for [`put_in_leaf`].
pub fn put_landing<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    key: &[u8],
    val: NewValue<'_>,
    mode: Mode,
) -> Result<(Outcome, Option<(u64, usize)>)> {
    let NewValue {
        bytes: val,
        len: vlen,
        flags: nflags,
    } = val;
    let ps = w.page_size();
    let hint = hinted(cmp);
    if rec.root == 0 {
        let pg = w.alloc(1)?;
        PageMut::init(w.page_mut(pg)?, KIND_LEAF, hint);
        count_page(rec, KIND_LEAF, 1);
        rec.root = pg;
        rec.depth = 1;
    }
    let mut path = Path::default();
    let (pg, p) = touch_descend(w, rec, cmp, key, mode == Mode::Append, &mut path)?;
    let (i, exact) = if mode == Mode::Append {
        let n = p.nkeys();
        if n > 0 && cmp.cmp(p.key(n - 1)?, key) != std::cmp::Ordering::Less {
            return Err(Error::AppendOrder);
        }
        (n, false)
    } else {
        p.lower_bound(key, cmp, 0)?
    };
    let outcome = if exact {
        if mode == Mode::NoOverwrite {
            return Ok((Outcome::Exists, Some((pg, i))));
        }
        let old = p.node(i)?;
        // A named database's node is replaced only by its own record, and a plain value never
        // turns into one (the put of a name, or a database created under a plain key).
        if old.is_db() != (nflags & format::NF_DB != 0) {
            return Err(super::db_node_mismatch(key, old.is_db()));
        }
        let (old_big, old_vlen, old_flags) = (old.is_big(), old.vlen, old.flags);
        // Where the value area lies in the page (`node` bounds-checked it).
        let (vat, vstored) = (
            old.val.as_ptr() as usize - p.bytes().as_ptr() as usize,
            old.val.len(),
        );
        let old_ref = if old_big {
            old.val.to_vec()
        } else {
            Vec::new()
        };
        // A big value this transaction wrote, replaced by one of as many overflow pages: it
        // is rewritten where it lies. The free tree's records at commit rely on this: freeing
        // and taking pages there changes the free set again, round after round.
        if old_big && nflags == 0 && !format::value_inline(ps, key.len(), vlen) {
            let opg = format::decode_u64(&old_ref)?;
            let span = format::overflow_pages(ps, vlen);
            if format::overflow_pages(ps, old_vlen as usize) == span && w.is_dirty(opg) {
                let area = format::overflow_value_mut(w.page_mut(opg)?);
                match val {
                    Some(v) => area[..vlen].copy_from_slice(v),
                    None => area[..vlen].fill(0),
                }
                area[vlen..].fill(0);
                PageMut::new(w.page_mut(pg)?).set_node_vlen(i, NF_BIG, vlen as u32);
                return Ok((Outcome::Replaced, Some((pg, i))));
            }
        }
        if old_big {
            let opg = format::decode_u64(&old_ref)?;
            w.free(opg, format::overflow_pages(ps, old_vlen as usize))?;
            count_page(
                rec,
                format::KIND_OVERFLOW,
                -(format::overflow_pages(ps, old_vlen as usize) as i64),
            );
        }
        // Same stored size and inline: overwrite in place, at the value area the search found
        // (the dirty image is the same bytes).
        if !old_big && format::value_inline(ps, key.len(), vlen) && old_vlen as usize == vlen {
            let b = w.page_mut(pg)?;
            if old_flags != nflags {
                PageMut::new(&mut *b).set_node_vlen(i, nflags, vlen as u32);
            }
            let area = &mut b[vat..vat + vstored];
            match val {
                Some(v) => area.copy_from_slice(v),
                None => area.fill(0),
            }
            return Ok((Outcome::Replaced, Some((pg, i))));
        }
        PageMut::new(w.page_mut(pg)?).remove(i);
        Outcome::Replaced
    } else {
        rec.entries += 1;
        Outcome::Inserted
    };
    // Build the node: inline value, or a reference to freshly written overflow pages.
    let big_ref: [u8; 8];
    let (flags, stored): (u8, &[u8]) = if format::value_inline(ps, key.len(), vlen) {
        (nflags, val.unwrap_or(&[]))
    } else if nflags != 0 {
        return Err(Error::internal("duplicate set too large for its node"));
    } else {
        let span = format::overflow_pages(ps, vlen);
        let opg = w.alloc(span)?;
        count_page(rec, format::KIND_OVERFLOW, span as i64);
        let b = w.page_mut(opg)?;
        format::init_overflow(b, span as u32);
        // A new page holds whatever its last use left (`alloc` does not clear it): the value
        // is copied in, or zeroed for a RESERVE put, and the run's padding is zeroed, so an
        // overflow run is header, value and zeros, as the bulk builder writes it.
        let area = format::overflow_value_mut(b);
        match val {
            Some(v) => area[..vlen].copy_from_slice(v),
            None => area[..vlen].fill(0),
        }
        area[vlen..].fill(0);
        big_ref = opg.to_le_bytes();
        (NF_BIG, &big_ref[..])
    };
    let zeroes;
    let stored = if flags == 0 && val.is_none() {
        zeroes = vec![0u8; vlen];
        &zeroes[..]
    } else {
        stored
    };
    let node = NodeIn {
        flags,
        key,
        val: stored,
        vlen: vlen as u32,
    };
    if !PageMut::new(w.page_mut(pg)?).insert(i, &node)? {
        let owned = OwnedNode {
            flags,
            key: key.to_vec(),
            val: stored.to_vec(),
            vlen: vlen as u32,
        };
        let landed = split(w, rec, cmp, path, pg, i, owned, mode == Mode::Append)?;
        return Ok((outcome, landed));
    }
    Ok((outcome, Some((pg, i))))
}

/// Puts `key` with an inline value `val` straight into `leaf`, without a descent, when that is
/// where it belongs and it fits: LMDB's cursor-put shortcut, for runs of puts that land in
/// the same leaf (sorted loads, putmulti). `near` is the slot the previous put landed in;
/// the slot after it is tried before a binary search, so that sorted puts cost one or two key
/// comparisons. Returns the outcome and the key's slot, or None, having changed nothing, when
/// the shortcut does not apply (the caller then takes the ordinary path).
///
/// `leaf` must be a dirty leaf of the tree of `rec` (the hint `put_landing` returned, with no
/// page freed since). A key between the leaf's first and last keys (inclusive) can only live
/// in that leaf, whatever the separators above say (each branch covers an interval of keys),
/// so the check needs the leaf alone. Inserting there changes neither the leaf's first key
/// nor any separator, so the tree above stays as it is.
pub fn put_in_leaf<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    (leaf, near): (u64, usize),
    key: &[u8],
    val: &[u8],
    mode: Mode,
) -> Result<Option<(Outcome, usize)>> {
    if mode == Mode::Append || !format::value_inline(w.page_size(), key.len(), val.len()) {
        return Ok(None);
    }
    if mode == Mode::NoOverwrite {
        // May change nothing: read the leaf without marking it written.
        let p = tree_page(w, leaf)?;
        if let Some((i, true)) = leaf_slot(&p, cmp, key, near)? {
            return Ok(Some((Outcome::Exists, i)));
        }
    }
    // The leaf is dirty (the hint's contract): one lookup for reading and writing it.
    let b = w.page_mut(leaf)?;
    let p = format::Page::new(b, leaf)?;
    let n = p.nkeys();
    let Some((i, exact)) = leaf_slot(&p, cmp, key, near)? else {
        return Ok(None);
    };
    if !exact {
        if i == 0 || i == n {
            // Before the first key or after the last: a neighbour may be the place.
            return Ok(None);
        }
        return Ok(insert_plain(b, rec, i, key, val)?.then_some((Outcome::Inserted, i)));
    }
    let old = p.node(i)?;
    // Only a plain inline value of the same size is rewritten here.
    if old.flags != 0 || old.vlen as usize != val.len() {
        return Ok(None);
    }
    let at = old.val.as_ptr() as usize - p.bytes().as_ptr() as usize;
    b[at..at + val.len()].copy_from_slice(val);
    Ok(Some((Outcome::Replaced, i)))
}

/// Appends `key` with an inline value `val` at the end of `leaf`, without a descent: the
/// shortcut of a sorted load (APPEND), whose keys all land at the right edge. Returns the new
/// node's slot, or None, having changed nothing, when the node does not fit (a split is due),
/// the value is not inline, or `key` does not sort after the leaf's last key (the caller's
/// descent then reports the order error or splits).
///
/// `leaf` must be the rightmost leaf of the tree of `rec`, and dirty: the leaf the previous
/// APPEND of this transaction landed in, no page allocated or freed since (the caller's
/// `PutHint::tail`). A key past its last key is then past every key of the tree, and adding it
/// at the end changes no separator above.
pub fn append_in_leaf<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    leaf: u64,
    key: &[u8],
    val: &[u8],
) -> Result<Option<usize>> {
    if !format::value_inline(w.page_size(), key.len(), val.len()) {
        return Ok(None);
    }
    let b = w.page_mut(leaf)?;
    let p = format::Page::new(b, leaf)?;
    let n = p.nkeys();
    if !p.is_leaf() || n == 0 || cmp.cmp(p.key(n - 1)?, key) != std::cmp::Ordering::Less {
        return Ok(None);
    }
    // A full leaf goes to the descent, which splits it: the leaf an append fills holds no dead
    // space to compact unless this transaction deleted from it, and sizing its live nodes here
    // too (the insert's fit test) would do it twice per split. (The page was checked above.)
    let need = NodeIn {
        flags: 0,
        key,
        val,
        vlen: val.len() as u32,
    }
    .footprint();
    if PageMut::new(b).gap() < need {
        return Ok(None);
    }
    Ok(insert_plain(b, rec, n, key, val)?.then_some(n))
}

/// Inserts a plain node (`key`, inline `val`) at slot `i` of the dirty leaf image `b` and
/// counts the new entry; false, nothing changed, when it does not fit.
fn insert_plain(
    b: &mut [u8],
    rec: &mut DbRecord,
    i: usize,
    key: &[u8],
    val: &[u8],
) -> Result<bool> {
    let node = NodeIn {
        flags: 0,
        key,
        val,
        vlen: val.len() as u32,
    };
    if !PageMut::new(b).insert(i, &node)? {
        return Ok(false);
    }
    rec.entries += 1;
    Ok(true)
}

/// The slot of `key` in leaf `p` and whether it is there, trying the slot after `near` (the
/// previous put's) first; None if `p` is not a leaf with keys.
#[inline]
fn leaf_slot(
    p: &format::Page<'_>,
    cmp: &KeyCmp,
    key: &[u8],
    near: usize,
) -> Result<Option<(usize, bool)>> {
    if !p.is_leaf() || p.nkeys() == 0 {
        return Ok(None);
    }
    Ok(Some(match next_slot(p, cmp, key, near + 1)? {
        Some(found) => found,
        None => p.lower_bound(key, cmp, 0)?,
    }))
}

/// Where `key` goes if that is slot `at` of leaf `p` (an equal key there, or a new key between
/// slots `at - 1` and `at`), or None when it is elsewhere: what a binary search would return,
/// for the common case of sorted puts, in one or two comparisons.
fn next_slot(
    p: &format::Page<'_>,
    cmp: &KeyCmp,
    key: &[u8],
    at: usize,
) -> Result<Option<(usize, bool)>> {
    let n = p.nkeys();
    if at == 0 || at > n {
        return Ok(None);
    }
    if at < n {
        match cmp.cmp(p.key(at)?, key) {
            std::cmp::Ordering::Equal => return Ok(Some((at, true))),
            std::cmp::Ordering::Less => return Ok(None),
            std::cmp::Ordering::Greater => {}
        }
    }
    Ok(match cmp.cmp(p.key(at - 1)?, key) {
        std::cmp::Ordering::Less => Some((at, false)),
        std::cmp::Ordering::Equal => Some((at - 1, true)),
        std::cmp::Ordering::Greater => None,
    })
}

/// Splits page `pg` (dirty) while inserting `node` at slot `at`, then carries the new
/// separator up the path, splitting parents as needed and growing a new root at the top.
/// When `pg` is a leaf, returns the half (a dirty leaf of the tree) and the slot where `node`
/// landed: the hint for the puts that follow.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the state is the descent's"
)]
pub(crate) fn split<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    cmp: &KeyCmp,
    mut path: Path,
    mut pg: u64,
    mut at: usize,
    mut node: OwnedNode,
    append: bool,
) -> Result<Option<(u64, usize)>> {
    let hint = hinted(cmp);
    let mut landed = None;
    // The page being split is read from a copy while its halves are built (one buffer for
    // every level, not an allocation per node; none at all for the splits of an append).
    let mut image = Vec::new();
    loop {
        let (rpg, sep) = match split_end(w, rec, hint, pg, at, &node, append)? {
            Some((rpg, sep, leaf)) => {
                if leaf && landed.is_none() {
                    landed = Some((rpg, 0));
                }
                (rpg, sep)
            }
            None => split_cut(w, rec, hint, &mut image, pg, at, &node, append, &mut landed)?,
        };
        let up = OwnedNode {
            flags: 0,
            key: sep,
            val: rpg.to_le_bytes().to_vec(),
            vlen: 8,
        };
        match path.pop() {
            None => {
                // New root over the two halves.
                let root = w.alloc(1)?;
                let left = OwnedNode {
                    flags: 0,
                    key: Vec::new(),
                    val: pg.to_le_bytes().to_vec(),
                    vlen: 8,
                };
                build_page(w.page_mut(root)?, KIND_BRANCH, hint, &[left, up])?;
                super::debug_assert_built(w, root, KIND_BRANCH, 2);
                count_page(rec, KIND_BRANCH, 1);
                rec.root = root;
                rec.depth += 1;
                return Ok(landed);
            }
            Some((parent, idx)) => {
                if PageMut::new(w.page_mut(parent)?).insert(idx + 1, &up.as_in())? {
                    return Ok(landed);
                }
                pg = parent;
                at = idx + 1;
                node = up;
            }
        }
    }
}

/// The split of an APPEND at the end of page `pg` (`at` = its node count): `pg` stays as it
/// is, full, and `node` alone starts a new right page (what `split_point` chooses for an
/// append, without copying and rebuilding the left page). Returns the new page, the separator
/// to carry up and whether the pages are leaves; None when this is not such a split.
fn split_end<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    hint: bool,
    pg: u64,
    at: usize,
    node: &OwnedNode,
    append: bool,
) -> Result<Option<(u64, Vec<u8>, bool)>> {
    if !append {
        return Ok(None);
    }
    let p = format::Page::new(w.page(pg)?, pg)?;
    let n = p.nkeys();
    if at != n || n == 0 {
        return Ok(None);
    }
    let leaf = p.is_leaf();
    let new = node.as_in();
    let (kind, sep, right) = if leaf {
        // The shortest key between the halves (bytewise order), as `split_cut` makes it.
        let r = node.key.as_slice();
        let sep = if hint {
            let c = format::common_prefix(p.key(n - 1)?, r);
            r[..(c + 1).min(r.len())].to_vec()
        } else {
            r.to_vec()
        };
        (KIND_LEAF, sep, new)
    } else {
        // A branch's key moves up; the right page's first slot keeps none.
        (KIND_BRANCH, node.key.clone(), NodeIn { key: &[], ..new })
    };
    let rpg = w.alloc(1)?;
    build_page_in(w.page_mut(rpg)?, kind, hint, &[right])?;
    super::debug_assert_built(w, rpg, kind, 1);
    count_page(rec, kind, 1);
    Ok(Some((rpg, sep, leaf)))
}

/// The general split of `pg` with `node` inserted at `at`: both halves rebuilt around the cut
/// `split_point` chooses (`image` is a scratch buffer for the old page). Returns the new right
/// page and the separator to carry up; records in `landed` where `node` went when `pg` is a
/// leaf.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site; the state is the split's"
)]
fn split_cut<W: PageWriter + ?Sized>(
    w: &mut W,
    rec: &mut DbRecord,
    hint: bool,
    image: &mut Vec<u8>,
    pg: u64,
    at: usize,
    node: &OwnedNode,
    append: bool,
    landed: &mut Option<(u64, usize)>,
) -> Result<(u64, Vec<u8>)> {
    let ps = w.page_size();
    image.clear();
    image.extend_from_slice(w.page(pg)?);
    let p = format::Page::new(image, pg)?;
    let leaf = p.is_leaf();
    let kind = if leaf { KIND_LEAF } else { KIND_BRANCH };
    let mut nodes: Vec<NodeIn<'_>> = Vec::with_capacity(p.nkeys() + 1);
    for i in 0..p.nkeys() {
        nodes.push(NodeIn::from_node(&p.node(i)?));
    }
    nodes.insert(at, node.as_in());
    let m = split_point(&nodes, at, ps, append);
    debug_assert!(
        0 < m && m < nodes.len(),
        "a split leaves both halves non-empty"
    );
    let mut right = nodes.split_off(m);
    // The separator: on leaves the shortest key between the halves (bytewise order), on
    // branches the middle key moves up and the right page's first slot keeps no key.
    let sep = if leaf {
        let l = nodes[nodes.len() - 1].key;
        let r = right[0].key;
        if hint {
            let c = format::common_prefix(l, r);
            r[..(c + 1).min(r.len())].to_vec()
        } else {
            r.to_vec()
        }
    } else {
        std::mem::take(&mut right[0].key).to_vec()
    };
    build_page_in(w.page_mut(pg)?, kind, hint, &nodes)?;
    let rpg = w.alloc(1)?;
    build_page_in(w.page_mut(rpg)?, kind, hint, &right)?;
    if leaf && landed.is_none() {
        // The first (leaf) level: the node went to the left half below the cut.
        *landed = Some(if at < m { (pg, at) } else { (rpg, at - m) });
    }
    super::debug_assert_built(w, pg, kind, nodes.len());
    super::debug_assert_built(w, rpg, kind, right.len());
    count_page(rec, kind, 1);
    Ok((rpg, sep))
}

/// Where to cut `nodes` (the page's nodes plus the new one at `at`): the right half starts at
/// the returned index. Both halves fit a page.
fn split_point(nodes: &[NodeIn<'_>], at: usize, ps: usize, append: bool) -> usize {
    let cap = ps - format::SLOTS_AT;
    let n = nodes.len();
    let total: usize = nodes.iter().map(NodeIn::footprint).sum();
    // Appending at the right edge: keep the left page full, start the right with the new node.
    if (append || at == n - 1) && total - nodes[n - 1].footprint() <= cap && n >= 2 {
        return n - 1;
    }
    if at == 0 && total - nodes[0].footprint() <= cap && n >= 2 {
        return 1;
    }
    let mut left = 0usize;
    let mut best = 1;
    let mut best_diff = usize::MAX;
    for (i, nd) in nodes.iter().enumerate().take(n - 1) {
        left += nd.footprint();
        let right = total - left;
        if left <= cap && right <= cap {
            let diff = left.abs_diff(right);
            if diff < best_diff {
                best_diff = diff;
                best = i + 1;
            }
        }
    }
    best
}
