//! The real data file: a shared map for reads, pwrite or in-place stores for writes.

use super::*;

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
