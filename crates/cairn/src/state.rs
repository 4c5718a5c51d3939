//! The state that lives as long as an open environment: storage, reader table, writer state
//! and database registry (`EnvInner`), shared by every clone of the [`Env`] handle. Opening
//! it is `env.rs`'s work; the transactions borrow it.

use crate::alloc::FreeState;
use crate::db::{cmp_for, Database, DbFlags};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, Meta, META_SLOTS};
use crate::lock::LockFile;
use crate::options::EnvOptions;
use crate::pagebuf::PageBuf;
use crate::pageset::PageMap;
use crate::recover::{load_free, read_metas, trusted, verify_commit};
use crate::shared::Shared;
use crate::storage::Storage;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

/// Per-database settings registered in the environment.
#[derive(Clone, Debug)]
pub(crate) struct DbInfo {
    pub name: Option<String>,
    pub flags: DbFlags,
    pub cmp: KeyCmp,
    /// A user-supplied order of a DUP_SORT database's values (None: the flags' order).
    pub dup_cmp: Option<KeyCmp>,
}

/// What the writer keeps between transactions.
pub(crate) struct WriterState {
    pub free: FreeState,
    pub meta: Meta,
    pub next_txnid: u64,
    pub slots: [u64; META_SLOTS],
    /// Bytes written since the last steady commit (lazy mode's automatic flush).
    pub unsynced_bytes: u64,
    /// When the last steady commit was made.
    pub last_sync: std::time::Instant,
    pub pool: Vec<Box<[u8]>>,
    /// The dirty-page map of the last transaction, emptied, for the next one (so that a small
    /// transaction's map does not grow from nothing each time).
    pub dirty_spare: PageMap<PageBuf>,
    /// False until the free tree and the slots are read from the data file, which every
    /// handle does at its first write transaction (`refresh_writer`), so that opening costs
    /// O(1) in the file's size.
    pub loaded: bool,
    /// `meta` is the commit this handle's recovery chose at open (the first handle), not a
    /// value read from the lock file: closing a lazy handle flushes it if it is not steady.
    pub recovered: bool,
    /// Where this handle last appended to the commit log (logged mode; `wal::find_tail`
    /// continues from it).
    pub log_tail: crate::wal::Tail,
    /// The log's bytes below this offset were written by this handle (records or zeros): see
    /// `wal::ZERO_AHEAD`.
    pub log_zeroed: u64,
}

pub(crate) struct EnvInner {
    pub storage: std::sync::Arc<dyn Storage>,
    pub page_size: usize,
    pub opts: EnvOptions,
    pub shared: Shared,
    pub writer: Mutex<Option<WriterState>>,
    pub writer_cv: Condvar,
    /// Threads waiting on `writer_cv`, counted under the `writer` mutex: handing the writer
    /// state back notifies only when someone waits (a notify is a futex call every time).
    pub writer_waiters: std::sync::atomic::AtomicUsize,
    /// The next waiting ticket (from 1), and the ticket of the oldest starved waiter, which the
    /// next hand-off goes to (0: none): both read and written under the `writer` mutex
    /// (`RwTxn::begin_with`).
    pub writer_tickets: AtomicU64,
    pub writer_priority: AtomicU64,
    pub dbs: RwLock<Vec<DbInfo>>,
    /// Bumped at every change to `dbs` (under its write lock), so that a transaction can
    /// cache a database's order and flags and check them with one load (`db::DbView`).
    pub db_gen: AtomicU64,
    pub id: u64,
    pub poisoned: AtomicBool,
    /// A read-only handle's hold on the writer byte when it cannot register as a reader.
    pub _ro_lock: Option<LockFile>,
    pub path: Option<PathBuf>,
    /// `os::fork_generation` when the handle was opened.
    pub fork_gen: u64,
    /// The size limit in bytes (0: none); starts as `opts.max_size`, changed by
    /// [`Env::set_max_size`].
    pub max_size: AtomicU64,
    /// Whether a user value order was ever set ([`Env::set_dup_order`]): until then opening a
    /// cursor on a sorted-duplicates database need not take the `dbs` lock to look for one.
    pub custom_dup_orders: AtomicBool,
    /// The group-commit queue (`group.rs`, a higher layer, which types it), made at the first
    /// grouped write.
    pub group: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
    /// The commit log (logged mode, or a log found at open and replayed): `data-log` beside
    /// the data file, or the simulator's second storage.
    pub log: Option<Arc<dyn Storage>>,
}

