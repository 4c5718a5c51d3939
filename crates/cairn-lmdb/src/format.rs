//! The byte layout of LMDB 0.9's data file on a little-endian 64-bit machine, decoded from
//! byte slices with every offset and size checked (docs/lmdb-format.md has the tables).
//!
//! Nothing here reads a file: these functions take the bytes of one page (or of one meta page)
//! and either decode a field or say which bound was crossed.

/// Size of a page header: page number (8), pad (2), flags (2), lower (2), upper (2); an
/// overflow page has a 32-bit page count where lower and upper would be.
pub const PAGE_HEADER: usize = 16;
/// Size of a node header: two 16-bit halves of the data size (or child page number), 16-bit
/// flags (the page number's high 16 bits in a branch), 16-bit key size.
pub const NODE_HEADER: usize = 8;
/// Size of a database record (`MDB_db`).
pub const DB_RECORD: usize = 48;
/// LMDB's magic number, at offset 16 of both meta pages.
pub const MAGIC: u32 = 0xBEEF_C0DE;
/// The data format version this reader knows (LMDB 0.9).
pub const DATA_VERSION: u32 = 1;
/// A root of "no page": an empty database.
pub const NO_PAGE: u64 = u64::MAX;
/// Bytes of the meta fields after the page header, through the txnid.
pub const META_LEN: usize = 136;

/// Page flags.
pub const P_BRANCH: u16 = 0x01;
/// A leaf page.
pub const P_LEAF: u16 = 0x02;
/// The first page of an overflow run.
pub const P_OVERFLOW: u16 = 0x04;
/// A meta page.
pub const P_META: u16 = 0x08;
/// In-memory "dirty" mark; may be left set on disk.
pub const P_DIRTY: u16 = 0x10;
/// A leaf of fixed-size keys without node headers (DUPFIXED values).
pub const P_LEAF2: u16 = 0x20;
/// A sub-page embedded in a leaf node (a small set of duplicates).
pub const P_SUBP: u16 = 0x40;

/// Node flags: the value lives in an overflow run whose first page number is the node's data.
pub const F_BIGDATA: u16 = 0x01;
/// The node's data is a database record (a named database, or with F_DUPDATA a sub-tree of
/// duplicates).
pub const F_SUBDATA: u16 = 0x02;
/// The node's data holds duplicates (a sub-page, or with F_SUBDATA a sub-tree).
pub const F_DUPDATA: u16 = 0x04;

/// Database flags (LMDB's values, as Cairn's `DbFlags`).
pub const REVERSEKEY: u16 = 0x02;
/// Sorted duplicates.
pub const DUPSORT: u16 = 0x04;
/// Native-endian unsigned integer keys.
pub const INTEGERKEY: u16 = 0x08;
/// Fixed-size duplicates.
pub const DUPFIXED: u16 = 0x10;
/// Native-endian unsigned integer duplicates.
pub const INTEGERDUP: u16 = 0x20;
/// Duplicates compared from their last byte.
pub const REVERSEDUP: u16 = 0x40;
/// Every database flag LMDB stores.
pub const DB_FLAGS: u16 = 0x7e;
/// Environment flags that may sit in the free database's record: MDB_FIXEDMAP, MDB_NOSUBDIR
/// (and 1.0's MDB_ENCRYPT), beside the free database's own INTEGERKEY.
pub const FREE_RECORD_FLAGS: u16 = 0x01 | INTEGERKEY | 0x2000 | 0x4000;

pub(crate) fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

pub(crate) fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

/// A database record (`MDB_db`, 48 bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DbRecord {
    /// The free database's: the page size. A DUPFIXED sub-tree's: the value size.
    pub pad: u32,
    /// Database flags (see [`DB_FLAGS`]).
    pub flags: u16,
    /// Tree depth (0 when empty, 1 when the root is a leaf).
    pub depth: u16,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Key/value pairs, duplicates counted one each.
    pub entries: u64,
    /// Root page, or [`NO_PAGE`].
    pub root: u64,
}

