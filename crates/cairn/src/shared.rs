//! State shared by every process and thread using one environment, without locks on the read
//! path: the published commit records (behind per-cell sequence counters) and the reader
//! table. It lives in the memory-mapped lock file (or in private memory for an environment
//! over simulated storage); every word is accessed atomically. Layout: format/lockfile.rs;
//! protocols: docs/design.md, "Lock file and readers".
//!
//! Reader protocol (why a reader never loses its snapshot):
//! 1. take an idle slot this handle owns (one atomic op), or claim a new one under the table
//!    lock, locking the slot's byte in the lock file for as long as the handle lives;
//! 2. loop: t = current; slot.txnid = t; full fence; if current == t, done; else retry;
//! 3. copy the commit record of t from cell t % 3 under its sequence counter; if the cell is
//!    torn (a writer died while publishing) read it from the data file's meta slots instead;
//!    if neither holds t any more, go back to 2.
//!
//! The writer publishes a commit by writing its cell, then `current`, and computes pinned
//! snapshots by scanning the slots after a full fence. A reader that stored t after the writer's
//! scan re-checks `current` and sees a newer value, so it never keeps a snapshot whose pages the
//! writer could be reusing.
//!
//! Dead readers: a slot's owner holds an OFD lock on the slot's byte; the kernel drops it when
//! the owner dies, so a slot whose byte nobody else holds is dead whatever its pid says (pid
//! reuse cannot fool this). Claims and reaping happen under the table lock, so a slot is never
//! reaped between its claim and the lock of its byte.

use crate::error::{Error, Result};
use crate::format::{self as f, Meta, MetaSlot, SECTOR};
use crate::lock::LockFile;
use crate::os::{LockKind, Map};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::Mutex;

/// Source of `Shared::uid`: tells handles apart for the per-thread commit cache, even when one
/// is dropped and another takes its address.
static NEXT_UID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// The last commit record this thread decoded to begin a read transaction: (handle uid,
    /// record). A commit's record never changes once published and txnids are not reused
    /// while a handle lives (it holds the lock file's alive byte, so nobody resets the file),
    /// so the next transaction on the same commit skips copying and checking the record.
    static LAST_META: RefCell<Option<(u64, Meta)>> = const { RefCell::new(None) };
}

const WORDS: usize = SECTOR / 8;

/// One entry of the reader table (see [`crate::Env::readers`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReaderInfo {
    /// Slot index in the table.
    pub slot: usize,
    /// Process id of the owner.
    pub pid: u32,
    /// Kernel thread id that began the reader's latest transaction.
    pub thread: u64,
    /// Snapshot held (its id as [`crate::RoTxn::id`] gives it), None when the slot is idle.
    pub txnid: Option<u64>,
}

/// The reader table and the published commit records.
pub(crate) struct Shared {
    map: Map,
    pub lock: LockFile,
    max: usize,
    owner: u64,
    /// Bitmap of slots this handle owns and is not using.
    idle: Box<[AtomicU64]>,
    /// Bitmap of slots this handle owns.
    mine: Box<[AtomicU64]>,
    /// Serialises claims and reaping among this handle's threads (the OFD table lock only
    /// excludes other handles).
    table: Mutex<()>,
    /// Slot -> current txnid when it was last found alive (the writer probes old readers
    /// rarely).
    probed: Mutex<HashMap<usize, u64>>,
    /// Unique among the handles of this process (see `LAST_META`).
    uid: u64,
}

impl Shared {
    /// Wraps the mapped region; `owner_tag` makes this handle's owner word unique.
    pub fn new(map: Map, lock: LockFile, max_readers: usize, owner_tag: u32) -> Shared {
        let words = max_readers.div_ceil(64);
        Shared {
            map,
            lock,
            max: max_readers,
            owner: u64::from(std::process::id()) << 32 | u64::from(owner_tag.max(1)),
            idle: (0..words).map(|_| AtomicU64::new(0)).collect(),
            mine: (0..words).map(|_| AtomicU64::new(0)).collect(),
            table: Mutex::new(()),
            probed: Mutex::new(HashMap::new()),
            uid: NEXT_UID.fetch_add(1, Ordering::Relaxed),
        }
    }

