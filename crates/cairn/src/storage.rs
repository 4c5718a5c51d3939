//! The storage seam: every byte the engine writes, every flush and every change of length
//! passes through [`Storage`]. The real file and the fault-injecting simulator implement it;
//! crash tests swap one for the other.
//!
//! Invariants:
//! - `bytes(off, len)` only succeeds for ranges below `len()`: a read past the end of the file
//!   through the map would fault, so the range is checked here, once, for every page access.
//! - Data written by `write_at` is visible to `bytes` at once (the map is coherent with writes);
//!   it is durable only after `sync` returns.
//! - Tree and overflow pages reach the engine through `read_pages`, which verifies a page's
//!   checksum the first time this process reads it: a bit flipped on the disk is an error, never
//!   wrong data. [`VerifiedPages`] remembers what was verified by (offset, writer txnid);
//!   `write_at` forgets every page it overwrites, so a remembered entry always vouches for the
//!   bytes now at its offset. Another process's writes carry new txnids, which miss the table.

use crate::error::{Error, Result};
use crate::format::{self, BOOT_ID};
use crate::os::{self, Map, MapPages, MapView};
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

/// Where the data file's bytes live. Sealed: the engine relies on the exact guarantees above.
pub trait Storage: Send + Sync + private::Sealed {
    /// Bytes `[off, off + len)`, which must lie below the current length.
    #[inline]
    fn bytes(&self, off: u64, len: usize) -> Result<&[u8]> {
        Ok(self.view(off, len)?.slice(0, len))
    }
    /// The same range as a view that makes slices of the parts asked for (a snapshot's whole
    /// file, free pages included, must not be one slice: a writer may be writing those).
    fn view(&self, off: u64, len: usize) -> Result<MapView<'_>>;
    /// Current length in bytes.
    fn len(&self) -> u64;
    /// Re-reads the length, which another process may have changed.
    fn refresh_len(&self) -> u64 {
        self.len()
    }
    /// Whether the storage holds no bytes at all (a new file).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Grows to `new_len` bytes, allocating blocks so that later writes are in place.
    fn grow(&self, new_len: u64) -> Result<()>;
    /// Shrinks to `new_len` bytes.
    fn truncate(&self, new_len: u64) -> Result<()>;
    /// Writes `bufs` one after another starting at `off`; a write past the end extends the
    /// storage, as on a file.
    fn write_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()>;
    /// Copies bytes out (for the meta slots, which are rewritten while mapped).
    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()>;
    /// Makes everything written so far durable (fdatasync).
    fn sync(&self) -> Result<()>;
    /// Starts writing `[off, off + len)` to the device without waiting: a hint that lets the
    /// device work while the commit goes on; only `sync` makes anything durable.
    fn start_writeback(&self, _off: u64, _len: u64) {}
    /// Pages `[off, off + len)` to be written in place through a writable map (a lazy
    /// environment's dirty pages), or None where pages go through `write_at` only (no
    /// writable map, blocks not known to be allocated, or the range past the end). Handing
    /// them out forgets what was verified there.
    ///
    /// # Safety
    /// docs/safety.md §8: the caller owns the range exclusively until the result is dropped
    /// (pages no snapshot can reach, allocated to one write transaction), and drops the result
    /// before the storage.
    unsafe fn map_pages(&self, _off: u64, _len: u64) -> Option<MapPages> {
        None
    }
    /// Records that `bufs`, written in place at `off` through `map_pages`, are what a commit
    /// wrote there (sealed pages): as durable as a `write_at` of them, that is, after the
    /// next `sync`.
    fn stored(&self, _off: u64, _bufs: &[&[u8]]) {}
    /// Writes a commit's meta slot (`off` inside page 0): with `write_at`, or, where pages are
    /// written in place, through the map too (one write call less per commit).
    fn write_meta(&self, off: u64, meta: &[u8]) -> Result<()> {
        self.write_at(off, &[meta])
    }
    /// Size of the address range reserved for the map.
    fn reserved(&self) -> u64;
    /// Advises random access.
    fn advise_random(&self) {}
    /// Id of the running system boot: commits that are not steady are trusted at open only if
    /// they were written during this boot (a power loss implies a reboot). All zeros when
    /// unknown, which trusts nothing unsynced.
    fn boot_id(&self) -> [u8; BOOT_ID];
    /// Pages whose checksum this process has verified (see `read_pages`).
    #[doc(hidden)]
    fn verified(&self) -> &VerifiedPages;
}

