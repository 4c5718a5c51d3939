//! The OS layer: memory maps and the raw calls around them. Every `unsafe` block of the
//! storage path lives here; each cites its argument in docs/safety.md.
//!
//! Invariants:
//! - A `Map` reserves its whole address range once, at creation, and never moves or shrinks it
//!   while it lives, so a slice handed out from it stays at the same address.
//! - A `Map` over a file is read-only (PROT_READ), except the data file's map of a lazy
//!   environment that stores its dirty pages in place (`Map::file_rw`); even there, the only
//!   way to write is a [`MapPages`], handed out by `unsafe fn Map::pages_mut` for pages one
//!   write transaction owns (docs/safety.md §8).
//! - `Map::slice` is called only for ranges below the file's current length (the engine checks
//!   page numbers against its snapshot, whose pages are all below the length).

use crate::error::{Error, Result};
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::AtomicU64;

/// A reserved range of address space, read-only over a file or writable anonymous memory.
pub struct Map {
    ptr: *mut u8,
    len: usize,
    writable: bool,
}

// SAFETY: see docs/safety.md §1. The map is plain memory; shared access is governed by the
// page-lifetime invariant (no page visible to a snapshot is ever written).
unsafe impl Send for Map {}
// SAFETY: see docs/safety.md §1.
unsafe impl Sync for Map {}

impl Map {
    /// One mmap call: a fresh mapping at an address the kernel picks.
    fn mmap(
        fd: libc::c_int,
        len: usize,
        prot: libc::c_int,
        flags: libc::c_int,
        what: &str,
    ) -> Result<Map> {
        // SAFETY: docs/safety.md §1: a fresh mapping at an address the kernel picks; no
        // existing memory is affected. The result is checked before use.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, 0) };
        if ptr == libc::MAP_FAILED {
            return Err(Error::io(what.to_string(), std::io::Error::last_os_error()));
        }
        Ok(Map {
            ptr: ptr.cast(),
            len,
            writable: prot & libc::PROT_WRITE != 0,
        })
    }

    /// Maps `len` bytes of `file` read-only and shared. `len` may exceed the file's length:
    /// the range is only reserved there, and the engine never reads past the file's end.
    pub fn file(file: &File, len: usize) -> Result<Map> {
        let flags = libc::MAP_SHARED | libc::MAP_NORESERVE;
        Map::mmap(
            file.as_raw_fd(),
            len,
            libc::PROT_READ,
            flags,
            "mapping the data file",
        )
    }

    /// Maps `len` bytes of the data file read-write and shared, for a lazy environment that
    /// stores its dirty pages in place ([`Map::pages_mut`]); otherwise as [`Map::file`].
    pub fn file_rw(file: &File, len: usize) -> Result<Map> {
        let flags = libc::MAP_SHARED | libc::MAP_NORESERVE;
        Map::mmap(
            file.as_raw_fd(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            flags,
            "mapping the data file for writing",
        )
    }

    /// Whether the map can be written (`file_rw`, `shared_rw`, `anonymous`).
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// Bytes `[off, off + len)` of a writable map, to be written in place.
    ///
    /// # Safety
    /// docs/safety.md §8: until the result is dropped, the caller owns the range exclusively
    /// (no live slice of the map and no other `MapPages` covers it: pages no snapshot can
    /// reach, allocated to one write transaction), and the range lies below the file's length
    /// on blocks the file system has allocated (no store can fault past the end or on a full
    /// disk). The result must not outlive the `Map`.
    pub unsafe fn pages_mut(&self, off: usize, len: usize) -> MapPages {
        assert!(self.writable, "in-place pages of a read-only map");
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "map range"
        );
        // SAFETY: docs/safety.md §8: in bounds of the live reservation (asserted), so the
        // pointer is non-null and inside the mapping.
        let ptr = unsafe { std::ptr::NonNull::new_unchecked(self.ptr.add(off)) };
        MapPages { ptr, len }
    }

