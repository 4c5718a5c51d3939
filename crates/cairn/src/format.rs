//! The on-disk format: the only module that knows byte offsets (with its sub-modules `dupset`,
//! the sorted-duplicates value sets, `packed`, the packed leaves of DUPFIXED sub-trees, and
//! `search`, the key orders and the search of a branch or leaf page).
//!
//! Invariants kept here (docs/design.md has the byte tables):
//! - Every integer is little-endian and goes through `get_*`/`put_*`; nothing is cast over the map.
//! - Every read of a page that came from disk is bounds-checked and turns a bad field into
//!   `Error::Corrupted`, never a panic: a hostile file can only produce errors.
//! - A branch or leaf page is a slotted page: a 72-byte header (40 bytes of fields, then up to
//!   32 bytes of the common key prefix), a slot array of 4-byte slots (u16 node offset, u16 key
//!   hint) growing up, and nodes packed down from the end of the page. Slots are in key order.
//! - On a "hinted" page (bytewise key order), every key of the page (but slot 0 of a branch,
//!   whose key is empty) starts with the stored prefix, and each slot's hint is the big-endian
//!   pair of key bytes that follow the prefix (zero-padded). Hints are monotonic in key order.

use crate::error::{Error, Result};

/// File magic: a high byte and CR LF catch text-mode mangling, as PNG's does.
pub const MAGIC: [u8; 8] = [0x89, b'C', b'A', b'I', b'R', b'N', b'\r', b'\n'];
/// Data file format version (see docs/design.md, "Version history").
pub const FORMAT_VERSION: u32 = 2;
/// Unit of atomic writes assumed of the media; a meta slot is one sector.
pub const SECTOR: usize = 512;
/// Number of meta slots at the start of page 0.
pub const META_SLOTS: usize = 3;
/// Smallest and largest page sizes accepted.
pub const MIN_PAGE_SIZE: usize = 4096;
/// See [`MIN_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: usize = 65536;

/// Page header: fixed fields.
pub const PAGE_FIELDS: usize = 40;
/// Room reserved for the common key prefix of a branch or leaf page.
pub const PREFIX_MAX: usize = 32;
/// Where the slot array (or a list page's entries) starts.
pub const SLOTS_AT: usize = PAGE_FIELDS + PREFIX_MAX;
/// Bytes per slot.
pub const SLOT: usize = 4;
/// Node header: flags u8, key length u16, value length u32.
pub const NODE_HDR: usize = 7;
/// Value area of a node whose value lives on overflow pages: the first page number.
pub const OVERFLOW_REF: usize = 8;
/// Largest value stored (LMDB's and libmdbx's practical limit, 2 GiB).
pub const MAX_VALUE: usize = 0x7fff_ffff;
/// Deepest tree accepted: far beyond any real tree (2 keys per page gives 2^32 entries), and
/// the bound on every descent, so a cycle in a corrupted file ends in an error.
pub const MAX_TREE_DEPTH: u16 = 32;
/// Database flags that may be stored in a record (LMDB's REVERSEKEY, DUPSORT, INTEGERKEY,
/// DUPFIXED, INTEGERDUP, REVERSEDUP).
pub const DB_RECORD_FLAGS: u16 = 0x7e;
/// The DUPSORT bit of a database record's flags.
const DB_DUPSORT: u16 = 0x04;

// Page header offsets.
const H_CHECKSUM: usize = 0;
const H_PGNO: usize = 8;
const H_TXNID: usize = 16;
const H_KIND: usize = 24;
const H_FLAGS: usize = 25;
const H_NKEYS: usize = 26;
const H_UPPER: usize = 28; // branch/leaf: start of the node area; overflow: page count
const H_PLEN: usize = 32; // branch/leaf: prefix length; list: next list page (u64)
const H_PREFIX: usize = PAGE_FIELDS;

/// Page kinds.
pub const KIND_BRANCH: u8 = 1;
/// See [`KIND_BRANCH`].
pub const KIND_LEAF: u8 = 2;
/// See [`KIND_BRANCH`].
pub const KIND_OVERFLOW: u8 = 3;
/// See [`KIND_BRANCH`].
pub const KIND_LIST: u8 = 4;

/// Page flag: prefix and hints are maintained (bytewise key order).
pub const PF_HINTED: u8 = 1;