    #[inline]
    fn w(&self, i: usize) -> &AtomicU64 {
        &self.map.atomics()[i]
    }

    fn slot_w(&self, slot: usize, w: usize) -> &AtomicU64 {
        self.w(f::lock_slot_word(slot, w))
    }

    /// Slots a scan for snapshots or owners must read: those below the high-water mark.
    /// A slot is counted before its claim returns, so before it can ever hold a snapshot.
    fn used(&self) -> usize {
        (self.w(f::LW_SLOTS_USED).load(Ordering::SeqCst) as usize).min(self.max)
    }

    /// Resets the region and publishes `meta` (the first process to open the environment).
    pub fn init(&self, meta: &Meta) {
        for a in self.map.atomics() {
            a.store(0, Ordering::Relaxed);
        }
        self.w(f::LW_VERSION)
            .store(f::LOCK_VERSION, Ordering::Relaxed);
        self.w(f::LW_MAX_READERS)
            .store(self.max as u64, Ordering::Relaxed);
        self.w(f::LW_PAGE_SIZE)
            .store(u64::from(meta.page_size), Ordering::Relaxed);
        self.publish(meta);
        self.w(f::LW_MAGIC).store(f::LOCK_MAGIC, Ordering::SeqCst);
    }

    /// Makes `meta` the current commit (writer only, under the writer lock).
    pub fn publish(&self, meta: &Meta) {
        let bytes = meta.encode();
        let base = f::LW_CELLS + (meta.txnid % 3) as usize * f::LW_CELL_WORDS;
        let seq = self.w(base).load(Ordering::Relaxed);
        // An odd count left by a writer that died mid-publish is evened out here.
        let start = seq | 1;
        self.w(base).store(start, Ordering::Relaxed);
        fence(Ordering::Release);
        for i in 0..WORDS {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
            self.w(base + 1 + i)
                .store(u64::from_le_bytes(a), Ordering::Relaxed);
            if i == WORDS / 2 {
                // Half a record in the cell, its sequence count odd: readers must fall back.
                failpoint!("publish.torn_cell");
            }
        }
        self.w(base).store(start + 1, Ordering::Release);
        self.w(f::LW_CURRENT).store(meta.txnid, Ordering::SeqCst);
        self.w(f::LW_INFLIGHT).store(0, Ordering::SeqCst);
    }

    /// The current commit's txnid.
    pub fn current(&self) -> u64 {
        self.w(f::LW_CURRENT).load(Ordering::SeqCst)
    }

    /// Marks a commit as being written (cleared by `publish`); a writer that finds it set knew
    /// its predecessor died mid-commit and re-reads the data file's meta slots.
    pub fn set_inflight(&self, txnid: u64) {
        self.w(f::LW_INFLIGHT).store(txnid, Ordering::SeqCst);
    }

    /// The commit being written, 0 if none.
    pub fn inflight(&self) -> u64 {
        self.w(f::LW_INFLIGHT).load(Ordering::SeqCst)
    }

    /// The published record of commit `t`, if its cell still holds it and is not torn.
    pub fn read_cell(&self, t: u64) -> Option<Meta> {
        let base = f::LW_CELLS + (t % 3) as usize * f::LW_CELL_WORDS;
        for _ in 0..256 {
            let s1 = self.w(base).load(Ordering::Acquire);
            if s1 & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let mut bytes = [0u8; SECTOR];
            for i in 0..WORDS {
                bytes[i * 8..i * 8 + 8]
                    .copy_from_slice(&self.w(base + 1 + i).load(Ordering::Relaxed).to_le_bytes());
            }
            fence(Ordering::Acquire);
            if self.w(base).load(Ordering::Relaxed) != s1 {
                continue;
            }
            return match Meta::decode(&bytes) {
                MetaSlot::Valid(m) if m.txnid == t => Some(m),
                _ => None,
            };
        }
        None
    }