    /// Maps `len` bytes of the lock file read-write and shared: the memory other processes
    /// see too. The caller has sized the file to at least `len` bytes.
    pub fn shared_rw(file: &File, len: usize) -> Result<Map> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        Map::mmap(
            file.as_raw_fd(),
            len,
            prot,
            libc::MAP_SHARED,
            "mapping the lock file",
        )
    }

    /// The whole of a writable map as 64-bit atomic words (the lock file's shared memory).
    pub fn atomics(&self) -> &[AtomicU64] {
        assert!(self.writable, "atomics over a read-only map");
        // SAFETY: docs/safety.md §5: the mapping is page-aligned, writable, initialised
        // (file-backed or zeroed) and lives as long as the borrow; AtomicU64 has the size and
        // alignment of u64; every process touches this memory only through atomics.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<AtomicU64>(), self.len / 8) }
    }

    /// Reserves `len` bytes of zeroed anonymous memory (the simulated storage's volatile image).
    pub fn anonymous(len: usize) -> Result<Map> {
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        Map::mmap(-1, len, prot, flags, "reserving memory")
    }

    /// Length of the reservation.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Bytes `[off, off + len)` of the map. Panics if the range leaves the reservation.
    /// The caller guarantees the range is below the file's length (docs/safety.md §2).
    #[inline]
    pub fn slice(&self, off: usize, len: usize) -> &[u8] {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "map range"
        );
        // SAFETY: docs/safety.md §2: in bounds of the live reservation (asserted); the memory
        // is initialised (file-backed or zeroed anonymous); no write reaches a range while a
        // slice of it is alive, by the page-lifetime invariant.
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }

    /// Bytes `[off, off + len)` of the map as a [`MapView`]. Panics if the range leaves the
    /// reservation. The caller guarantees the range is below the file's length.
    pub fn view(&self, off: usize, len: usize) -> MapView<'_> {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "map range"
        );
        MapView {
            ptr: self.ptr.wrapping_add(off),
            len,
            _map: std::marker::PhantomData,
        }
    }

    /// Copies `data` into an anonymous map at `off`.
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(self.writable, "write to a read-only map");
        assert!(
            off.checked_add(data.len())
                .is_some_and(|end| end <= self.len),
            "map range"
        );
        // SAFETY: docs/safety.md §3: in bounds and writable (asserted); the target range holds
        // no page visible to any snapshot, so no live slice overlaps it.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) }
    }

    /// Zeroes `[off, off + len)` of an anonymous map (a simulated truncation).
    pub fn zero(&self, off: usize, len: usize) {
        assert!(self.writable, "write to a read-only map");
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "map range"
        );
        // SAFETY: docs/safety.md §3, as for `write`.
        unsafe { std::ptr::write_bytes(self.ptr.add(off), 0, len) }
    }

    /// Advises the kernel that access is random (no read-ahead), for databases past RAM.
    pub fn advise_random(&self) {
        // SAFETY: docs/safety.md §1: advice on our own live mapping; failure is harmless.
        unsafe {
            libc::madvise(self.ptr.cast(), self.len, libc::MADV_RANDOM);
        }
    }
}

/// A range of a map that hands out slices of the parts asked for, never one slice of the
/// whole: a snapshot's view of the file, whose range also covers free pages that a writer may
/// be writing (docs/safety.md §2). Copyable, like the `&[u8]` it stands for.
#[derive(Clone, Copy)]
pub struct MapView<'a> {
    ptr: *const u8,
    len: usize,
    _map: std::marker::PhantomData<&'a Map>,
}

// SAFETY: docs/safety.md §2: a MapView only makes shared slices of a live map, as a &[u8]
// does, and may be sent and shared as one.
unsafe impl Send for MapView<'_> {}
// SAFETY: docs/safety.md §2, as for Send.
unsafe impl Sync for MapView<'_> {}