impl DbRecord {
    /// Decodes a record from exactly [`DB_RECORD`] bytes (or more: the rest is ignored).
    pub fn decode(b: &[u8]) -> Option<DbRecord> {
        if b.len() < DB_RECORD {
            return None;
        }
        Some(DbRecord {
            pad: u32_at(b, 0)?,
            flags: u16_at(b, 4)?,
            depth: u16_at(b, 6)?,
            branch_pages: u64_at(b, 8)?,
            leaf_pages: u64_at(b, 16)?,
            overflow_pages: u64_at(b, 24)?,
            entries: u64_at(b, 32)?,
            root: u64_at(b, 40)?,
        })
    }

    /// Whether the database holds nothing.
    pub fn is_empty(&self) -> bool {
        self.root == NO_PAGE
    }

    /// The database flags that say how it is ordered (LMDB's persistent flags).
    pub fn db_flags(&self) -> u16 {
        self.flags & DB_FLAGS
    }
}

/// A decoded meta page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Which of the two meta pages (0 or 1).
    pub slot: u8,
    /// Fixed map address (MDB_FIXEDMAP), usually 0.
    pub map_addr: u64,
    /// Map size the environment was last opened with.
    pub map_size: u64,
    /// The free-page database.
    pub free: DbRecord,
    /// The main database.
    pub main: DbRecord,
    /// Last page in use.
    pub last_pgno: u64,
    /// Transaction that wrote this meta.
    pub txnid: u64,
}

impl Meta {
    /// Page size (the free database record's pad).
    pub fn page_size(&self) -> usize {
        self.free.pad as usize
    }

    /// Persistent environment flags (the free database record's flags beyond INTEGERKEY).
    pub fn env_flags(&self) -> u16 {
        self.free.flags & !INTEGERKEY
    }
}

/// Why a meta page was not usable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MetaProblem {
    /// No LMDB magic at all (not LMDB's file, or a zeroed page).
    NoMagic,
    /// The magic of a big-endian machine's file.
    BigEndian,
    /// LMDB's magic with another data version.
    Version(u32),
    /// Damaged: what is wrong.
    Damaged(String),
}

/// Whether `b` (the start of a data file) carries LMDB's magic in either byte order.
pub fn has_magic(b: &[u8]) -> bool {
    matches!(u32_at(b, PAGE_HEADER), Some(MAGIC))
        || matches!(u32_at(b, PAGE_HEADER), Some(m) if m == MAGIC.swap_bytes())
}

/// Whether `p` is a valid LMDB page size (a power of two from 512 bytes to 64 KiB).
pub fn valid_page_size(p: u64) -> bool {
    p.is_power_of_two() && (512..=65536).contains(&p)
}