/// Node flag: the value lives on overflow pages; the value area holds the first page number.
pub const NF_BIG: u8 = 1;
/// Node flag (DUPSORT): the value area holds a sub-tree record (see [`SUBTREE_REC`]).
pub const NF_SUBTREE: u8 = 2;
/// Node flag (DUPSORT): the value area holds an inline value set (see [`DupSet`]).
pub const NF_DUPS: u8 = 4;

// One bounds check per field (a slice of its width), not one per byte.
#[inline(always)]
fn get_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}
#[inline(always)]
fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
#[inline(always)]
fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
#[inline]
fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
#[inline]
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian u64 from an 8-byte value area (page numbers, integers in records).
pub fn decode_u64(b: &[u8]) -> Result<u64> {
    if b.len() != 8 {
        return Err(Error::corrupted(format!(
            "expected an 8-byte field, found {} bytes",
            b.len()
        )));
    }
    Ok(get_u64(b, 0))
}

/// Encodes a u64 little-endian.
pub fn encode_u64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Whether `n` is an accepted page size.
pub fn valid_page_size(n: usize) -> bool {
    n.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&n)
}

/// Largest node (slot excluded) a page of `page_size` holds while still fitting two of them.
pub fn node_max(page_size: usize) -> usize {
    (page_size - SLOTS_AT) / 2 - SLOT
}

/// Largest key for a page size: a branch node holding it and a child reference must fit twice.
pub fn max_key_size(page_size: usize) -> usize {
    node_max(page_size) - NODE_HDR - OVERFLOW_REF
}

/// Bytes of a node on a page.
#[inline]
pub fn node_size(klen: usize, stored_vlen: usize) -> usize {
    NODE_HDR + klen + stored_vlen
}

/// Pages needed by an overflow value.
pub fn overflow_pages(page_size: usize, vlen: usize) -> u64 {
    (PAGE_FIELDS + vlen).div_ceil(page_size) as u64
}

/// Whether a leaf value is stored inline (else on overflow pages).
pub fn value_inline(page_size: usize, klen: usize, vlen: usize) -> bool {
    node_size(klen, vlen) <= node_max(page_size)
}

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
// Database records (48 bytes): the root and counters of one B+tree.

/// Size of an encoded [`DbRecord`].
pub const DB_RECORD: usize = 48;

/// The root and counters of one B+tree, as stored in the meta or the catalog.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DbRecord {
    /// Root page, 0 for an empty tree (page 0 is never a tree page).
    pub root: u64,
    /// Number of entries.
    pub entries: u64,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Levels: 0 for an empty tree, 1 for a lone leaf.
    pub depth: u16,
    /// Database flags (DbFlags bits).
    pub flags: u16,
    /// Which of the database's orders are user-supplied ([`ORDER_CUSTOM_KEYS`],
    /// [`ORDER_CUSTOM_VALUES`]), as the handle that last wrote the database had them. The
    /// functions are not stored; the bits tell a process without them (the checker, a
    /// compacting copy) that the flags' order does not apply.
    pub order: u16,
}

/// [`DbRecord::order`]: the keys are in a user-supplied order (`Env::set_key_order`).
pub const ORDER_CUSTOM_KEYS: u16 = 0x1;
/// [`DbRecord::order`]: a DUPSORT database's values are in a user-supplied order
/// (`Env::set_dup_order`).
pub const ORDER_CUSTOM_VALUES: u16 = 0x2;

impl DbRecord {
    /// Encodes into 48 bytes.
    pub fn encode(&self, b: &mut [u8]) {
        put_u64(b, 0, self.root);
        put_u64(b, 8, self.entries);
        put_u64(b, 16, self.branch_pages);
        put_u64(b, 24, self.leaf_pages);
        put_u64(b, 32, self.overflow_pages);
        put_u16(b, 40, self.depth);
        put_u16(b, 42, self.flags);
        put_u16(b, 44, self.order);
        put_u16(b, 46, 0);
    }