    /// Registers a reader and returns its slot and snapshot. `from_file` reads a commit record
    /// from the data file when its published cell is unreadable.
    pub fn begin_read(&self, from_file: &dyn Fn(u64) -> Option<Meta>) -> Result<(usize, Meta)> {
        let slot = match self.take_idle() {
            Some(s) => s,
            None => self.claim()?,
        };
        let txw = self.slot_w(slot, f::LS_TXNID);
        // Bounded: each retry means a newer commit was published meanwhile, or a record
        // vanished from both the lock file and the data file, which only damage explains.
        for _ in 0..1_000_000 {
            let t = self.current();
            txw.store(t, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if self.current() != t {
                continue;
            }
            let cached = LAST_META.with(|c| match &*c.borrow() {
                Some((uid, m)) if *uid == self.uid && m.txnid == t => Some(m.clone()),
                _ => None,
            });
            if let Some(m) = cached {
                return Ok((slot, m));
            }
            if let Some(m) = self.read_cell(t).or_else(|| from_file(t)) {
                LAST_META.with(|c| *c.borrow_mut() = Some((self.uid, m.clone())));
                return Ok((slot, m));
            }
            std::thread::yield_now();
        }
        self.end_read(slot);
        Err(Error::corrupted(
            "the current commit record is readable neither in the lock file nor in the data file",
        ))
    }

    fn take_idle(&self) -> Option<usize> {
        for (wi, word) in self.idle.iter().enumerate() {
            let mut cur = word.load(Ordering::Relaxed);
            while cur != 0 {
                let bit = cur.trailing_zeros() as usize;
                match word.compare_exchange_weak(
                    cur,
                    cur & !(1 << bit),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        let slot = wi * 64 + bit;
                        self.slot_w(slot, f::LS_TID)
                            .store(crate::os::thread_id(), Ordering::Relaxed);
                        return Some(slot);
                    }
                    Err(now) => cur = now,
                }
            }
        }
        None
    }

    /// Claims a free slot of the table for this handle, reaping dead readers if it is full.
    fn claim(&self) -> Result<usize> {
        let _g = self.table.lock().unwrap_or_else(|p| p.into_inner());
        self.lock.lock(LockKind::Exclusive, f::LB_TABLE, true)?;
        let r = self.claim_locked();
        let u = self.lock.lock(LockKind::Unlock, f::LB_TABLE, false);
        let slot = r?;
        u?;
        Ok(slot)
    }

    fn claim_locked(&self) -> Result<usize> {
        for pass in 0..2 {
            for i in 0..self.max {
                let ow = self.slot_w(i, f::LS_OWNER);
                if ow.load(Ordering::Acquire) != 0 {
                    continue;
                }
                // A free slot whose byte is still held belongs to a handle that is just
                // leaving; skip it.
                if !self
                    .lock
                    .lock(LockKind::Exclusive, f::lock_slot_byte(i), false)?
                {
                    continue;
                }
                ow.store(self.owner, Ordering::Release);
                self.w(f::LW_SLOTS_USED)
                    .fetch_max(i as u64 + 1, Ordering::SeqCst);
                self.slot_w(i, f::LS_TXNID).store(0, Ordering::Release);
                self.slot_w(i, f::LS_TID)
                    .store(crate::os::thread_id(), Ordering::Relaxed);
                self.mine[i / 64].fetch_or(1 << (i % 64), Ordering::AcqRel);
                return Ok(i);
            }
            if pass == 0 && self.reap_locked(|_| true)? == 0 {
                break;
            }
        }
        Err(Error::ReadersFull {
            max: self.max as u32,
        })
    }

    /// Clears slots whose owner is dead; `consider` filters the slots looked at. Returns the
    /// number cleared. Caller holds the table lock.
    fn reap_locked(&self, consider: impl Fn(usize) -> bool) -> Result<usize> {
        let mut n = 0;
        for i in 0..self.used() {
            if self.is_mine(i) || !consider(i) {
                continue;
            }
            let ow = self.slot_w(i, f::LS_OWNER);
            if ow.load(Ordering::Acquire) == 0 {
                continue;
            }
            if self.lock.has_file() && !self.lock.locked_by_other(f::lock_slot_byte(i))? {
                self.slot_w(i, f::LS_TXNID).store(0, Ordering::SeqCst);
                ow.store(0, Ordering::Release);
                n += 1;
            }
        }
        Ok(n)
    }