/// Decodes the meta page `slot` from its bytes (at least `PAGE_HEADER + META_LEN`).
pub fn decode_meta(b: &[u8], slot: u8) -> Result<Meta, MetaProblem> {
    let magic = u32_at(b, PAGE_HEADER).ok_or(MetaProblem::NoMagic)?;
    if magic == MAGIC.swap_bytes() {
        return Err(MetaProblem::BigEndian);
    }
    if magic != MAGIC {
        return Err(MetaProblem::NoMagic);
    }
    let bad = |s: String| MetaProblem::Damaged(s);
    if b.len() < PAGE_HEADER + META_LEN {
        return Err(bad(format!("meta page is {} bytes", b.len())));
    }
    let version = u32_at(b, 20).unwrap_or(0);
    if version != DATA_VERSION {
        return Err(MetaProblem::Version(version));
    }
    let flags = u16_at(b, 10).unwrap_or(0);
    if flags & P_META == 0 {
        return Err(bad(format!("page flags {flags:#x} lack the meta flag")));
    }
    let pgno = u64_at(b, 0).unwrap_or(0);
    if pgno != u64::from(slot) {
        return Err(bad(format!("page number field is {pgno}")));
    }
    let free = DbRecord::decode(&b[40..88]).ok_or_else(|| bad("short free record".into()))?;
    let main = DbRecord::decode(&b[88..136]).ok_or_else(|| bad("short main record".into()))?;
    let m = Meta {
        slot,
        map_addr: u64_at(b, 24).unwrap_or(0),
        map_size: u64_at(b, 32).unwrap_or(0),
        free,
        main,
        last_pgno: u64_at(b, 136).unwrap_or(0),
        txnid: u64_at(b, 144).unwrap_or(0),
    };
    if !valid_page_size(u64::from(free.pad)) {
        // A 32-bit LMDB's meta has its page size 8 bytes earlier.
        let p32 = u32_at(b, 32).unwrap_or(0);
        if valid_page_size(u64::from(p32)) && u32_at(b, 28) == Some(0) {
            return Err(bad(format!(
                "page size field {} (this looks like a 32-bit LMDB's file, which this reader does not read)",
                free.pad
            )));
        }
        return Err(bad(format!(
            "page size {} (not a power of two from 512 to 65536)",
            free.pad
        )));
    }
    if free.flags & !FREE_RECORD_FLAGS != 0 {
        return Err(bad(format!(
            "free database flags {:#x} (only INTEGERKEY and environment flags belong there)",
            free.flags
        )));
    }
    check_db_flags(main.flags).map_err(|w| bad(format!("main database {w}")))?;
    if m.last_pgno < 1 {
        return Err(bad(format!(
            "last page {} (pages 0 and 1 are the metas)",
            m.last_pgno
        )));
    }
    for (name, r) in [("free", &free), ("main", &main)] {
        check_record_shape(r, m.last_pgno).map_err(|w| bad(format!("{name} database {w}")))?;
    }
    Ok(m)
}

/// Checks a database's flags: only LMDB's, and the duplicate-only ones only with DUPSORT
/// (CVE-2019-16224: DUPFIXED without DUPSORT made LMDB overflow a buffer).
pub fn check_db_flags(flags: u16) -> Result<(), String> {
    if flags & !DB_FLAGS != 0 {
        return Err(format!("flags {flags:#x}: unknown bits"));
    }
    if flags & (DUPFIXED | INTEGERDUP | REVERSEDUP) != 0 && flags & DUPSORT == 0 {
        return Err(format!(
            "flags {flags:#x}: DUPFIXED, INTEGERDUP or REVERSEDUP without DUPSORT"
        ));
    }
    Ok(())
}

/// Depth limit of any tree: with at least two keys a branch and 512-byte pages, 64 levels
/// address more pages than a 64-bit file holds.
pub const MAX_DEPTH: u16 = 64;

/// Checks a record's root and depth against the snapshot's last page.
pub fn check_record_shape(r: &DbRecord, last_pgno: u64) -> Result<(), String> {
    if r.root == NO_PAGE {
        if r.depth != 0 {
            return Err(format!("is empty but records depth {}", r.depth));
        }
        return Ok(());
    }
    if r.root < 2 || r.root > last_pgno {
        return Err(format!(
            "root page {} outside pages 2..={last_pgno}",
            r.root
        ));
    }
    if r.depth == 0 || r.depth > MAX_DEPTH {
        return Err(format!("depth {} (1 to {MAX_DEPTH} for a tree)", r.depth));
    }
    Ok(())
}

/// The header fields of a page (or sub-page).
#[derive(Clone, Copy, Debug)]
pub struct PageHeader {
    /// Page number field.
    pub pgno: u64,
    /// LEAF2 pages: the key size.
    pub pad: u16,
    /// Page flags.
    pub flags: u16,
    /// End of the offsets array.
    pub lower: u16,
    /// Start of the node area.
    pub upper: u16,
}

impl PageHeader {
    /// Decodes the header at the start of `b`.
    pub fn decode(b: &[u8]) -> Option<PageHeader> {
        Some(PageHeader {
            pgno: u64_at(b, 0)?,
            pad: u16_at(b, 8)?,
            flags: u16_at(b, 10)?,
            lower: u16_at(b, 12)?,
            upper: u16_at(b, 14)?,
        })
    }