    /// Decodes 48 bytes and checks that the fields agree with one another: known flags and
    /// order bits (values only with DUPSORT), a zero reserved half-word, a depth within [`MAX_TREE_DEPTH`], and an empty tree exactly when the
    /// root is 0. Whether the root and counts fit the snapshot is checked by the meta (for its
    /// own records) and by every descent.
    pub fn decode(b: &[u8]) -> Result<DbRecord> {
        if b.len() != DB_RECORD {
            return Err(Error::corrupted(format!(
                "database record of {} bytes",
                b.len()
            )));
        }
        let r = DbRecord {
            root: get_u64(b, 0),
            entries: get_u64(b, 8),
            branch_pages: get_u64(b, 16),
            leaf_pages: get_u64(b, 24),
            overflow_pages: get_u64(b, 32),
            depth: get_u16(b, 40),
            flags: get_u16(b, 42),
            order: get_u16(b, 44),
        };
        let bad = |what: &str| Err(Error::corrupted(format!("database record: {what}")));
        if r.flags & !DB_RECORD_FLAGS != 0 {
            return bad(&format!("unknown flags {:#x}", r.flags));
        }
        if r.order & !(ORDER_CUSTOM_KEYS | ORDER_CUSTOM_VALUES) != 0 {
            return bad(&format!("unknown order bits {:#x}", r.order));
        }
        if r.order & ORDER_CUSTOM_VALUES != 0 && r.flags & DB_DUPSORT == 0 {
            return bad("a value order without DUPSORT");
        }
        if get_u16(b, 46) != 0 {
            return bad("reserved half-word is not zero");
        }
        if r.depth > MAX_TREE_DEPTH {
            return bad(&format!("depth {}", r.depth));
        }
        let pages = r.branch_pages.checked_add(r.leaf_pages);
        let shape_ok = if r.root == 0 {
            r.depth == 0 && r.entries == 0 && pages == Some(0) && r.overflow_pages == 0
        } else {
            // A DUPSORT record's page counts include its sub-trees' pages, so a one-leaf
            // main tree may count branch pages of its sub-trees.
            let dupsort = r.flags & DB_DUPSORT != 0;
            r.depth >= 1
                && r.leaf_pages >= 1
                && (r.depth == 1 || r.branch_pages > 0)
                && (dupsort || r.depth > 1 || r.branch_pages == 0)
                && pages.is_some_and(|p| p >= u64::from(r.depth))
        };
        if !shape_ok {
            return bad(&format!(
                "root {} with depth {}, {} entries, {}+{}+{} pages",
                r.root, r.depth, r.entries, r.branch_pages, r.leaf_pages, r.overflow_pages
            ));
        }
        Ok(r)
    }

    /// Decodes the record of a sorted-duplicates sub-tree (an NF_SUBTREE node's value area):
    /// checked as any record, but its `flags` field holds the DUPFIXED value size, and the
    /// tree is never empty, has no overflow pages and no order bits (the database's cover it).
    pub fn decode_sub(b: &[u8]) -> Result<DbRecord> {
        let mut plain = [0u8; DB_RECORD];
        if b.len() != DB_RECORD {
            return Err(Error::corrupted(format!(
                "sub-tree record of {} bytes",
                b.len()
            )));
        }
        plain.copy_from_slice(b);
        put_u16(&mut plain, 42, 0);
        let mut r = DbRecord::decode(&plain)?;
        if r.root == 0 || r.overflow_pages != 0 || r.order != 0 {
            return Err(Error::corrupted(
                "sub-tree record: empty, with overflow pages, or with order bits",
            ));
        }
        r.flags = get_u16(b, 42);
        Ok(r)
    }

    /// Whether every page the record counts, and its root, lie below `npages`.
    pub fn fits(&self, npages: u64) -> bool {
        self.root < npages
            && [self.branch_pages, self.leaf_pages, self.overflow_pages]
                .iter()
                .try_fold(0u64, |a, &c| a.checked_add(c))
                .is_some_and(|total| total < npages)
    }

    /// Encoded form.
    pub fn to_bytes(&self) -> [u8; DB_RECORD] {
        let mut b = [0u8; DB_RECORD];
        self.encode(&mut b);
        b
    }
}

// ---------------------------------------------------------------------------------------------
// Meta slots (commit records).

/// A run of pages written by a commit, with the transaction that wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenRun {
    /// First page.
    pub start: u64,
    /// Pages in the run (an overflow value counts as one run).
    pub len: u32,
    /// Transaction that wrote every page of the run.
    pub txnid: u64,
}

/// Bytes per encoded [`WrittenRun`].
pub const WRITTEN_RUN: usize = 20;
/// Written runs that fit in the meta slot itself.
pub const META_INLINE_RUNS: usize = 14;