/// An open database environment: one file, its named databases, its transactions. Cheap to
/// clone; every clone is the same environment.
#[derive(Clone)]
pub struct Env {
    pub(crate) inner: Arc<EnvInner>,
}

impl Drop for EnvInner {
    fn drop(&mut self) {
        self.shared.release_all();
    }
}

impl WriterState {
    pub(crate) fn unloaded(meta: Meta) -> WriterState {
        WriterState {
            free: FreeState::default(),
            next_txnid: meta.txnid + 1,
            meta,
            slots: [0; META_SLOTS],
            unsynced_bytes: 0,
            last_sync: std::time::Instant::now(),
            pool: Vec::new(),
            dirty_spare: Default::default(),
            loaded: false,
            recovered: false,
            log_tail: Default::default(),
            log_zeroed: 0,
        }
    }
}

impl EnvInner {
    /// Brings the writer state up to date under the writer lock: another handle (or a writer
    /// that died mid-commit) may have changed the file since this handle last wrote.
    pub(crate) fn refresh_writer(&self, ws: &mut WriterState) -> Result<()> {
        let current = self.shared.current();
        let inflight = self.shared.inflight();
        if ws.loaded && current == ws.meta.txnid && inflight == 0 {
            return Ok(());
        }
        let (cands, slots) = read_metas(&*self.storage)?;
        let boot = self.storage.boot_id();
        let mut chosen = None;
        for m in cands {
            if !trusted(&m, &boot) || m.page_size as usize != self.page_size {
                continue;
            }
            if m.txnid == current && inflight == 0 {
                chosen = Some(m);
                break;
            }
            if verify_commit(&*self.storage, &m).is_ok() {
                chosen = Some(m);
                break;
            }
        }
        let m = chosen.ok_or_else(|| Error::corrupted("no commit in the data file verifies"))?;
        self.storage.refresh_len();
        ws.meta = m;
        ws.free = FreeState::default();
        ws.loaded = false;
        load_writer(&*self.storage, ws, slots)?;
        // A writer that died in a commit may have written pages, or a log record, naming its
        // txnid without reaching a slot: never reuse it.
        ws.next_txnid = ws.next_txnid.max(inflight + 1);
        if ws.meta.txnid != current || inflight != 0 {
            failpoint!("writer.before_republish");
            self.shared.publish(&ws.meta);
        }
        Ok(())
    }
}

/// Reads the free tree and the slot txnids of `ws.meta` into `ws`.
pub(crate) fn load_writer(
    storage: &dyn Storage,
    ws: &mut WriterState,
    slots: [u64; META_SLOTS],
) -> Result<()> {
    let meta = ws.meta.clone();
    let mut free = FreeState::default();
    load_free(storage, &meta, &mut free)?;
    // Nothing is released here: readers of other handles may pin any of these runs. The
    // write transaction about to begin releases what no pinned snapshot (readers and the last
    // steady commit) can see, and its commit persists that.
    free.forget_undo();
    ws.free = free;
    ws.next_txnid = slots.iter().copied().max().unwrap_or(0).max(meta.txnid) + 1;
    ws.slots = slots;
    ws.loaded = true;
    Ok(())
}

impl EnvInner {
    pub(crate) fn max_size(&self) -> Option<u64> {
        match self.max_size.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(Error::Poisoned);
        }
        if crate::os::fork_generation() != self.fork_gen {
            return Err(Error::Forked);
        }
        Ok(())
    }
}