    /// An overflow page's run length (where lower and upper would be).
    pub fn overflow_pages(b: &[u8]) -> Option<u32> {
        u32_at(b, 12)
    }
}

/// A slotted page (leaf, branch, LEAF2, or a sub-page), checked against its length.
#[derive(Clone, Copy, Debug)]
pub struct Slotted {
    /// Header.
    pub hdr: PageHeader,
    /// Number of entries.
    pub count: usize,
}

/// One node of a leaf or branch page, with its byte ranges inside the page.
#[derive(Clone, Copy, Debug)]
pub struct Node {
    /// Node flags (a branch node: the child's page number bits 32..48).
    pub flags: u16,
    /// The key's range in the page.
    pub key: (usize, usize),
    /// Data size (leaf), from the two low halves.
    pub data_size: u32,
    /// Where the data starts (right after the key).
    pub data_start: usize,
    /// A branch node's child.
    pub child: u64,
}

/// Checks a slotted page's lower/upper bounds against its length `len` and returns its
/// entry count.
pub fn slotted(b: &[u8]) -> Result<Slotted, String> {
    let hdr = PageHeader::decode(b).ok_or("shorter than a page header")?;
    let len = b.len();
    let lower = usize::from(hdr.lower);
    let upper = usize::from(hdr.upper);
    if lower < PAGE_HEADER || lower % 2 != 0 {
        return Err(format!(
            "lower bound {lower} (at least {PAGE_HEADER}, even)"
        ));
    }
    if lower > upper || upper > len {
        return Err(format!(
            "free-space bounds lower {lower}, upper {upper} on a page of {len} bytes"
        ));
    }
    let count = (lower - PAGE_HEADER) / 2;
    if hdr.flags & P_LEAF2 != 0 {
        let ks = usize::from(hdr.pad);
        if ks == 0 {
            return Err("fixed-size leaf with key size 0".into());
        }
        if PAGE_HEADER + count * ks > len {
            return Err(format!(
                "{count} fixed-size keys of {ks} bytes do not fit in {len} bytes"
            ));
        }
    }
    Ok(Slotted { hdr, count })
}

/// Decodes node `i` of a slotted page `b` (not LEAF2); `branch` says how to read its size.
/// Every range returned lies inside `b`.
pub fn node(b: &[u8], s: &Slotted, i: usize, branch: bool) -> Result<Node, String> {
    let len = b.len();
    let off = usize::from(u16_at(b, PAGE_HEADER + 2 * i).ok_or("offset array out of page")?);
    if off < usize::from(s.hdr.upper) || off + NODE_HEADER > len || off % 2 != 0 {
        return Err(format!(
            "node {i} at offset {off}, outside the node area {}..{len}",
            s.hdr.upper
        ));
    }
    let lo = u16_at(b, off).unwrap_or(0);
    let hi = u16_at(b, off + 2).unwrap_or(0);
    let flags = u16_at(b, off + 4).unwrap_or(0);
    let ksize = usize::from(u16_at(b, off + 6).unwrap_or(0));
    let kstart = off + NODE_HEADER;
    if kstart + ksize > len {
        return Err(format!(
            "node {i}: key of {ksize} bytes at offset {kstart} runs past the page end ({len})"
        ));
    }
    let data_size = u32::from(lo) | (u32::from(hi) << 16);
    let child = u64::from(lo) | (u64::from(hi) << 16) | (u64::from(flags) << 32);
    Ok(Node {
        flags: if branch { 0 } else { flags },
        key: (kstart, kstart + ksize),
        data_size,
        data_start: kstart + ksize,
        child,
    })
}

/// Entry `i` of a LEAF2 page: its range.
pub fn leaf2_key(s: &Slotted, i: usize) -> (usize, usize) {
    let ks = usize::from(s.hdr.pad);
    let start = PAGE_HEADER + i * ks;
    (start, start + ks)
}