const M_MAGIC: usize = 0;
const M_VERSION: usize = 8;
const M_PAGE_SIZE: usize = 12;
const M_TXNID: usize = 16;
const M_FLAGS: usize = 24;
const M_RUNS: usize = 28;
const M_NPAGES: usize = 32;
const M_LAST_STEADY: usize = 40;
const M_LIST_HEAD: usize = 48;
const M_MAIN: usize = 56;
const M_CATALOG: usize = M_MAIN + DB_RECORD;
const M_FREE: usize = M_CATALOG + DB_RECORD;
const M_INLINE: usize = M_FREE + DB_RECORD;
const M_BOOT: usize = M_INLINE + META_INLINE_RUNS * WRITTEN_RUN;
const M_CHECKSUM: usize = SECTOR - 8;
const _: () = assert!(M_BOOT + BOOT_ID <= M_CHECKSUM);

/// Bytes of a boot id (the kernel's per-boot random UUID).
pub const BOOT_ID: usize = 16;

/// Meta flag: the data this commit depends on was flushed before its meta (a steady commit).
pub const MF_STEADY: u32 = 1;

/// One commit record: what a reader needs to see a snapshot, and what recovery needs to
/// verify that the commit reached the disk whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Page size of the file.
    pub page_size: u32,
    /// Transaction id of this commit.
    pub txnid: u64,
    /// MF_* flags.
    pub flags: u32,
    /// Pages in use: every page number of the snapshot is below it.
    pub npages: u64,
    /// Last steady commit at or before this one.
    pub last_steady: u64,
    /// Number of written runs (inline, or in the list pages).
    pub run_count: u32,
    /// First list page, 0 when the runs are inline.
    pub list_head: u64,
    /// The unnamed main database.
    pub main: DbRecord,
    /// The catalog of named databases (name -> DbRecord).
    pub catalog: DbRecord,
    /// The free-page tree (first page -> run info).
    pub free: DbRecord,
    /// Written runs held inline (when `list_head == 0`).
    pub inline_runs: Vec<WrittenRun>,
    /// Boot id of the system that wrote the commit. A commit that is not steady is trusted
    /// after a restart only if the system has not rebooted since (its writes were then still
    /// in the page cache, which a process crash does not lose).
    pub boot_id: [u8; BOOT_ID],
}

/// Outcome of decoding a meta slot.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // decoded once per slot, never stored in bulk
pub enum MetaSlot {
    /// A valid record.
    Valid(Meta),
    /// Magic present but the record is torn, or fields are out of range.
    Damaged(String),
    /// Another format or never written (no magic).
    Foreign,
}

impl Meta {
    /// Whether this commit was steady.
    pub fn is_steady(&self) -> bool {
        self.flags & MF_STEADY != 0
    }

    /// The last steady commit at or before this one: this one if steady.
    pub fn steady_txnid(&self) -> u64 {
        if self.is_steady() {
            self.txnid
        } else {
            self.last_steady
        }
    }

    /// Encodes into one sector.
    pub fn encode(&self) -> [u8; SECTOR] {
        let mut b = [0u8; SECTOR];
        b[M_MAGIC..M_MAGIC + 8].copy_from_slice(&MAGIC);
        put_u32(&mut b, M_VERSION, FORMAT_VERSION);
        put_u32(&mut b, M_PAGE_SIZE, self.page_size);
        put_u64(&mut b, M_TXNID, self.txnid);
        put_u32(&mut b, M_FLAGS, self.flags);
        put_u32(&mut b, M_RUNS, self.run_count);
        put_u64(&mut b, M_NPAGES, self.npages);
        put_u64(&mut b, M_LAST_STEADY, self.last_steady);
        put_u64(&mut b, M_LIST_HEAD, self.list_head);
        self.main.encode(&mut b[M_MAIN..M_MAIN + DB_RECORD]);
        self.catalog
            .encode(&mut b[M_CATALOG..M_CATALOG + DB_RECORD]);
        self.free.encode(&mut b[M_FREE..M_FREE + DB_RECORD]);
        debug_assert!(self.inline_runs.len() <= META_INLINE_RUNS);
        for (i, r) in self.inline_runs.iter().enumerate() {
            encode_run(&mut b[M_INLINE + i * WRITTEN_RUN..], r);
        }
        b[M_BOOT..M_BOOT + BOOT_ID].copy_from_slice(&self.boot_id);
        let sum = xxh3_64(&b[..M_CHECKSUM]);
        put_u64(&mut b, M_CHECKSUM, sum);
        b
    }

