//! Pages: checksums and identity (every page kind), overflow runs, and the slotted branch and
//! leaf pages (read side `Page`, write side `PageMut`).

use super::*;

// ---------------------------------------------------------------------------------------------
// Checksums and page identity.

/// XXH3, 64-bit, seed 0: the checksum of pages and metas (docs/design.md). The implementation
/// picks AVX2 at run time where the CPU has it; the value is the same on every path.
#[inline]
pub fn xxh3_64(b: &[u8]) -> u64 {
    twox_hash::XxHash3_64::oneshot(b)
}

/// Checksum of a page image (all bytes after the checksum field).
pub fn page_checksum(b: &[u8]) -> u64 {
    xxh3_64(&b[H_PGNO..])
}

/// Stamps a page image with its number and writer and seals it with its checksum.
pub fn seal_page(b: &mut [u8], pgno: u64, txnid: u64) {
    put_u64(b, H_PGNO, pgno);
    put_u64(b, H_TXNID, txnid);
    let sum = page_checksum(b);
    put_u64(b, H_CHECKSUM, sum);
}

/// The header fields that identify a page, read without trusting them.
#[derive(Debug, Clone, Copy)]
pub struct PageId {
    /// Page number stamped in the page.
    pub pgno: u64,
    /// Transaction that wrote it.
    pub txnid: u64,
    /// Page kind.
    pub kind: u8,
    /// Pages spanned (1 but for overflow runs), as claimed by the header.
    pub span: u64,
}

/// Reads a page's identity fields; `b` holds at least the fixed header.
#[inline]
pub fn page_id(b: &[u8]) -> Result<PageId> {
    if b.len() < PAGE_FIELDS {
        return Err(Error::corrupted("page shorter than its header"));
    }
    let kind = b[H_KIND];
    let span = if kind == KIND_OVERFLOW {
        u64::from(get_u32(b, H_UPPER))
    } else {
        1
    };
    Ok(PageId {
        pgno: get_u64(b, H_PGNO),
        txnid: get_u64(b, H_TXNID),
        kind,
        span,
    })
}