impl<'a> MapView<'a> {
    /// Length of the range.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes `[off, off + len)` of the range. Panics if they leave it. The caller guarantees
    /// that they are pages of a snapshot (docs/safety.md §2).
    #[inline(always)]
    pub fn slice(&self, off: usize, len: usize) -> &'a [u8] {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "view range"
        );
        // SAFETY: docs/safety.md §2: in bounds of the range (asserted), which lies in the live
        // map it borrows; initialised memory; snapshot pages, which nothing writes while the
        // snapshot is registered (page lifetime).
        unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) }
    }
}

/// Pages of a writable map that one write transaction owns and writes in place (a lazy
/// environment's dirty pages): a `&mut [u8]` to them, made by [`Map::pages_mut`], whose
/// contract makes the borrow exclusive.
pub struct MapPages {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: docs/safety.md §8: a MapPages owns its range exclusively (the contract of
// `Map::pages_mut`), as a Box<[u8]> owns its buffer, so moving it to, or sharing it with,
// another thread is as sound as for a Box.
unsafe impl Send for MapPages {}
// SAFETY: docs/safety.md §8, as for Send.
unsafe impl Sync for MapPages {}

impl std::ops::Deref for MapPages {
    type Target = [u8];
    #[inline(always)]
    fn deref(&self) -> &[u8] {
        // SAFETY: docs/safety.md §8: the range is inside the live map, initialised
        // (file-backed) and owned by this MapPages alone (`Map::pages_mut`'s contract).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl std::ops::DerefMut for MapPages {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: docs/safety.md §8: as for `deref`; `&mut self` makes this borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: docs/safety.md §1: unmaps exactly the range mapped at creation; no slice
        // outlives the Map because every slice borrows it.
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

/// Most bytes one write call covers. The page cache sizes a new folio by the write that
/// creates it, and ext4 (Linux 6.x, large folios) then pays per block of the whole folio on
/// every later write into it (its write_begin/commit walk every buffer of the folio) and writes
/// the whole folio back at a flush. A bulk load written in 2 MiB calls left 2 MiB folios: each
/// later single-page commit cost ~2.7 MB of disk writes and a 512-buffer walk per page (docs/
/// design.md, "Commit"). Writes of at most 16 KiB keep folios at four pages or fewer.
pub const WRITE_CHUNK: usize = 16 << 10;

/// Writes all of `bufs` at `off`, at most [`WRITE_CHUNK`] bytes per call, looping over short
/// writes.
pub fn pwritev_all(file: &File, mut off: u64, bufs: &[&[u8]]) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    const PARTS: usize = 8;
    let (mut bi, mut skip) = (0usize, 0usize);
    while bi < bufs.len() {
        // Gather up to WRITE_CHUNK bytes (slicing a buffer larger than what is left).
        let mut parts: [&[u8]; PARTS] = [&[]; PARTS];
        let (mut n, mut len) = (0usize, 0usize);
        while bi < bufs.len() && n < PARTS && len < WRITE_CHUNK {
            let rest = &bufs[bi][skip..];
            let take = rest.len().min(WRITE_CHUNK - len);
            if take > 0 {
                parts[n] = &rest[..take];
                n += 1;
                len += take;
            }
            if take == rest.len() {
                bi += 1;
                skip = 0;
            } else {
                skip += take;
            }
        }
        if n == 0 {
            continue;
        }
        let mut iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; PARTS];
        for (v, b) in iov.iter_mut().zip(&parts[..n]) {
            v.iov_base = b.as_ptr() as *mut libc::c_void;
            v.iov_len = b.len();
        }
        let w = loop {
            // SAFETY: docs/safety.md §4: every iovec points into a live borrowed buffer of
            // the stated length; pwritev only reads them.
            let w = unsafe {
                libc::pwritev(
                    file.as_raw_fd(),
                    iov.as_ptr(),
                    n as libc::c_int,
                    off as libc::off_t,
                )
            };
            if w >= 0 {
                break w;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        // A short write: finish the chunk byte-exactly with pwrite.
        let mut done = w as usize;
        let mut o = off + done as u64;
        for b in &parts[..n] {
            if done >= b.len() {
                done -= b.len();
                continue;
            }
            file.write_all_at(&b[done..], o)?;
            o += (b.len() - done) as u64;
            done = 0;
        }
        off += len as u64;
    }
    Ok(())
}

/// Starts writing back the dirty page-cache pages of `[off, off + len)` without waiting for
/// them (sync_file_range with SYNC_FILE_RANGE_WRITE): a later fdatasync finds them written or
/// in flight. A hint only: durability still comes from fdatasync alone.
pub fn start_writeback(file: &File, off: u64, len: u64) {
    // SAFETY: docs/safety.md §4: sync_file_range on our own descriptor with plain integers;
    // its result is ignored (a failure leaves the pages for the fdatasync that follows).
    unsafe {
        libc::sync_file_range(
            file.as_raw_fd(),
            off as libc::off64_t,
            len as libc::off64_t,
            libc::SYNC_FILE_RANGE_WRITE,
        );
    }
}

/// fdatasync.
pub fn datasync(file: &File) -> std::io::Result<()> {
    file.sync_data()
}

/// Allocates disk blocks for `[off, off + len)` so later writes there need no block
/// allocation at flush time; falls back to extending the length where unsupported. Returns
/// whether the blocks were allocated (false: the fallback left holes).
pub fn preallocate(file: &File, off: u64, len: u64) -> std::io::Result<bool> {
    // SAFETY: docs/safety.md §4: fallocate on our own descriptor with plain integers.
    let r = unsafe { libc::fallocate(file.as_raw_fd(), 0, off as libc::off_t, len as libc::off_t) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
        let end = file.metadata()?.len().max(off + len);
        file.set_len(end)?;
        return Ok(false);
    }
    Err(e)
}

/// Allocates disk blocks for any hole in `[off, off + len)` without changing the file's
/// length (fallocate with FALLOC_FL_KEEP_SIZE). Returns false where that is unsupported.
pub fn allocate_blocks(file: &File, off: u64, len: u64) -> std::io::Result<bool> {
    // SAFETY: docs/safety.md §4: fallocate on our own descriptor with plain integers.
    let r = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_KEEP_SIZE,
            off as libc::off_t,
            len as libc::off_t,
        )
    };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return Ok(false);
    }
    Err(e)
}

/// How an open-file-description lock on one byte is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockKind {
    /// Shared (F_RDLCK).
    Shared,
    /// Exclusive (F_WRLCK).
    Exclusive,
    /// Released (F_UNLCK).
    Unlock,
}

