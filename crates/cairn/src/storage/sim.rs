//! The fault-injecting simulator: a storage in memory that keeps what was flushed apart from
//! what was only written, so that a simulated crash can drop, keep or tear each unflushed
//! write; crash tests run the engine over it.

use super::*;

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