/// Verifies a whole page image (all `span` pages for an overflow run) against its checksum,
/// its expected number and, if given, the transaction that must have written it.
pub fn verify_page(b: &[u8], pgno: u64, txnid: Option<u64>) -> Result<()> {
    let id = page_id(b)?;
    if id.pgno != pgno {
        return Err(Error::corrupted(format!(
            "page {pgno}: header says page {}",
            id.pgno
        )));
    }
    if let Some(t) = txnid {
        if id.txnid != t {
            return Err(Error::corrupted(format!(
                "page {pgno}: written by transaction {}, expected {t}",
                id.txnid
            )));
        }
    }
    let stored = get_u64(b, H_CHECKSUM);
    if stored != page_checksum(b) {
        return Err(Error::corrupted(format!("page {pgno}: checksum mismatch")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Overflow pages.

/// Writes the header of an overflow run; the value follows at [`PAGE_FIELDS`].
pub fn init_overflow(b: &mut [u8], span: u32) {
    b[..PAGE_FIELDS].fill(0);
    b[H_KIND] = KIND_OVERFLOW;
    put_u32(b, H_UPPER, span);
}

/// Stamps and seals the header of an overflow run of `span` pages whose value is written from
/// where it lies rather than copied into one image (a bulk load's large values): the checksum
/// is the one [`seal_page`] computes over the whole run, streamed over the header's fields,
/// `value` and the `pad` zero bytes that end the run's last page.
pub fn seal_overflow_header(
    hdr: &mut [u8; PAGE_FIELDS],
    span: u32,
    (pgno, txnid): (u64, u64),
    value: &[u8],
    pad: usize,
) {
    use std::hash::Hasher;
    init_overflow(hdr, span);
    put_u64(hdr, H_PGNO, pgno);
    put_u64(hdr, H_TXNID, txnid);
    let mut h = twox_hash::XxHash3_64::with_seed(0);
    h.write(&hdr[H_PGNO..]);
    h.write(value);
    let zeros = [0u8; 4096];
    let mut left = pad;
    // Bounded by `pad` (less than one page of the largest size).
    while left > 0 {
        let n = left.min(zeros.len());
        h.write(&zeros[..n]);
        left -= n;
    }
    put_u64(hdr, H_CHECKSUM, h.finish());
}

/// The value bytes of an overflow run of `vlen` bytes, after checking the header.
pub fn overflow_value(b: &[u8], pgno: u64, vlen: usize) -> Result<&[u8]> {
    if b.len() < PAGE_FIELDS || b[H_KIND] != KIND_OVERFLOW {
        return Err(Error::corrupted(format!(
            "page {pgno} is not an overflow page"
        )));
    }
    b.get(PAGE_FIELDS..PAGE_FIELDS + vlen).ok_or_else(|| {
        Error::corrupted(format!("overflow value at page {pgno} runs past its pages"))
    })
}

/// Mutable value area of an overflow run.
pub fn overflow_value_mut(b: &mut [u8]) -> &mut [u8] {
    &mut b[PAGE_FIELDS..]
}

// ---------------------------------------------------------------------------------------------
// Branch and leaf pages: read side.

/// A node read from a page.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    /// NF_* flags.
    pub flags: u8,
    /// Key bytes.
    pub key: &'a [u8],
    /// Stored value area: the value itself, an 8-byte overflow reference, or a child page.
    pub val: &'a [u8],
    /// Value length (the real value's, also for overflow values).
    pub vlen: u32,
}

impl Node<'_> {
    /// Whether the value lives on overflow pages.
    pub fn is_big(&self) -> bool {
        self.flags & NF_BIG != 0
    }
    /// Whether the node holds several values of a DUPSORT key (inline or as a sub-tree).
    #[inline]
    pub fn is_dups(&self) -> bool {
        self.flags & (NF_DUPS | NF_SUBTREE) != 0
    }
    /// Whether the node is a named database's record in the main tree ([`NF_DB`]).
    #[inline]
    pub fn is_db(&self) -> bool {
        self.flags & NF_DB != 0
    }
}

/// Key length and value length of a node header (flags u8, key length u16, value length u32).
#[inline(always)]
fn header_lengths(h: &[u8; NODE_HDR]) -> (usize, u32) {
    (
        usize::from(u16::from_le_bytes([h[1], h[2]])),
        u32::from_le_bytes([h[3], h[4], h[5], h[6]]),
    )
}

/// Why `Page::new` refused the image `b` of page `pgno`.
#[cold]
#[inline(never)]
fn bad_tree_page(b: &[u8], pgno: u64) -> Error {
    let what = if b.len() < SLOTS_AT || b.len() > MAX_PAGE_SIZE {
        format!("{} bytes is not a page", b.len())
    } else if !matches!(b[H_KIND], KIND_BRANCH | KIND_LEAF) {
        format!("kind {} in a tree", b[H_KIND])
    } else if b[H_FLAGS] & !PF_HINTED != 0 {
        format!("unknown page flags {:#x}", b[H_FLAGS])
    } else {
        "header bounds".to_string()
    };
    Error::corrupted(format!("page {pgno}: {what}"))
}

/// Read view of a branch or leaf page whose header has been checked.
#[derive(Clone, Copy)]
pub struct Page<'a> {
    pub(super) b: &'a [u8],
    pub(super) nkeys: usize,
    pub(super) plen: usize,
    pub(super) upper: usize,
}

impl<'a> Page<'a> {
    /// Checks the header of a branch or leaf page and wraps it.
    #[inline]
    pub fn new(b: &'a [u8], pgno: u64) -> Result<Page<'a>> {
        // Every check first, without a branch each; the message is found out of line.
        let ok = |b: &'a [u8]| -> Option<Page<'a>> {
            let h = b.first_chunk::<SLOTS_AT>()?;
            let nkeys = usize::from(u16::from_le_bytes([h[H_NKEYS], h[H_NKEYS + 1]]));
            let upper =
                u32::from_le_bytes([h[H_UPPER], h[H_UPPER + 1], h[H_UPPER + 2], h[H_UPPER + 3]])
                    as usize;
            let plen = usize::from(u16::from_le_bytes([h[H_PLEN], h[H_PLEN + 1]]));
            let fits = (b.len() <= MAX_PAGE_SIZE)
                & matches!(h[H_KIND], KIND_BRANCH | KIND_LEAF)
                & (h[H_FLAGS] & !PF_HINTED == 0)
                & (plen <= PREFIX_MAX)
                & (upper <= b.len())
                & (SLOTS_AT + nkeys * SLOT <= upper);
            fits.then_some(Page {
                b,
                nkeys,
                plen,
                upper,
            })
        };
        match ok(b) {
            Some(p) => Ok(p),
            None => Err(bad_tree_page(b, pgno)),
        }
    }

    /// The raw image.
    pub fn bytes(&self) -> &'a [u8] {
        self.b
    }
    /// Whether it is a leaf.
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.b[H_KIND] == KIND_LEAF
    }
    /// Number of nodes.
    #[inline]
    pub fn nkeys(&self) -> usize {
        self.nkeys
    }
    /// Whether prefix and hints are maintained.
    #[inline]
    pub fn hinted(&self) -> bool {
        self.b[H_FLAGS] & PF_HINTED != 0
    }
    /// The common prefix of the page's keys (empty on unhinted pages).
    #[inline]
    pub fn prefix(&self) -> &'a [u8] {
        &self.b[H_PREFIX..H_PREFIX + self.plen]
    }
    /// Writer transaction.
    pub fn txnid(&self) -> u64 {
        get_u64(self.b, H_TXNID)
    }
    /// Start of the node area.
    pub fn upper(&self) -> usize {
        self.upper
    }

    #[inline(always)]
    pub(super) fn slot(&self, i: usize) -> (usize, u16) {
        let at = SLOTS_AT + i * SLOT;
        (get_u16(self.b, at) as usize, get_u16(self.b, at + 2))
    }

    /// Node `i` (< nkeys), bounds-checked: it lies in the node area, its flags are known and
    /// fit the page's kind (a leaf node carries at most one of BIG, SUBTREE, DUPS and DB; a
    /// SUBTREE node's value area is one sub-tree record, a DB node's one database record).
    /// Whether a DB node lies in the main tree is for its readers to check, since a page does
    /// not know its tree (docs/design.md, "Named databases").
    #[inline(always)]
    pub fn node(&self, i: usize) -> Result<Node<'a>> {
        let (off, h) = self.node_header(i)?;
        let b = self.b;
        let flags = h[0];
        if flags == 0 {
            // A plain node (every node of most databases): what follows checks only the
            // flags' cases, so the common one goes straight to the bounds.
            let (klen, vlen) = header_lengths(h);
            let kat = off + NODE_HDR;
            let stored = if self.is_leaf() {
                vlen as usize
            } else {
                OVERFLOW_REF
            };
            return match b.get(kat..kat + klen + stored) {
                Some(kv) => Ok(Node {
                    flags,
                    key: &kv[..klen],
                    val: &kv[klen..],
                    vlen,
                }),
                None => Err(self.bad("node runs past the page")),
            };
        }
        self.node_flagged(off, h)
    }

    /// The key and value of node `i` of a leaf when it is a plain node (no flags: the value
    /// inline) lying inside the page; None for anything else (slot out of range, a flagged
    /// node, bounds that do not hold), which [`Page::node`] then reads or reports. The
    /// caller knows the page is a leaf. The step of a sequential read: one check per bound
    /// and no error built on the way.
    #[inline(always)]
    pub fn leaf_pair(&self, i: usize) -> Option<(&'a [u8], &'a [u8])> {
        if i >= self.nkeys {
            return None;
        }
        let b = self.b;
        let at = SLOTS_AT + i * SLOT;
        let off = usize::from(u16::from_le_bytes(*b.get(at..)?.first_chunk::<2>()?));
        let h = b.get(off..)?.first_chunk::<NODE_HDR>()?;
        if off < self.upper || h[0] != 0 {
            return None;
        }
        let (klen, vlen) = header_lengths(h);
        let kat = off + NODE_HDR;
        let kv = b.get(kat..kat + klen + vlen as usize)?;
        Some(kv.split_at(klen))
    }

    #[inline(never)]
    fn node_flagged(&self, off: usize, h: &[u8; NODE_HDR]) -> Result<Node<'a>> {
        let b = self.b;
        let flags = h[0];
        let allowed = if self.is_leaf() {
            NF_BIG | NF_SUBTREE | NF_DUPS | NF_DB
        } else {
            0
        };
        if flags & !allowed != 0 || !flags.is_power_of_two() && flags != 0 {
            return Err(self.bad(&format!("node flags {flags:#x}")));
        }
        let (klen, vlen) = header_lengths(h);
        if flags == NF_SUBTREE && vlen as usize != SUBTREE_REC {
            return Err(self.bad("sub-tree node without a sub-tree record"));
        }
        if flags == NF_DB && vlen as usize != DB_RECORD {
            return Err(self.bad(&format!(
                "named-database node with a value of {vlen} bytes, not a {DB_RECORD}-byte record"
            )));
        }
        let stored = if flags & NF_BIG != 0 || !self.is_leaf() {
            OVERFLOW_REF
        } else {
            vlen as usize
        };
        let kat = off + NODE_HDR;
        let end = kat + klen + stored;
        if end > b.len() {
            return Err(self.bad("node runs past the page"));
        }
        Ok(Node {
            flags,
            key: &b[kat..kat + klen],
            val: &b[kat + klen..end],
            vlen,
        })
    }

    /// Byte range of node `i`'s stored value area within the page: (start, length).
    pub fn value_range(&self, i: usize) -> Result<(usize, usize)> {
        let n = self.node(i)?;
        let (off, _) = self.slot(i);
        Ok((off + NODE_HDR + n.key.len(), n.val.len()))
    }

    /// Where node `i` (< nkeys) starts, and its header, which lies in the node area of the
    /// page (one range check; the header's fields are then read without any). Always inlined:
    /// every search step and cursor step calls it, and as a call it cost as much as its checks.
    #[inline(always)]
    fn node_header(&self, i: usize) -> Result<(usize, &'a [u8; NODE_HDR])> {
        if i >= self.nkeys {
            return Err(self.bad("slot past the node count"));
        }
        let at = SLOTS_AT + i * SLOT;
        let off = match self.b.get(at..at + 2) {
            Some(&[o0, o1]) => usize::from(u16::from_le_bytes([o0, o1])),
            _ => return Err(self.bad("slot past the page")),
        };
        if off < self.upper {
            return Err(self.bad("node offset"));
        }
        match self.b.get(off..).and_then(<[u8]>::first_chunk::<NODE_HDR>) {
            Some(h) => Ok((off, h)),
            None => Err(self.bad("node offset")),
        }
    }

    /// Key of node `i` (always inlined, as `node_header`: the binary search's inner step).
    #[inline(always)]
    pub fn key(&self, i: usize) -> Result<&'a [u8]> {
        // The hot path of every search: only the bounds a slice needs. The node's flags and
        // value are checked by `node` when its value is read.
        let (off, h) = self.node_header(i)?;
        let kat = off + NODE_HDR;
        let (klen, _) = header_lengths(h);
        self.b
            .get(kat..kat + klen)
            .ok_or_else(|| self.bad("node runs past the page"))
    }

    /// Child page of branch node `i` (always inlined: a step of every descent, and its
    /// checks are few once the error messages are built out of line).
    #[inline(always)]
    pub fn child(&self, i: usize) -> Result<u64> {
        if self.is_leaf() {
            return Err(self.bad("child of a leaf"));
        }
        // The hot path of every descent: a branch node carries no flags, its 8-byte reference
        // follows the key.
        let (off, h) = self.node_header(i)?;
        if h[0] != 0 {
            return Err(self.bad_branch_flags(h[0]));
        }
        let at = off + NODE_HDR + header_lengths(h).0;
        match self
            .b
            .get(at..)
            .and_then(<[u8]>::first_chunk::<OVERFLOW_REF>)
        {
            Some(v) => Ok(u64::from_le_bytes(*v)),
            None => Err(self.bad("node runs past the page")),
        }
    }

    /// Bytes used by node `i`.
    pub fn node_bytes(&self, i: usize) -> Result<usize> {
        let n = self.node(i)?;
        Ok(NODE_HDR + n.key.len() + n.val.len())
    }

    /// Bytes of the page in use by header, slots and live nodes.
    pub fn used_bytes(&self) -> Result<usize> {
        // From the node headers alone (a delete asks after every removal): what `node`
        // checks beyond the header's place matters to readers of the node, not to its size,
        // and a total past the page is caught here.
        let b = self.b;
        let leaf = self.is_leaf();
        let mut sum = SLOTS_AT + self.nkeys * SLOT;
        for i in 0..self.nkeys {
            let (_, h) = self.node_header(i)?;
            let (klen, vlen) = header_lengths(h);
            let stored = if !leaf || h[0] & NF_BIG != 0 {
                OVERFLOW_REF
            } else {
                vlen as usize
            };
            sum += NODE_HDR + klen + stored;
        }
        if sum > b.len() {
            return Err(self.bad("nodes overflow the page"));
        }
        Ok(sum)
    }

    /// Whether header, slots and live nodes take at least `want` bytes: a delete's question
    /// after every removal, answered from the node count alone when each node's header
    /// suffices (pages of many small nodes), else by summing the nodes.
    pub fn uses_at_least(&self, want: usize) -> Result<bool> {
        if SLOTS_AT + self.nkeys * (SLOT + NODE_HDR) >= want {
            return Ok(true);
        }
        Ok(self.used_bytes()? >= want)
    }

    #[cold]
    #[inline(never)]
    fn bad_branch_flags(&self, flags: u8) -> Error {
        self.bad(&format!("node flags {flags:#x} in a branch"))
    }

    /// The error for a bad field of this page (cold: only a damaged file gets here, and
    /// kept out of line, the formatting does not weigh on the search steps that may call it).
    #[cold]
    #[inline(never)]
    pub(super) fn bad(&self, what: &str) -> Error {
        Error::corrupted(format!("page {}: {what}", get_u64(self.b, H_PGNO)))
    }
}

