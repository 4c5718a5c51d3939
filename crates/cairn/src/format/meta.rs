//! Commit records: the meta slots and the commit-list pages holding the written runs that did
//! not fit in the meta.

use super::*;

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
/// Version 2's catalog record; zero since version 3 (named databases are keys of the main
/// database).
const M_RESERVED: usize = M_MAIN + DB_RECORD;
const M_FREE: usize = M_RESERVED + DB_RECORD;
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
    /// Format version of this commit (docs/design.md, "Version history"): FORMAT_VERSION for
    /// every commit this code writes; an older readable one ([`OLDEST_READABLE_VERSION`])
    /// differs in the free tree's keys only.
    pub version: u32,
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
    /// The unnamed main database; named databases are its [`NF_DB`] nodes.
    pub main: DbRecord,
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
        put_u32(&mut b, M_VERSION, self.version);
        put_u32(&mut b, M_PAGE_SIZE, self.page_size);
        put_u64(&mut b, M_TXNID, self.txnid);
        put_u32(&mut b, M_FLAGS, self.flags);
        put_u32(&mut b, M_RUNS, self.run_count);
        put_u64(&mut b, M_NPAGES, self.npages);
        put_u64(&mut b, M_LAST_STEADY, self.last_steady);
        put_u64(&mut b, M_LIST_HEAD, self.list_head);
        self.main.encode(&mut b[M_MAIN..M_MAIN + DB_RECORD]);
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
        if !readable_version(version) {
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
        let (main, free) = match (rec(M_MAIN), rec(M_FREE)) {
            (Ok(m), Ok(f)) => (m, f),
            (Err(e), _) | (_, Err(e)) => {
                return MetaSlot::Damaged(e.to_string());
            }
        };
        if b[M_RESERVED..M_RESERVED + DB_RECORD]
            .iter()
            .any(|&x| x != 0)
        {
            return MetaSlot::Damaged("reserved bytes 104..152 are not zero".into());
        }
        if ![main, free].iter().all(|r| r.fits(npages)) {
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
            version,
            page_size,
            txnid,
            flags,
            npages,
            last_steady,
            run_count,
            list_head,
            main,
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

/// A commit's id as the API reports it. The file's first commit (written when it is created,
/// holding nothing) has id 1 on disk, since 0 marks an empty meta slot; users count as LMDB
/// does, where a new environment's last transaction is 0 and its first write is 1, so every
/// id leaves the engine through here, one less than on disk.
pub(crate) fn user_txnid(disk: u64) -> u64 {
    disk.saturating_sub(1)
}