    fn is_mine(&self, i: usize) -> bool {
        self.mine[i / 64].load(Ordering::Acquire) & (1 << (i % 64)) != 0
    }

    /// Releases a reader slot (it stays this handle's, idle).
    pub fn end_read(&self, slot: usize) {
        self.slot_w(slot, f::LS_TXNID).store(0, Ordering::Release);
        self.idle[slot / 64].fetch_or(1 << (slot % 64), Ordering::Release);
    }

    /// Snapshots held by readers, sorted (writer only). Slots of dead processes that pin a
    /// snapshot older than `stale_before` are checked and cleared on the way, each at most
    /// once per 256 commits.
    pub fn pinned(&self, current: u64) -> Vec<u64> {
        fence(Ordering::SeqCst);
        let mut v = Vec::new();
        let mut suspects = Vec::new();
        for i in 0..self.used() {
            let t = self.slot_w(i, f::LS_TXNID).load(Ordering::SeqCst);
            if t == 0 {
                continue;
            }
            if t + 64 < current && !self.is_mine(i) && self.lock.has_file() {
                suspects.push(i);
            }
            v.push(t);
        }
        if !suspects.is_empty() {
            let due: Vec<usize> = {
                let mut p = self.probed.lock().unwrap_or_else(|p| p.into_inner());
                suspects
                    .into_iter()
                    .filter(|i| {
                        let due = p.get(i).is_none_or(|&at| at + 256 < current);
                        if due {
                            p.insert(*i, current);
                        }
                        due
                    })
                    .collect()
            };
            if !due.is_empty() && self.reap(|i| due.contains(&i)).unwrap_or(0) > 0 {
                return self.pinned(current);
            }
        }
        v.sort_unstable();
        v
    }

    fn reap(&self, consider: impl Fn(usize) -> bool) -> Result<usize> {
        let _g = self.table.lock().unwrap_or_else(|p| p.into_inner());
        self.lock.lock(LockKind::Exclusive, f::LB_TABLE, true)?;
        let r = self.reap_locked(consider);
        self.lock.lock(LockKind::Unlock, f::LB_TABLE, false)?;
        r
    }

    /// Clears the slots of dead readers; returns how many.
    pub fn reader_check(&self) -> Result<usize> {
        self.reap(|_| true)
    }

    /// The reader table's occupied slots.
    pub fn reader_list(&self) -> Vec<ReaderInfo> {
        (0..self.used())
            .filter_map(|i| {
                let owner = self.slot_w(i, f::LS_OWNER).load(Ordering::Acquire);
                (owner != 0).then(|| ReaderInfo {
                    slot: i,
                    pid: (owner >> 32) as u32,
                    thread: self.slot_w(i, f::LS_TID).load(Ordering::Relaxed),
                    txnid: match self.slot_w(i, f::LS_TXNID).load(Ordering::Acquire) {
                        0 => None,
                        disk => Some(crate::format::user_txnid(disk)),
                    },
                })
            })
            .collect()
    }

    /// Readers holding a snapshot now, and the table size.
    pub fn reader_counts(&self) -> (usize, usize) {
        let n = (0..self.used())
            .filter(|&i| self.slot_w(i, f::LS_TXNID).load(Ordering::Acquire) != 0)
            .count();
        (n, self.max)
    }

    /// Gives back every slot this handle owns (when the handle closes).
    pub fn release_all(&self) {
        for i in 0..self.max {
            if self.is_mine(i) {
                self.slot_w(i, f::LS_TXNID).store(0, Ordering::SeqCst);
                self.slot_w(i, f::LS_OWNER).store(0, Ordering::Release);
                let _ = self
                    .lock
                    .lock(LockKind::Unlock, f::lock_slot_byte(i), false);
            }
        }
    }
}