/// Offsets are remembered per 4 KiB unit, whatever the page size.
const UNIT: u64 = format::MIN_PAGE_SIZE as u64;
/// Entries per lazily allocated chunk of the table (128 KiB each).
const CHUNK: u64 = 1 << 14;

/// Which pages of the file were verified against their checksum, and as written by which
/// transaction: one word per 4 KiB of the reserved range, allocated in chunks on first use,
/// read without locks.
pub struct VerifiedPages {
    chunks: Box<[OnceLock<Box<[AtomicU64]>>]>,
}

impl VerifiedPages {
    fn new(reserve: u64) -> VerifiedPages {
        let units = reserve.div_ceil(UNIT);
        let n = units.div_ceil(CHUNK) as usize;
        VerifiedPages {
            chunks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The entry of the page at `off`, if its chunk exists (or is created when `alloc`).
    fn entry(&self, off: u64, alloc: bool) -> Option<&AtomicU64> {
        let unit = off / UNIT;
        let cell = self.chunks.get((unit / CHUNK) as usize)?;
        let chunk = if alloc {
            cell.get_or_init(|| (0..CHUNK).map(|_| AtomicU64::new(0)).collect())
        } else {
            cell.get()?
        };
        chunk.get((unit % CHUNK) as usize)
    }

    /// Whether the page at `off`, stamped by `txnid`, was verified.
    #[inline]
    fn is_verified(&self, off: u64, txnid: u64) -> bool {
        txnid != 0
            && self
                .entry(off, false)
                .is_some_and(|e| e.load(Ordering::Acquire) == txnid)
    }

    fn mark(&self, off: u64, txnid: u64) {
        if let Some(e) = self.entry(off, true) {
            e.store(txnid, Ordering::Release);
        }
    }

    /// Remembers pages this process just wrote as verified: it sealed them itself, so their
    /// checksum holds by construction and reading them back need not hash them again.
    fn wrote(&self, off: u64, bufs: &[&[u8]]) {
        let mut at = off;
        for b in bufs {
            // Whole pages only (meta sectors are 512 bytes and live in page 0).
            if at.is_multiple_of(UNIT) && b.len() as u64 >= UNIT {
                if let Ok(id) = format::page_id(b) {
                    if id.txnid != 0 && id.pgno != 0 {
                        self.mark(at, id.txnid);
                    }
                }
            }
            at += b.len() as u64;
        }
    }

    /// Forgets every page starting in `[off, off + len)`.
    fn forget(&self, off: u64, len: u64) {
        let mut at = off.div_ceil(UNIT) * UNIT;
        // Past the table nothing is remembered.
        let covered = self.chunks.len() as u64 * CHUNK * UNIT;
        let end = off.saturating_add(len).min(covered);
        while at < end {
            match self.entry(at, false) {
                Some(e) => {
                    e.store(0, Ordering::Release);
                    at += UNIT;
                }
                // A chunk never allocated holds nothing to forget.
                None => at = (at / UNIT / CHUNK + 1) * CHUNK * UNIT,
            }
        }
    }
}

/// The `span` pages at `pgno` (a tree page, or a whole overflow run), verified against their
/// checksum, number and a writer no newer than `max_txnid` the first time this process reads
/// them. `span` must be what the page's header declares, so a page verified alone is never
/// taken for the head of a longer run.
#[inline]
pub(crate) fn read_pages(
    storage: &dyn Storage,
    page_size: usize,
    pgno: u64,
    span: u64,
    max_txnid: u64,
) -> Result<&[u8]> {
    let ps = page_size as u64;
    let off = pgno
        .checked_mul(ps)
        .ok_or_else(|| Error::corrupted(format!("page {pgno} out of range")))?;
    let len = span
        .checked_mul(ps)
        .and_then(|l| usize::try_from(l).ok())
        .ok_or_else(|| Error::corrupted(format!("run of {span} pages out of range")))?;
    let b = storage.bytes(off, len)?;
    checked_pages(storage.verified(), b, off, pgno, span, max_txnid)
}

/// `read_pages` for bytes `b` already taken at `off` from the storage whose verified-page table
/// is `seen` (a transaction that mapped its whole snapshot once, and looked the table up once):
/// the same checks of the image. Inlined into every page read: a cursor walk reads a page per
/// step or two.
#[inline(always)]
pub(crate) fn checked_pages<'a>(
    seen: &VerifiedPages,
    b: &'a [u8],
    off: u64,
    pgno: u64,
    span: u64,
    max_txnid: u64,
) -> Result<&'a [u8]> {
    let id = format::page_id(b)?;
    let own = if id.kind == format::KIND_OVERFLOW {
        id.span
    } else {
        1
    };
    if own != span {
        return Err(Error::corrupted(format!(
            "page {pgno}: spans {own} pages where {span} are expected"
        )));
    }
    if id.txnid > max_txnid {
        return Err(Error::corrupted(format!(
            "page {pgno}: written by transaction {}, after the snapshot's {max_txnid}",
            id.txnid
        )));
    }
    if !seen.is_verified(off, id.txnid) {
        format::verify_page(b, pgno, None)?;
        seen.mark(off, id.txnid);
    }
    Ok(b)
}