// ---------------------------------------------------------------------------------------------
// Branch and leaf pages: write side. Only called on pages this process built or checked.

/// Mutable view of a branch or leaf page image owned by a write transaction.
pub struct PageMut<'a> {
    pub(super) b: &'a mut [u8],
}

/// A node to write: key, stored value area, flags and real value length.
#[derive(Clone, Copy)]
pub struct NodeIn<'a> {
    /// NF_* flags.
    pub flags: u8,
    /// Key bytes.
    pub key: &'a [u8],
    /// Stored value area (inline value, overflow reference or child page number).
    pub val: &'a [u8],
    /// Real value length.
    pub vlen: u32,
}

impl<'a> NodeIn<'a> {
    /// Bytes the node takes, slot included.
    pub fn footprint(&self) -> usize {
        SLOT + NODE_HDR + self.key.len() + self.val.len()
    }
    /// A node copied from a page.
    pub fn from_node(n: &Node<'a>) -> NodeIn<'a> {
        NodeIn {
            flags: n.flags,
            key: n.key,
            val: n.val,
            vlen: n.vlen,
        }
    }
}

impl<'a> PageMut<'a> {
    /// Wraps an image whose header this process wrote or checked.
    pub fn new(b: &'a mut [u8]) -> PageMut<'a> {
        PageMut { b }
    }

    /// Formats an empty branch or leaf page.
    pub fn init(b: &'a mut [u8], kind: u8, hinted: bool) -> PageMut<'a> {
        b[..SLOTS_AT].fill(0);
        b[H_KIND] = kind;
        b[H_FLAGS] = if hinted { PF_HINTED } else { 0 };
        let len = b.len() as u32;
        put_u32(b, H_UPPER, len);
        PageMut { b }
    }

    /// Read view.
    pub fn view(&self) -> Page<'_> {
        Page {
            b: self.b,
            nkeys: get_u16(self.b, H_NKEYS) as usize,
            plen: get_u16(self.b, H_PLEN) as usize,
            upper: get_u32(self.b, H_UPPER) as usize,
        }
    }

    pub(super) fn nkeys(&self) -> usize {
        get_u16(self.b, H_NKEYS) as usize
    }
    pub(super) fn upper(&self) -> usize {
        get_u32(self.b, H_UPPER) as usize
    }
    fn plen(&self) -> usize {
        get_u16(self.b, H_PLEN) as usize
    }
    fn hinted(&self) -> bool {
        self.b[H_FLAGS] & PF_HINTED != 0
    }
    fn first_keyed(&self) -> usize {
        usize::from(self.b[H_KIND] == KIND_BRANCH)
    }

    /// Contiguous free bytes between the slot array and the nodes.
    pub fn gap(&self) -> usize {
        self.upper() - (SLOTS_AT + self.nkeys() * SLOT)
    }

    /// Inserts a node at slot `i`, compacting the page first if its free bytes are scattered.
    /// Returns false (page untouched) if it does not fit.
    pub fn insert(&mut self, i: usize, n: &NodeIn) -> Result<bool> {
        let need = n.footprint();
        if self.gap() < need {
            let used = self.view().used_bytes()?;
            if used + need > self.b.len() {
                return Ok(false);
            }
            self.compact()?;
        }
        let nk = self.nkeys();
        let size = need - SLOT;
        let off = self.upper() - size;
        self.b[off] = n.flags;
        put_u16(self.b, off + 1, n.key.len() as u16);
        put_u32(self.b, off + 3, n.vlen);
        let kat = off + NODE_HDR;
        self.b[kat..kat + n.key.len()].copy_from_slice(n.key);
        self.b[kat + n.key.len()..kat + n.key.len() + n.val.len()].copy_from_slice(n.val);
        put_u32(self.b, H_UPPER, off as u32);
        let s = SLOTS_AT + i * SLOT;
        self.b.copy_within(s..SLOTS_AT + nk * SLOT, s + SLOT);
        put_u16(self.b, s, off as u16);
        put_u16(self.b, H_NKEYS, (nk + 1) as u16);
        if self.hinted() && i >= self.first_keyed() {
            let plen = self.plen();
            if nk == self.first_keyed() {
                // The page's first key: the prefix is all of it (up to PREFIX_MAX), as
                // `refresh_prefix` makes it for one key. Inserts only shrink a prefix, so a
                // page filled one insert at a time from empty (a tree's first leaf) would
                // otherwise keep none, every hint would be the keys' first two bytes and a
                // search would compare whole keys at nearly every step.
                let l = n.key.len().min(PREFIX_MAX);
                self.b[H_PREFIX..H_PREFIX + l].copy_from_slice(&n.key[..l]);
                put_u16(self.b, H_PLEN, l as u16);
                put_u16(self.b, s + 2, hint_of(n.key, l));
            } else if n.key.len() < plen || n.key[..plen] != self.b[H_PREFIX..H_PREFIX + plen] {
                let l = common_prefix(n.key, &self.b[H_PREFIX..H_PREFIX + plen]);
                self.set_prefix_len(l)?;
            } else {
                put_u16(self.b, s + 2, hint_of(n.key, plen));
            }
        }
        Ok(true)
    }

    /// Replaces node `i` by `n`, which must sort at the same place (the same key, a new
    /// value): in place when no larger, else as a remove and an insert. Returns false (page
    /// untouched) if it does not fit.
    pub fn replace(&mut self, i: usize, n: &NodeIn) -> Result<bool> {
        let old = self.view().node_bytes(i)?;
        let new = n.footprint() - SLOT;
        // The insert below needs `new` bytes plus a slot; the removal frees `old` and a slot,
        // compaction makes them contiguous.
        if new > old
            && self.gap() < n.footprint()
            && self.view().used_bytes()? - old + new > self.b.len()
        {
            return Ok(false);
        }
        self.remove(i);
        if !self.insert(i, n)? {
            return Err(Error::internal("a replaced node does not fit"));
        }
        Ok(true)
    }

    /// Removes slot `i`; its node bytes become dead space until the next compaction.
    pub fn remove(&mut self, i: usize) {
        let nk = self.nkeys();
        let s = SLOTS_AT + i * SLOT;
        self.b.copy_within(s + SLOT..SLOTS_AT + nk * SLOT, s);
        put_u16(self.b, H_NKEYS, (nk - 1) as u16);
        if nk == 1 {
            put_u32(self.b, H_UPPER, self.b.len() as u32);
        }
    }

    /// Replaces the stored value area of node `i` in place; sizes must match.
    pub fn value_area_mut(&mut self, i: usize) -> Result<&mut [u8]> {
        let (kat, klen, stored) = {
            let v = self.view();
            let n = v.node(i)?;
            let (off, _) = v.slot(i);
            (off + NODE_HDR, n.key.len(), n.val.len())
        };
        Ok(&mut self.b[kat + klen..kat + klen + stored])
    }

    /// Sets the value length field of node `i` (for in-place value replacement).
    pub fn set_node_vlen(&mut self, i: usize, flags: u8, vlen: u32) {
        let off = get_u16(self.b, SLOTS_AT + i * SLOT) as usize;
        self.b[off] = flags;
        put_u32(self.b, off + 3, vlen);
    }

    /// Rewrites the nodes densely at the end of the page.
    pub fn compact(&mut self) -> Result<()> {
        let len = self.b.len();
        let nk = self.nkeys();
        // In place, without a scratch page: nodes move toward the end in order of their
        // offsets, highest first, so each lands at or above where it starts (the nodes placed
        // before it all lay above it) and never over a node not yet moved.
        let mut order: Vec<(u16, u16, u16)> = Vec::with_capacity(nk);
        for i in 0..nk {
            let off = get_u16(self.b, SLOTS_AT + i * SLOT);
            let size = self.view().node_bytes(i)?;
            order.push((off, size as u16, i as u16));
        }
        order.sort_unstable_by_key(|&(off, _, _)| std::cmp::Reverse(off));
        let mut upper = len;
        for (off, size, i) in order {
            let (off, size) = (usize::from(off), usize::from(size));
            if off + size > upper {
                return Err(Error::corrupted("overlapping nodes in a page"));
            }
            upper -= size;
            self.b.copy_within(off..off + size, upper);
            put_u16(self.b, SLOTS_AT + usize::from(i) * SLOT, upper as u16);
        }
        put_u32(self.b, H_UPPER, upper as u32);
        Ok(())
    }

    /// Recomputes the prefix from the page's first and last keys and every hint.
    pub fn refresh_prefix(&mut self) -> Result<()> {
        if !self.hinted() {
            return Ok(());
        }
        let first = self.first_keyed();
        let nk = self.nkeys();
        let l = if nk > first + 1 {
            let v = self.view();
            common_prefix(v.key(first)?, v.key(nk - 1)?).min(PREFIX_MAX)
        } else if nk == first + 1 {
            self.view().key(first)?.len().min(PREFIX_MAX)
        } else {
            0
        };
        let src = if nk > first {
            Some(self.view().key(first)?.to_vec())
        } else {
            None
        };
        if let Some(k) = src {
            self.b[H_PREFIX..H_PREFIX + l].copy_from_slice(&k[..l]);
        }
        put_u16(self.b, H_PLEN, l as u16);
        self.rehint(l)
    }

    fn set_prefix_len(&mut self, l: usize) -> Result<()> {
        put_u16(self.b, H_PLEN, l as u16);
        self.rehint(l)
    }

    fn rehint(&mut self, plen: usize) -> Result<()> {
        for i in self.first_keyed()..self.nkeys() {
            let h = hint_of(self.view().key(i)?, plen);
            put_u16(self.b, SLOTS_AT + i * SLOT + 2, h);
        }
        Ok(())
    }
}

/// Length of the common prefix of two byte strings.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