    /// Decodes and checks one sector.
    pub fn decode(b: &[u8]) -> MetaSlot {
        if b.len() < SECTOR || b[M_MAGIC..M_MAGIC + 8] != MAGIC {
            return MetaSlot::Foreign;
        }
        if get_u64(b, M_CHECKSUM) != xxh3_64(&b[..M_CHECKSUM]) {
            return MetaSlot::Damaged("meta checksum mismatch".into());
        }
        let version = get_u32(b, M_VERSION);
        if version != FORMAT_VERSION {
            return MetaSlot::Damaged(format!("format version {version}"));
        }
        let page_size = get_u32(b, M_PAGE_SIZE);
        if !valid_page_size(page_size as usize) {
            return MetaSlot::Damaged(format!("page size {page_size}"));
        }
        let run_count = get_u32(b, M_RUNS);
        let list_head = get_u64(b, M_LIST_HEAD);
        let npages = get_u64(b, M_NPAGES);
        if !(1..=(1u64 << 48)).contains(&npages) {
            return MetaSlot::Damaged(format!("page count {npages}"));
        }
        let mut inline_runs = Vec::new();
        if list_head == 0 {
            if run_count as usize > META_INLINE_RUNS {
                return MetaSlot::Damaged(format!("{run_count} inline runs"));
            }
            for i in 0..run_count as usize {
                inline_runs.push(decode_run(&b[M_INLINE + i * WRITTEN_RUN..]));
            }
        }
        let rec = |at: usize| DbRecord::decode(&b[at..at + DB_RECORD]);
        let (main, catalog, free) = match (rec(M_MAIN), rec(M_CATALOG), rec(M_FREE)) {
            (Ok(m), Ok(c), Ok(f)) => (m, c, f),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                return MetaSlot::Damaged(e.to_string());
            }
        };
        if ![main, catalog, free].iter().all(|r| r.fits(npages)) {
            return MetaSlot::Damaged(format!("a database record leaves the {npages} pages"));
        }
        let txnid = get_u64(b, M_TXNID);
        let flags = get_u32(b, M_FLAGS);
        let last_steady = get_u64(b, M_LAST_STEADY);
        let steady_ok = if flags & MF_STEADY != 0 {
            last_steady == txnid
        } else {
            last_steady < txnid
        };
        if txnid == 0 || flags & !MF_STEADY != 0 || !steady_ok {
            return MetaSlot::Damaged(format!(
                "txnid {txnid}, flags {flags:#x}, last steady {last_steady}"
            ));
        }
        if list_head >= npages {
            return MetaSlot::Damaged(format!("commit list at page {list_head}"));
        }
        MetaSlot::Valid(Meta {
            page_size,
            txnid,
            flags,
            npages,
            last_steady,
            run_count,
            list_head,
            main,
            catalog,
            free,
            inline_runs,
            boot_id: b[M_BOOT..M_BOOT + BOOT_ID].try_into().expect("fixed size"),
        })
    }
}

/// Recomputes the checksum of an encoded meta slot in place (for tools and tests that craft
/// commit records; the engine encodes them whole with [`Meta::encode`]).
pub fn seal_meta(b: &mut [u8]) {
    let sum = xxh3_64(&b[..M_CHECKSUM]);
    put_u64(b, M_CHECKSUM, sum);
}

/// Whether a buffer's first meta slot carries Cairn's magic (an old or damaged file of ours).
pub fn has_magic(b: &[u8]) -> bool {
    // A slot cut short by truncation still shows its magic.
    (0..META_SLOTS).any(|i| b.get(i * SECTOR..i * SECTOR + 8) == Some(&MAGIC[..]))
}

fn encode_run(b: &mut [u8], r: &WrittenRun) {
    put_u64(b, 0, r.start);
    put_u32(b, 8, r.len);
    put_u64(b, 12, r.txnid);
}

fn decode_run(b: &[u8]) -> WrittenRun {
    WrittenRun {
        start: get_u64(b, 0),
        len: get_u32(b, 8),
        txnid: get_u64(b, 12),
    }
}

// ---------------------------------------------------------------------------------------------
// Commit-list pages: written runs that did not fit in the meta.