mod private {
    pub trait Sealed {}
    impl Sealed for super::FileStorage {}
    impl Sealed for super::SimStorage {}
}

/// The data file: read through a shared map; written with pwrite, or, by a lazy handle, in
/// place through the map (`map_pages`, docs/design.md "Pages written in place").
///
/// Durable handles never write through the map: a store through a shared file map dirties the
/// whole page-cache folio holding the page, and with large folios (ext4 on Linux 6.x) one 4 KiB
/// page written made the flush write up to 2 MiB (a durable single put after a bulk load:
/// 1.4 MiB sent to the disk per commit, p50 commit 721 us; with pwrite, which marks only the
/// blocks written, 304 us). pwrite also spares the write-protect faults that follow every
/// writeback. A lazy handle flushes once a second, not per commit, so its stores pay both
/// rarely, and save a write call and a copy per run of pages every commit.
pub struct FileStorage {
    file: File,
    map: Map,
    len: AtomicU64,
    name: String,
    boot: [u8; BOOT_ID],
    verified: VerifiedPages,
    /// Dirty pages may be written in place (`map_pages`): the map is writable and every
    /// block below the length is allocated (`enable_map_writes`, and each growth since).
    map_writes: std::sync::atomic::AtomicBool,
}

impl FileStorage {
    /// Wraps an open data file, reserving `reserve` bytes of address space for its map:
    /// read-only, or read-write when `writable` (a lazy environment that may write its dirty
    /// pages in place, see [`FileStorage::enable_map_writes`]; a file opened read-only falls
    /// back to a read-only map).
    pub fn new(file: File, name: String, reserve: u64, writable: bool) -> Result<FileStorage> {
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("reading the size of {name}"), e))?
            .len();
        let reserve = reserve.max(len);
        let map = match writable {
            true => Map::file_rw(&file, reserve as usize)
                .or_else(|_| Map::file(&file, reserve as usize))?,
            false => Map::file(&file, reserve as usize)?,
        };
        Ok(FileStorage {
            file,
            map,
            len: AtomicU64::new(len),
            name,
            boot: system_boot_id(),
            verified: VerifiedPages::new(reserve),
            map_writes: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Lets write transactions store dirty pages in place through the map, if it is writable
    /// and the file system allocates every block below the current length (fallocate fills
    /// any hole: a store into a hole on a full disk would be SIGBUS, not an error). Returns
    /// whether it did; where it did not, pages go through pwrite as in durable mode.
    pub fn enable_map_writes(&self) -> bool {
        if !self.map.is_writable() {
            return false;
        }
        let len = self.refresh_len();
        let ok = len == 0 || matches!(os::allocate_blocks(&self.file, 0, len), Ok(true));
        self.map_writes.store(ok, Ordering::Release);
        ok
    }

    /// The open file.
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Storage for FileStorage {
    #[inline]
    fn view(&self, off: u64, len: usize) -> Result<MapView<'_>> {
        let end = off
            .checked_add(len as u64)
            .ok_or_else(|| Error::corrupted("page offset overflows"))?;
        if end > self.len.load(Ordering::Acquire) && end > self.refresh_len() {
            return Err(Error::corrupted(format!(
                "{}: read of bytes {off}..{end} past the end of the file",
                self.name
            )));
        }
        if end > self.map.len() as u64 {
            return Err(Error::corrupted(format!(
                "{}: read past the mapped range",
                self.name
            )));
        }
        Ok(self.map.view(off as usize, len))
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn refresh_len(&self) -> u64 {
        // Another process may have grown the file (it only grows under the writer lock, and
        // shrinks only past every page a live snapshot can reach). If fstat fails, the cached
        // length stands: a read past the real end is still refused by the next check.
        let Ok(meta) = self.file.metadata() else {
            return self.len();
        };
        let len = meta.len();
        self.len.store(len, Ordering::Release);
        len
    }

    fn grow(&self, new_len: u64) -> Result<()> {
        let cur = self.refresh_len();
        if new_len <= cur {
            return Ok(());
        }
        if new_len > self.map.len() as u64 {
            return Err(Error::Invalid(format!(
                "file would grow to {new_len} bytes, past the {} bytes reserved for its map",
                self.map.len()
            )));
        }
        // Blocks are reserved ahead, so a full disk shows at growth, before any commit needs
        // them; where fallocate is unsupported the file is extended instead.
        let allocated = os::preallocate(&self.file, cur, new_len - cur)
            .map_err(|e| Error::io(format!("growing {} to {new_len} bytes", self.name), e))?;
        if !allocated {
            // Holes past here: stores through the map could fault on a full disk.
            self.map_writes.store(false, Ordering::Release);
        }
        self.len.store(new_len, Ordering::Release);
        Ok(())
    }

    fn truncate(&self, new_len: u64) -> Result<()> {
        self.file
            .set_len(new_len)
            .map_err(|e| Error::io(format!("shrinking {} to {new_len} bytes", self.name), e))?;
        self.len.store(new_len, Ordering::Release);
        Ok(())
    }

    fn write_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        self.verified.forget(off, total as u64);
        os::pwritev_all(&self.file, off, bufs)
            .map_err(|e| Error::io(format!("writing to {} at offset {off}", self.name), e))?;
        // A write past the end extends the file (the first page of a new file).
        self.len
            .fetch_max(off.saturating_add(total as u64), Ordering::AcqRel);
        self.verified.wrote(off, bufs);
        Ok(())
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.file
            .read_exact_at(buf, off)
            .map_err(|e| Error::io(format!("reading {} at offset {off}", self.name), e))
    }

    fn sync(&self) -> Result<()> {
        os::datasync(&self.file).map_err(|e| Error::io(format!("flushing {}", self.name), e))
    }

    fn start_writeback(&self, off: u64, len: u64) {
        os::start_writeback(&self.file, off, len);
    }

    unsafe fn map_pages(&self, off: u64, len: u64) -> Option<MapPages> {
        let end = off.checked_add(len)?;
        if !self.map_writes.load(Ordering::Acquire) || end > self.len() || off < UNIT {
            return None;
        }
        self.verified.forget(off, len);
        // SAFETY: docs/safety.md §8: the caller owns the range (this method's contract); it
        // lies below the file's length (checked) on allocated blocks (`map_writes`), past
        // page 0's meta slots, and inside the map (`pages_mut` asserts it).
        Some(unsafe { self.map.pages_mut(off as usize, len as usize) })
    }

    fn stored(&self, off: u64, bufs: &[&[u8]]) {
        self.verified.wrote(off, bufs);
    }

    fn write_meta(&self, off: u64, meta: &[u8]) -> Result<()> {
        let end = off + meta.len() as u64;
        if !self.map_writes.load(Ordering::Acquire) || end > UNIT || end > self.len() {
            return self.write_at(off, &[meta]);
        }
        // SAFETY: docs/safety.md §8: the meta slots are written by the write transaction
        // alone (writer lock) and read only with pread, never through a slice or view of the
        // map; page 0 lies below the file's length on allocated blocks (`map_writes`).
        let mut slot = unsafe { self.map.pages_mut(off as usize, meta.len()) };
        slot.copy_from_slice(meta);
        Ok(())
    }

    fn reserved(&self) -> u64 {
        self.map.len() as u64
    }

    fn advise_random(&self) {
        self.map.advise_random();
    }

    fn boot_id(&self) -> [u8; BOOT_ID] {
        self.boot
    }

    fn verified(&self) -> &VerifiedPages {
        &self.verified
    }
}

/// The kernel's boot id (a UUID that changes at every boot), or zeros if unreadable.
fn system_boot_id() -> [u8; BOOT_ID] {
    let mut out = [0u8; BOOT_ID];
    let Ok(s) = std::fs::read_to_string("/proc/sys/kernel/random/boot_id") else {
        return out;
    };
    let hex: Vec<u8> = s
        .bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|c| (c as char).to_digit(16).expect("hex digit") as u8)
        .collect();
    if hex.len() != 2 * BOOT_ID {
        return out;
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = hex[2 * i] << 4 | hex[2 * i + 1];
    }
    out
}