fn flock_for(kind: LockKind, byte: u64) -> libc::flock {
    // SAFETY: docs/safety.md §4: a zeroed plain C struct, filled field by field.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = match kind {
        LockKind::Shared => libc::F_RDLCK,
        LockKind::Exclusive => libc::F_WRLCK,
        LockKind::Unlock => libc::F_UNLCK,
    } as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = byte as libc::off_t;
    fl.l_len = 1;
    fl
}

/// Takes (or changes, or releases) an OFD lock on one byte. The lock belongs to the open file
/// description, so the kernel drops it when the holder dies, and two opens in one process do
/// not share it. With `wait`, blocks until granted; without, returns false on a conflict.
pub fn ofd_lock(file: &File, kind: LockKind, byte: u64, wait: bool) -> std::io::Result<bool> {
    let mut fl = flock_for(kind, byte);
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: docs/safety.md §4: fcntl on our own descriptor with a valid flock pointer.
        let r = unsafe { libc::fcntl(file.as_raw_fd(), cmd, &mut fl) };
        if r == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) | Some(libc::EACCES) if !wait => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Whether another open file description (this process's or another's) holds a lock on
/// `byte` that conflicts with an exclusive one.
pub fn ofd_locked_by_other(file: &File, byte: u64) -> std::io::Result<bool> {
    let mut fl = flock_for(LockKind::Exclusive, byte);
    // SAFETY: docs/safety.md §4: fcntl on our own descriptor with a valid flock pointer.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as libc::c_short)
}