/// Written runs per list page.
pub fn list_capacity(page_size: usize) -> usize {
    (page_size - PAGE_FIELDS) / WRITTEN_RUN
}

/// Builds a list page image (unsealed).
pub fn build_list_page(b: &mut [u8], runs: &[WrittenRun], next: u64) {
    b.fill(0);
    b[H_KIND] = KIND_LIST;
    put_u16(b, H_NKEYS, runs.len() as u16);
    put_u64(b, H_PLEN, next);
    for (i, r) in runs.iter().enumerate() {
        encode_run(&mut b[PAGE_FIELDS + i * WRITTEN_RUN..], r);
    }
}

/// Reads a verified list page: its runs and the next list page (0 = last).
pub fn read_list_page(b: &[u8]) -> Result<(Vec<WrittenRun>, u64)> {
    if b.len() < PAGE_FIELDS || b[H_KIND] != KIND_LIST {
        return Err(Error::corrupted(format!(
            "page {} is not a commit-list page",
            b.get(H_PGNO..H_PGNO + 8).map_or(0, |_| get_u64(b, H_PGNO))
        )));
    }
    let n = get_u16(b, H_NKEYS) as usize;
    if n > list_capacity(b.len()) {
        return Err(Error::corrupted("commit-list page holds too many entries"));
    }
    let runs = (0..n)
        .map(|i| decode_run(&b[PAGE_FIELDS + i * WRITTEN_RUN..]))
        .collect();
    Ok((runs, get_u64(b, H_PLEN)))
}

// ---------------------------------------------------------------------------------------------
// Overflow pages.