/// What a simulated crash does to each write that was not yet flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Each unsynced write is dropped, kept, or torn (each 512-byte sector kept or dropped),
    /// chosen at random: a power loss.
    PowerLoss,
    /// Every write reaches the disk: a process crash (the kernel keeps the page cache).
    ProcessCrash,
}

/// Kinds of injected I/O failures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Writes fail with ENOSPC.
    DiskFull,
    /// Writes fail with EIO.
    WriteError,
    /// Flushes fail with EIO.
    SyncError,
}

struct SimInner {
    len: u64,
    durable: Vec<u8>,
    pending: Vec<(u64, Vec<u8>)>,
    /// Ranges handed out to be written in place (`map_pages`) since the last flush: the
    /// kernel may write such a page back at any moment, with whatever it holds then.
    handed: Vec<(u64, u64)>,
    /// Bytes handed out in place in all (for tests).
    handed_total: u64,
    writes: u64,
    syncs: u64,
    fault: Option<(Fault, u64)>,
}

/// In-memory storage that remembers which writes were flushed, injects I/O errors on demand,
/// and produces the image a crash would leave. Also usable as an in-memory database.
pub struct SimStorage {
    map: Map,
    inner: Mutex<SimInner>,
    len: AtomicU64,
    boot: [u8; BOOT_ID],
    verified: VerifiedPages,
    /// Hands out pages to write in place (`map_pages`), as a lazy environment's writable map
    /// does: off unless a test turns it on (`set_map_writes`).
    map_writes: std::sync::atomic::AtomicBool,
}