/// What a transaction caches of a registered database: its key order and flags, valid while
/// the registry's generation (`EnvInner::db_gen`) is `gen`.
#[derive(Clone)]
pub(crate) struct DbView {
    pub gen: u64,
    pub cmp: KeyCmp,
    pub flags: DbFlags,
    /// Order bits a write through this handle stamps (see [`EnvInner::db_orders`]).
    pub bits: u16,
}

/// The order bits (`format::ORDER_CUSTOM_*`) of a registered database in this handle.
fn order_bits(d: &DbInfo) -> u16 {
    let mut bits = 0;
    if matches!(d.cmp, KeyCmp::Custom(_)) {
        bits |= format::ORDER_CUSTOM_KEYS;
    }
    if d.dup_cmp.is_some() {
        bits |= format::ORDER_CUSTOM_VALUES;
    }
    bits
}

impl EnvInner {
    pub(crate) fn check_db(&self, db: Database) -> Result<usize> {
        if db.env_id != self.id {
            return Err(Error::BadDbi);
        }
        let idx = db.idx as usize;
        if idx >= self.dbs.read().unwrap_or_else(|p| p.into_inner()).len() {
            return Err(Error::BadDbi);
        }
        Ok(idx)
    }

    pub(crate) fn db_cmp(&self, idx: usize) -> KeyCmp {
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx]
            .cmp
            .clone()
    }

    /// The key order of database `idx` in this handle, and the order bits
    /// (`format::ORDER_CUSTOM_*`) a write through this handle stores in its record.
    pub(crate) fn db_orders(&self, idx: usize) -> (KeyCmp, u16) {
        let g = self.dbs.read().unwrap_or_else(|p| p.into_inner());
        let d = &g[idx];
        (d.cmp.clone(), order_bits(d))
    }

    /// Stamps a record about to be written through this handle with its order bits (`bits`
    /// from [`EnvInner::db_orders`]). With `guard`, a non-empty database whose record claims a
    /// user-supplied order this handle lacks is refused: writing it in the flags' order would
    /// leave a tree in two orders at once.
    pub(crate) fn stamp_order(
        &self,
        idx: usize,
        rec: &mut DbRecord,
        mut bits: u16,
        guard: bool,
    ) -> Result<()> {
        if rec.flags & DbFlags::DUP_SORT.bits() as u16 == 0 {
            bits &= !format::ORDER_CUSTOM_VALUES;
        }
        let missing = rec.order & !bits;
        if guard && missing != 0 && rec.root != 0 {
            return Err(Error::OrderUnknown {
                db: self.db_name(idx).unwrap_or_else(|| "(main)".into()),
                what: if missing & format::ORDER_CUSTOM_KEYS != 0 {
                    "keys"
                } else {
                    "values"
                },
            });
        }
        rec.order = bits;
        Ok(())
    }

    /// The user-supplied value order of a DUP_SORT database, if one was set. Until any was
    /// (`custom_dup_orders`), answers without taking the `dbs` lock.
    pub(crate) fn db_dup_cmp(&self, idx: usize) -> Option<KeyCmp> {
        if !self.any_dup_order() {
            return None;
        }
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx]
            .dup_cmp
            .clone()
    }

    /// [`Self::db_dup_cmp`] for a handle: for a database with sorted duplicates (record
    /// `rec`), the order a cursor or iterator over it compares values with, if a user set one.
    /// Checks the handle only when some order exists (it was checked when `rec` was read).
    pub(crate) fn dup_order_of(&self, db: Database, rec: &DbRecord) -> Result<Option<KeyCmp>> {
        if !crate::btree::dup::is_dupsort(rec) || !self.any_dup_order() {
            return Ok(None);
        }
        Ok(self.db_dup_cmp(self.check_db(db)?))
    }

    #[inline]
    fn any_dup_order(&self) -> bool {
        self.custom_dup_orders
            .load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn db_flags(&self, idx: usize) -> DbFlags {
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx].flags
    }

    pub(crate) fn db_name(&self, idx: usize) -> Option<String> {
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx]
            .name
            .clone()
    }

    pub(crate) fn lookup_db(&self, name: &str) -> Option<usize> {
        position_of(&self.dbs.read().unwrap_or_else(|p| p.into_inner()), name)
    }

    /// The handle of registry entry `idx`.
    fn handle(&self, idx: usize) -> Database {
        Database {
            idx: idx as u32,
            env_id: self.id,
        }
    }

    /// The registry for a change: the generation moves, so every cached view is dropped.
    pub(crate) fn dbs_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<DbInfo>> {
        let g = self.dbs.write().unwrap_or_else(|p| p.into_inner());
        self.db_gen
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        g
    }

    /// The order and flags of `db`, read under one lock, with the registry's generation.
    pub(crate) fn db_view(&self, db: Database) -> Result<(usize, DbView)> {
        if db.env_id != self.id {
            return Err(Error::BadDbi);
        }
        let g = self.dbs.read().unwrap_or_else(|p| p.into_inner());
        // Read under the lock: a change bumps the generation while holding the write lock.
        let gen = self.db_gen.load(std::sync::atomic::Ordering::Acquire);
        let idx = db.idx as usize;
        let d = g.get(idx).ok_or(Error::BadDbi)?;
        Ok((
            idx,
            DbView {
                gen,
                cmp: d.cmp.clone(),
                flags: d.flags,
                bits: order_bits(d),
            },
        ))
    }

    /// The registry's generation (see [`EnvInner::dbs_mut`]).
    #[inline]
    pub(crate) fn db_gen(&self) -> u64 {
        self.db_gen.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn set_db_flags(&self, idx: usize, flags: DbFlags) {
        let mut g = self.dbs_mut();
        g[idx].flags = flags;
        g[idx].cmp = cmp_for(flags);
    }

    /// The handle of a named database, registering it on first use: `Error::DbsFull` when
    /// `max_dbs` named handles are registered already.
    pub(crate) fn register_db(&self, name: &str, flags: DbFlags) -> Result<Database> {
        // A name already registered with these flags changes nothing: answered under the read
        // lock, the generation stays, and so do the views cached under it (a program that opens
        // its databases by name in every transaction would otherwise drop them all each time).
        {
            let g = self.dbs.read().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = position_of(&g, name).filter(|&i| g[i].flags == flags) {
                return Ok(self.handle(i));
            }
        }
        let mut g = self.dbs_mut();
        // Registered with other flags, or meanwhile by another thread (then the order a
        // user set on it stays).
        if let Some(i) = position_of(&g, name) {
            if g[i].flags != flags {
                g[i].flags = flags;
                g[i].cmp = cmp_for(flags);
            }
            return Ok(self.handle(i));
        }
        // LMDB's max_dbs: a limit on the handle table (slot 0 is the main database's), not
        // on the names the file holds.
        if g.len() > self.opts.max_dbs as usize {
            return Err(Error::DbsFull {
                max: self.opts.max_dbs,
            });
        }
        g.push(DbInfo {
            name: Some(name.to_string()),
            flags,
            cmp: cmp_for(flags),
            dup_cmp: None,
        });
        Ok(self.handle(g.len() - 1))
    }

    pub(crate) fn put_writer(&self, ws: WriterState) {
        failpoint!("writer.unlock");
        // Other handles may write once the byte is free; a failure to unlock is harmless (the
        // lock goes with the handle).
        let _ = self
            .shared
            .lock
            .lock(crate::os::LockKind::Unlock, crate::format::LB_WRITER, false);
        let mut g = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        *g = Some(ws);
        let waiting = self.writer_waiters.load(Ordering::Relaxed) > 0;
        // A starved waiter is owed this hand-off: wake every waiter, since the one woken by
        // `notify_one` may be another, which would go back to sleep.
        let owed = self.writer_priority.load(Ordering::Relaxed) != 0;
        drop(g);
        if owed {
            self.writer_cv.notify_all();
        } else if waiting {
            self.writer_cv.notify_one();
        }
    }
}

/// Where the registry holds the named database `name`, if it does.
fn position_of(dbs: &[DbInfo], name: &str) -> Option<usize> {
    dbs.iter().position(|d| d.name.as_deref() == Some(name))
}