/// Writes the header of an overflow run; the value follows at [`PAGE_FIELDS`].
pub fn init_overflow(b: &mut [u8], span: u32) {
    b[..PAGE_FIELDS].fill(0);
    b[H_KIND] = KIND_OVERFLOW;
    put_u32(b, H_UPPER, span);
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
// Sorted duplicates (DUPSORT): inline value sets and sub-tree records, in `format/dupset.rs`.

mod dupset;
pub use dupset::{
    dups_node_max, dupset_insert, dupset_remove, dupset_size, max_dup_key_size, DupSet,
    DupSetBuilder, DUPSET_HDR, SUBTREE_REC,
};

// Packed leaves of DUPFIXED sub-trees (kind 5), in `format/packed.rs`.
mod search;
pub use search::{cmp_bytes, hint_of, CmpFn, KeyCmp};

mod packed;
pub use packed::{
    is_packed, packed_capacity, Leaf, PackedLeaf, PackedLeafMut, KIND_LEAF_FIXED, PACKED_AT,
};

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
    b: &'a [u8],
    nkeys: usize,
    plen: usize,
    upper: usize,
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
    fn slot(&self, i: usize) -> (usize, u16) {
        let at = SLOTS_AT + i * SLOT;
        (get_u16(self.b, at) as usize, get_u16(self.b, at + 2))
    }

    /// Node `i` (< nkeys), bounds-checked: it lies in the node area, its flags are known and
    /// fit the page's kind (a leaf node carries at most one of BIG, SUBTREE and DUPS; a
    /// SUBTREE node's value area is one sub-tree record).
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

    #[inline(never)]
    fn node_flagged(&self, off: usize, h: &[u8; NODE_HDR]) -> Result<Node<'a>> {
        let b = self.b;
        let flags = h[0];
        let allowed = if self.is_leaf() {
            NF_BIG | NF_SUBTREE | NF_DUPS
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
    fn bad(&self, what: &str) -> Error {
        Error::corrupted(format!("page {}: {what}", get_u64(self.b, H_PGNO)))
    }
}

// ---------------------------------------------------------------------------------------------
// Branch and leaf pages: write side. Only called on pages this process built or checked.

/// Mutable view of a branch or leaf page image owned by a write transaction.
pub struct PageMut<'a> {
    b: &'a mut [u8],
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

    fn nkeys(&self) -> usize {
        get_u16(self.b, H_NKEYS) as usize
    }
    fn upper(&self) -> usize {
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
            return Err(Error::corrupted("a replaced node does not fit (internal)"));
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

// ---------------------------------------------------------------------------------------------
// The lock file (docs/design.md, "Lock file"). Shared memory, not durable: it is rebuilt by the
// first process that opens the environment. Everything in it is a native-endian 64-bit word
// accessed atomically, so offsets are given in words.

/// Magic word of a lock file ("CAIRNLK" + version byte).
pub const LOCK_MAGIC: u64 = u64::from_le_bytes(*b"CAIRNLK\x01");
/// Lock-file format version (2: the slots-used word).
pub const LOCK_VERSION: u64 = 2;
/// Word: magic, written last by the initialising process.
pub const LW_MAGIC: usize = 0;
/// Word: format version.
pub const LW_VERSION: usize = 1;
/// Word: reader slots in the table.
pub const LW_MAX_READERS: usize = 2;
/// Word: txnid of the current (latest published) commit.
pub const LW_CURRENT: usize = 3;
/// Word: txnid of a commit being written now (0 when none); left set by a writer that died.
pub const LW_INFLIGHT: usize = 4;
/// Word: page size of the data file.
pub const LW_PAGE_SIZE: usize = 5;
/// Word: one past the highest reader slot claimed since the file was reset (only grows): scans
/// for snapshots stop there instead of reading the whole table.
pub const LW_SLOTS_USED: usize = 6;
/// Words: three published commit records, each a sequence word and a sector of meta.
pub const LW_CELLS: usize = 8;
/// Words per published commit record.
pub const LW_CELL_WORDS: usize = 1 + SECTOR / 8;
/// Bytes before the first reader slot.
pub const LOCK_HEADER: usize = 4096;
/// Bytes per reader slot: one cache line.
pub const LOCK_SLOT: usize = 64;
/// Slot word: snapshot txnid, 0 when idle.
pub const LS_TXNID: usize = 0;
/// Slot word: owner (pid << 32 | handle tag), 0 when free.
pub const LS_OWNER: usize = 1;
/// Slot word: thread id of the last reader.
pub const LS_TID: usize = 2;
/// Byte locked (shared) by every process using the file; exclusive by the initialiser.
pub const LB_ALIVE: u64 = 0;
/// Byte locked exclusively by the writer.
pub const LB_WRITER: u64 = 1;
/// Byte locked exclusively while claiming or reaping reader slots.
pub const LB_TABLE: u64 = 2;
const _: () = assert!(LW_SLOTS_USED < LW_CELLS);
const _: () = assert!(LW_CELLS + 3 * LW_CELL_WORDS <= LOCK_HEADER / 8);

/// Byte locked by the owner of reader slot `i` while it lives (released by the kernel when
/// it dies, which is how a dead reader is told from a live one, whatever its pid).
pub fn lock_slot_byte(i: usize) -> u64 {
    (LOCK_HEADER + i * LOCK_SLOT) as u64
}

/// Size of a lock file with `max_readers` slots.
pub fn lock_file_len(max_readers: usize) -> usize {
    LOCK_HEADER + max_readers * LOCK_SLOT
}

/// Word index of word `w` of reader slot `i`.
pub fn lock_slot_word(i: usize, w: usize) -> usize {
    (LOCK_HEADER + i * LOCK_SLOT) / 8 + w
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn leaf(ps: usize) -> Vec<u8> {
        let mut b = vec![0u8; ps];
        PageMut::init(&mut b, KIND_LEAF, true);
        b
    }

    pub(super) fn node_in<'a>(key: &'a [u8], val: &'a [u8]) -> NodeIn<'a> {
        NodeIn {
            flags: 0,
            key,
            val,
            vlen: val.len() as u32,
        }
    }

    pub(super) fn contents(b: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let p = Page::new(b, 1).unwrap();
        (0..p.nkeys())
            .map(|i| {
                let n = p.node(i).unwrap();
                (n.key.to_vec(), n.val.to_vec())
            })
            .collect()
    }

    /// Scattered dead space is compacted in place: after removals and growing replacements
    /// the nodes, their order and the byte count are what a fresh page would hold.
    #[test]
    fn compaction_and_replace_keep_every_node() {
        let mut b = leaf(4096);
        let mut want = Vec::new();
        for i in 0..60u32 {
            let k = format!("key{i:04}").into_bytes();
            let v = vec![i as u8; (i as usize * 7) % 50];
            assert!(PageMut::new(&mut b)
                .insert(i as usize, &node_in(&k, &v))
                .unwrap());
            want.push((k, v));
        }
        // Every third node removed: dead space between live nodes.
        for i in (0..60).rev().filter(|i| i % 3 == 0) {
            PageMut::new(&mut b).remove(i);
            want.remove(i);
        }
        // Grow nodes until one no longer fits; each growth needs compaction at some point.
        let mut grown = 0;
        for round in 0..40 {
            for i in 0..want.len() {
                let v = vec![round as u8; want[i].1.len() + 5];
                let k = want[i].0.clone();
                if PageMut::new(&mut b).replace(i, &node_in(&k, &v)).unwrap() {
                    want[i].1 = v;
                    grown += 1;
                } else {
                    // Refused: the page is untouched.
                    assert_eq!(contents(&b), want);
                }
            }
        }
        assert!(grown > 40);
        assert_eq!(contents(&b), want);
        let p = Page::new(&b, 1).unwrap();
        let live: usize = want
            .iter()
            .map(|(k, v)| SLOT + NODE_HDR + k.len() + v.len())
            .sum();
        assert_eq!(p.used_bytes().unwrap(), SLOTS_AT + live);
        PageMut::new(&mut b).compact().unwrap();
        assert_eq!(contents(&b), want);
        assert_eq!(PageMut::new(&mut b).gap(), 4096 - SLOTS_AT - live);
        // Shrinking replacements stay in place.
        let k = want[0].0.clone();
        assert!(PageMut::new(&mut b).replace(0, &node_in(&k, b"")).unwrap());
        want[0].1.clear();
        assert_eq!(contents(&b), want);
    }

    /// The checksum is XXH3-64 with seed 0 whichever implementation and SIMD path computes
    /// it: files written by earlier builds (xxhash-rust) must keep verifying.
    #[test]
    fn checksum_is_standard_xxh3() {
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u8> = (0..if cfg!(miri) { 4_100 } else { 70_000 })
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        // Every length class of XXH3 (0-16, 17-128, 129-240, long) and page sizes; under miri
        // (which interprets every SIMD instruction) one length per class.
        let lens: Vec<usize> = if cfg!(miri) {
            vec![0, 5, 16, 100, 200, 4088]
        } else {
            (0..300)
                .chain([512, 1000, 4096, 4088, 8192, 16_384, 65_536])
                .collect()
        };
        for len in lens {
            for off in [0, 1, 7] {
                let b = &data[off..off + len];
                assert_eq!(
                    xxh3_64(b),
                    xxhash_rust::xxh3::xxh3_64(b),
                    "len {len} off {off}"
                );
            }
        }
    }

    #[test]
    fn meta_round_trip_and_damage() {
        let m = Meta {
            page_size: 4096,
            txnid: 7,
            flags: MF_STEADY,
            npages: 10,
            last_steady: 7,
            run_count: 1,
            list_head: 0,
            main: DbRecord {
                root: 3,
                entries: 2,
                leaf_pages: 1,
                depth: 1,
                ..Default::default()
            },
            catalog: DbRecord::default(),
            free: DbRecord::default(),
            inline_runs: vec![WrittenRun {
                start: 3,
                len: 1,
                txnid: 7,
            }],
            boot_id: [9; BOOT_ID],
        };
        let mut b = m.encode();
        match Meta::decode(&b) {
            MetaSlot::Valid(d) => assert_eq!(d, m),
            other => panic!("{other:?}"),
        }
        b[100] ^= 1;
        assert!(matches!(Meta::decode(&b), MetaSlot::Damaged(_)));
        assert!(matches!(Meta::decode(&[0u8; SECTOR]), MetaSlot::Foreign));
    }

    #[test]
    fn page_seal_verify() {
        let mut b = leaf(4096);
        seal_page(&mut b, 5, 9);
        verify_page(&b, 5, Some(9)).unwrap();
        assert!(verify_page(&b, 6, Some(9)).is_err());
        assert!(verify_page(&b, 5, Some(8)).is_err());
        b[2000] ^= 0x10;
        assert!(verify_page(&b, 5, None).is_err());
    }

    #[test]
    fn hostile_headers_are_errors() {
        let mut b = leaf(4096);
        put_u16(&mut b, H_NKEYS, 5000);
        assert!(Page::new(&b, 1).is_err());
        let mut b = leaf(4096);
        put_u16(&mut b, H_NKEYS, 1);
        put_u32(&mut b, H_UPPER, 4000);
        put_u16(&mut b, SLOTS_AT, 4094);
        let p = Page::new(&b, 1).unwrap();
        assert!(p.node(0).is_err());
    }
}