/// The calling thread's kernel id (for the reader list). Asked of the kernel once per thread
/// (and again in a forked child, where the thread's id is new): every read transaction's
/// begin records it, and a gettid system call was one of the few a read by id made.
pub fn thread_id() -> u64 {
    thread_local! {
        /// (fork generation, id) of this thread as last asked.
        static TID: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((u64::MAX, 0)) };
    }
    let generation = fork_generation();
    TID.with(|c| {
        let (g, tid) = c.get();
        if g == generation {
            return tid;
        }
        // SAFETY: docs/safety.md §4: gettid has no arguments and cannot fail.
        let tid = (unsafe { libc::gettid() }) as u64;
        c.set((generation, tid));
        tid
    })
}

static FORK_GENERATION: AtomicU64 = AtomicU64::new(0);
static ATFORK: std::sync::Once = std::sync::Once::new();

extern "C" fn after_fork_in_child() {
    FORK_GENERATION.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
}

/// A number that changes in a child process after fork(): comparing it is how a handle notices
/// it crossed a fork without a getpid system call per transaction.
pub fn fork_generation() -> u64 {
    ATFORK.call_once(|| {
        // SAFETY: docs/safety.md §4: registers a handler that only increments an atomic, which
        // is async-signal-safe and valid in the child of a multi-threaded process.
        unsafe {
            libc::pthread_atfork(None, None, Some(after_fork_in_child));
        }
    });
    FORK_GENERATION.load(std::sync::atomic::Ordering::Relaxed)
}

/// Ends the process with SIGKILL at once (an armed failpoint): no destructor, flush or unlock
/// runs, as with an external `kill -9`.
#[cfg(feature = "failpoints")]
pub fn kill_self() -> ! {
    // SAFETY: docs/safety.md §4: raise takes a plain signal number; SIGKILL cannot be caught,
    // so the process ends before raise returns.
    unsafe {
        libc::raise(libc::SIGKILL);
    }
    // Unreachable in practice; abort never unwinds either.
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers of every shape (empty, a sector, pages, runs longer than a chunk, many small
    /// ones) land byte for byte where a plain concatenation would.
    #[test]
    fn pwritev_all_writes_what_a_concatenation_would() {
        let shapes: &[&[usize]] = &[
            &[4096],
            &[0, 512, 0],
            &[4096; 3],
            &[4096; 9],
            &[WRITE_CHUNK * 3 + 100],
            &[100; 20],
            &[1, WRITE_CHUNK - 1, 5000, 0, 70_000, 4096, 3],
        ];
        for (si, shape) in shapes.iter().enumerate() {
            let dir = tempfile::tempdir().unwrap();
            let file = File::options()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(dir.path().join("f"))
                .unwrap();
            let mut x = si as u8;
            let bufs: Vec<Vec<u8>> = shape
                .iter()
                .map(|&n| {
                    (0..n)
                        .map(|_| {
                            x = x.wrapping_mul(31).wrapping_add(7);
                            x
                        })
                        .collect()
                })
                .collect();
            let refs: Vec<&[u8]> = bufs.iter().map(|b| &b[..]).collect();
            pwritev_all(&file, 333, &refs).unwrap();
            let got = std::fs::read(dir.path().join("f")).unwrap();
            let want: Vec<u8> = std::iter::repeat_n(0u8, 333).chain(bufs.concat()).collect();
            assert_eq!(got, want, "shape {shape:?}");
        }
    }
}