/// Each simulated storage is a new boot unless told otherwise (`same_boot_as`).
static SIM_BOOTS: AtomicU64 = AtomicU64::new(1);

/// A small deterministic generator (xorshift64*), so a crash is replayed from its seed.
#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    /// Seeds the generator (0 is remapped).
    pub fn new(seed: u64) -> SimRng {
        SimRng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

impl SimStorage {
    /// An empty storage with `reserve` bytes of address space.
    pub fn new(reserve: u64) -> Result<SimStorage> {
        SimStorage::from_image(&[], reserve)
    }

    /// A storage holding `image`, as if read back from a disk after a crash.
    pub fn from_image(image: &[u8], reserve: u64) -> Result<SimStorage> {
        let reserve = reserve.max(image.len() as u64);
        let map = Map::anonymous(reserve as usize)?;
        map.write(0, image);
        Ok(SimStorage {
            map,
            inner: Mutex::new(SimInner {
                len: image.len() as u64,
                durable: image.to_vec(),
                pending: Vec::new(),
                handed: Vec::new(),
                handed_total: 0,
                writes: 0,
                syncs: 0,
                fault: None,
            }),
            len: AtomicU64::new(image.len() as u64),
            boot: {
                let mut b = [0u8; BOOT_ID];
                b[..8].copy_from_slice(&SIM_BOOTS.fetch_add(1, Ordering::Relaxed).to_le_bytes());
                b
            },
            verified: VerifiedPages::new(reserve),
            map_writes: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Lets write transactions store dirty pages in place, as through a lazy environment's
    /// writable map: every range handed out since the last flush is then, like an unflushed
    /// write, kept, dropped or torn by a crash, with whatever it holds at that instant (a
    /// committed page or a half-built one), and written whole by the next flush.
    pub fn set_map_writes(&self, on: bool) {
        self.map_writes.store(on, Ordering::Release);
    }

    /// The same storage as if no reboot happened since `other` (a process crash: the page
    /// cache, and so every unsynced write, survived).
    pub fn same_boot_as(mut self, other: &SimStorage) -> SimStorage {
        self.boot = other.boot;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SimInner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Makes the `n`-th next write or flush (0 = the very next) and every later one fail.
    pub fn inject(&self, fault: Fault, after: u64) {
        self.lock().fault = Some((fault, after));
    }

    /// Stops injecting faults.
    pub fn heal(&self) {
        self.lock().fault = None;
    }

    /// Bytes handed out to be written in place so far (`set_map_writes`).
    pub fn in_place_bytes(&self) -> u64 {
        self.lock().handed_total
    }

    /// Writes and flushes done so far.
    pub fn counters(&self) -> (u64, u64) {
        let g = self.lock();
        (g.writes, g.syncs)
    }

    /// The bytes as currently visible (what a process crash leaves).
    pub fn image(&self) -> Vec<u8> {
        let len = self.lock().len;
        self.map.slice(0, len as usize).to_vec()
    }

    /// The image a crash at this instant leaves on the disk.
    pub fn crash_image(&self, mode: CrashMode, rng: &mut SimRng) -> Vec<u8> {
        let g = self.lock();
        if mode == CrashMode::ProcessCrash {
            return self.map.slice(0, g.len as usize).to_vec();
        }
        // The length change may or may not have reached the disk.
        let len = if rng.below(2) == 0 {
            g.durable.len() as u64
        } else {
            g.len
        };
        let mut img = g.durable.clone();
        img.resize(len as usize, 0);
        for (off, data) in &g.pending {
            match rng.below(3) {
                0 => {}
                1 => apply(&mut img, *off, data, None),
                _ => apply(&mut img, *off, data, Some(rng)),
            }
        }
        // Pages written in place reach the disk or not, whole or torn, with what they hold
        // now: a committed page or the half-built page of a transaction still running.
        for &(off, n) in &g.handed {
            let end = (off + n).min(g.len);
            if off >= end {
                continue;
            }
            let now = self.map.slice(off as usize, (end - off) as usize);
            match rng.below(3) {
                0 => {}
                1 => apply(&mut img, off, now, None),
                _ => apply(&mut img, off, now, Some(rng)),
            }
        }
        img
    }

    /// Moves the end of the file out to `new_len`, within the reservation.
    fn extend(&self, g: &mut SimInner, new_len: u64) -> Result<()> {
        if new_len > self.map.len() as u64 {
            return Err(Error::io(
                "growing the simulated file",
                std::io::Error::from_raw_os_error(libc::ENOSPC),
            ));
        }
        g.len = new_len;
        self.len.store(new_len, Ordering::Release);
        Ok(())
    }

    fn check_fault(g: &mut SimInner, is_sync: bool) -> Result<()> {
        if let Some((fault, after)) = g.fault {
            let applies = match fault {
                Fault::SyncError => is_sync,
                Fault::DiskFull | Fault::WriteError => !is_sync,
            };
            if applies {
                if after == 0 {
                    let (errno, op) = match fault {
                        Fault::DiskFull => (libc::ENOSPC, "writing (simulated)"),
                        Fault::WriteError => (libc::EIO, "writing (simulated)"),
                        Fault::SyncError => (libc::EIO, "flushing (simulated)"),
                    };
                    return Err(Error::io(op, std::io::Error::from_raw_os_error(errno)));
                }
                g.fault = Some((fault, after - 1));
            }
        }
        Ok(())
    }
}

/// Applies a write to an image, whole or sector by sector at random (a torn write).
fn apply(img: &mut [u8], off: u64, data: &[u8], tear: Option<&mut SimRng>) {
    let off = off as usize;
    if off >= img.len() {
        return;
    }
    let end = (off + data.len()).min(img.len());
    match tear {
        None => img[off..end].copy_from_slice(&data[..end - off]),
        Some(rng) => {
            let mut at = off;
            while at < end {
                let next = ((at / 512) + 1) * 512;
                let stop = next.min(end);
                if rng.below(2) == 0 {
                    img[at..stop].copy_from_slice(&data[at - off..stop - off]);
                }
                at = stop;
            }
        }
    }
}

impl Storage for SimStorage {
    #[inline]
    fn view(&self, off: u64, len: usize) -> Result<MapView<'_>> {
        let end = off
            .checked_add(len as u64)
            .ok_or_else(|| Error::corrupted("page offset overflows"))?;
        if end > self.len.load(Ordering::Acquire) {
            return Err(Error::corrupted(format!(
                "read of bytes {off}..{end} past the end of the file"
            )));
        }
        Ok(self.map.view(off as usize, len))
    }

    fn len(&self) -> u64 {
        self.len.load(Ordering::Acquire)
    }

    fn grow(&self, new_len: u64) -> Result<()> {
        let mut g = self.lock();
        if new_len <= g.len {
            return Ok(());
        }
        SimStorage::check_fault(&mut g, false)?;
        self.extend(&mut g, new_len)
    }

    fn truncate(&self, new_len: u64) -> Result<()> {
        let mut g = self.lock();
        if new_len < g.len {
            self.map.zero(new_len as usize, (g.len - new_len) as usize);
        }
        g.len = new_len;
        self.len.store(new_len, Ordering::Release);
        // Pending writes past the end are gone, as on a real file.
        g.pending.retain(|(o, _)| *o < new_len);
        g.handed.retain(|(o, _)| *o < new_len);
        for (o, d) in g.pending.iter_mut() {
            let keep = (new_len - *o).min(d.len() as u64) as usize;
            d.truncate(keep);
        }
        Ok(())
    }

    fn write_at(&self, off: u64, bufs: &[&[u8]]) -> Result<()> {
        let mut g = self.lock();
        SimStorage::check_fault(&mut g, false)?;
        g.writes += 1;
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        self.verified.forget(off, total as u64);
        let mut at = off;
        for b in bufs {
            let end = at + b.len() as u64;
            if end > g.len {
                // Past the end the file grows, as a real one does.
                self.extend(&mut g, end)?;
            }
            self.map.write(at as usize, b);
            g.pending.push((at, b.to_vec()));
            at = end;
        }
        Ok(())
    }

    fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        let b = self.bytes(off, buf.len())?;
        buf.copy_from_slice(b);
        Ok(())
    }

    unsafe fn map_pages(&self, off: u64, len: u64) -> Option<MapPages> {
        let end = off.checked_add(len)?;
        if !self.map_writes.load(Ordering::Acquire) || end > self.len() || off < UNIT {
            return None;
        }
        self.verified.forget(off, len);
        let mut g = self.lock();
        g.handed.push((off, len));
        g.handed_total += len;
        drop(g);
        // SAFETY: docs/safety.md §8: the caller owns the range (this method's contract); it
        // lies below the simulated length, inside the anonymous map (asserted by `pages_mut`).
        Some(unsafe { self.map.pages_mut(off as usize, len as usize) })
    }

    fn stored(&self, off: u64, bufs: &[&[u8]]) {
        // Nothing to record: the range is among those handed out, which a crash or a flush
        // takes as the map holds it.
        self.lock().writes += 1;
        self.verified.wrote(off, bufs);
    }

    fn sync(&self) -> Result<()> {
        let mut g = self.lock();
        SimStorage::check_fault(&mut g, true)?;
        g.syncs += 1;
        let len = g.len as usize;
        let mut durable = std::mem::take(&mut g.durable);
        durable.resize(len, 0);
        for (off, data) in std::mem::take(&mut g.pending) {
            apply(&mut durable, off, &data, None);
        }
        // A flush writes every dirty page of the file, those written in place included.
        for (off, n) in std::mem::take(&mut g.handed) {
            let end = (off + n).min(len as u64);
            if off < end {
                apply(
                    &mut durable,
                    off,
                    self.map.slice(off as usize, (end - off) as usize),
                    None,
                );
            }
        }
        g.durable = durable;
        Ok(())
    }

    fn reserved(&self) -> u64 {
        self.map.len() as u64
    }

    fn boot_id(&self) -> [u8; BOOT_ID] {
        self.boot
    }

    fn verified(&self) -> &VerifiedPages {
        &self.verified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PS: usize = format::MIN_PAGE_SIZE;

    fn leaf(pgno: u64, txnid: u64) -> Vec<u8> {
        let mut page = vec![0u8; PS];
        format::PageMut::init(&mut page, format::KIND_LEAF, true);
        format::seal_page(&mut page, pgno, txnid);
        page
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "the simulator maps memory with MAP_NORESERVE, which miri lacks"
    )]
    fn pages_are_verified_once_and_forgotten_when_overwritten() {
        let sim = SimStorage::new(1 << 20).unwrap();
        sim.grow(4 * PS as u64).unwrap();
        let page = leaf(2, 5);
        sim.write_at(2 * PS as u64, &[&page]).unwrap();
        assert!(read_pages(&sim, PS, 2, 1, 5).is_ok());
        assert!(sim.verified().is_verified(2 * PS as u64, 5));
        // A writer newer than the snapshot, a span other than the header's: refused even once
        // verified.
        assert!(read_pages(&sim, PS, 2, 1, 4).is_err());
        assert!(read_pages(&sim, PS, 2, 2, 5).is_err());
        // Overwritten with a damaged image of the same writer: the entry is gone, the checksum
        // fails.
        let mut bad = page.clone();
        bad[100] ^= 1;
        sim.write_at(2 * PS as u64, &[&bad]).unwrap();
        assert!(!sim.verified().is_verified(2 * PS as u64, 5));
        assert!(read_pages(&sim, PS, 2, 1, 5).is_err());
        // Past the end of the storage, and past every chunk of the table.
        assert!(read_pages(&sim, PS, 4, 1, 5).is_err());
        assert!(read_pages(&sim, PS, u64::MAX / 2, 1, 5).is_err());
        sim.verified().forget(0, u64::MAX);
    }
}
