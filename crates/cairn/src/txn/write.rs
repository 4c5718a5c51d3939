//! Write transactions: the writer state, the dirty pages (copies of the pages changed, at new
//! page numbers), puts, deletes and databases, and the page writer the B+tree writes through.

use crate::alloc::FreeState;
use crate::btree::{self, PageSource, PageWriter};
use crate::catalog::{catalog_lookup, Named};

use crate::db::{Database, DbFlags, PutFlags};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, Meta};
use crate::pagebuf::PageBuf;
use crate::pageset::PageMap;
use crate::state::{DbView, Env, WriterState};
use std::cell::RefCell;
use std::sync::atomic::Ordering::Relaxed;

use super::nested::Frame;
use crate::format::user_txnid;

/// How long a thread waits for this process's writer before it is served first (see
/// `begin_with`). Short enough to bound a writer's wait near a few commits past it; long enough
/// that waiting threads wake rarely (each waiter wakes once per period to check).
const STARVED: std::time::Duration = std::time::Duration::from_millis(20);

thread_local! {
    /// The environment (its id) whose grouped closure this thread is running, 0 for none.
    static GROUP_JOB_OF: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Marks this thread as running grouped closures of environment `id` while it lives.
pub(crate) struct GroupJobMark(u64);

impl GroupJobMark {
    pub(crate) fn enter(id: u64) -> GroupJobMark {
        GroupJobMark(GROUP_JOB_OF.with(|c| c.replace(id)))
    }
}

impl Drop for GroupJobMark {
    fn drop(&mut self) {
        GROUP_JOB_OF.with(|c| c.set(self.0));
    }
}

/// A grouped closure that began a write transaction of its own environment would wait for the
/// writer its group holds, forever: refused instead.
pub(crate) fn refuse_inside_group_job(id: u64) -> Result<()> {
    if GROUP_JOB_OF.with(|c| c.get()) == id {
        return Err(Error::Invalid(
            "a write transaction (write_txn, write_grouped or sync) was begun inside a grouped \
             write's closure; use the transaction the closure is given"
                .into(),
        ));
    }
    Ok(())
}

/// One database as seen by a write transaction.
#[derive(Clone, Debug)]
pub(crate) struct TxnDb {
    pub rec: DbRecord,
    pub dirty: bool,
    pub deleted: bool,
    /// The handle's order and flags, with the registry generation they were read at, once
    /// `rec` carries the handle's order bits and passed the order check: while the generation
    /// holds, `db_state_for` returns them without the registry lookup and the stamping, which
    /// cost more than an overwrite in a dirty leaf.
    pub fast: Option<(u64, KeyCmp, DbFlags)>,
}

/// A write transaction. Only one exists at a time (a second `write_txn` waits). Dropping it
/// without `commit` aborts it.
pub struct RwTxn<'env> {
    pub(crate) env: &'env Env,
    pub(crate) ws: Option<WriterState>,
    pub(crate) txnid: u64,
    pub(crate) base: Meta,
    pub(crate) npages: u64,
    pub(crate) dirty: PageMap<PageBuf>,
    pub(crate) dbs: Vec<Option<TxnDb>>,
    /// Key order and flags of the databases used, checked against the registry's generation
    /// at each use instead of read under its lock (a cache: filled through `&self`).
    views: RefCell<Vec<Option<DbView>>>,
    pub(crate) free_rec: DbRecord,
    pub(crate) frames: Vec<Frame>,
    /// Pages of the snapshot freed by this transaction, as (first page, pages, birth), in the
    /// order freed: they join the free set (as pending runs) only at commit, sorted and
    /// coalesced (`flush_freed`), so that a page copied on write costs a push, not a free-set
    /// update; nothing reads them before (they are not reusable within the transaction).
    pub(crate) freed_clean: Vec<(u64, u64, u64)>,
    pub(crate) changed: bool,
    /// Reused by sorted-duplicates writes for the value sets they build.
    pub(crate) dup_scratch: Vec<u8>,
    /// Set while the free set is written into the free tree: pages the tree needs then come
    /// from the end of the file, never from the free set being written, so that persisting
    /// cannot chase its own changes forever.
    pub(crate) persisting: bool,
    /// This commit has freed a version-3 free tree and marked every span for writing
    /// (`upgrade_free_tree`): done once, however many times the commit persists the set.
    pub(crate) free_upgraded: bool,
    /// New dirty pages are written in place through the map (a lazy environment that can);
    /// cleared for the rest of the transaction when growing the file for one fails.
    pub(super) in_place: bool,
    /// Where the last `put` landed, for the next put of the same database to try first.
    put_hint: Option<PutHint>,
    /// Bumped whenever a dirty page may stop being what it was: freed (it can come back as
    /// a page of another tree) or restored by a nested abort. A hint of an older epoch is
    /// never used.
    pub(super) dirty_epoch: u64,
    /// Bumped by every page this transaction allocates or frees through the tree code (splits,
    /// new roots, merges, overflow runs): a leaf that was the rightmost of its tree stays so
    /// while this is unchanged, the invariant of the append shortcut (`PutHint::tail`).
    shape: u64,
    /// Logged mode: the effects of this transaction's changes so far, for its log record
    /// (`wal`); None when not logged or when a change the log cannot carry was made (the
    /// commit is then steady).
    pub(crate) effects: Option<crate::wal::Effects>,
    /// Set by `commit_no_sync`: nothing of this commit waits for the disk.
    pub(crate) no_sync: bool,
}

/// The dirty leaf (and slot) the last put of database `idx` landed in. Valid while
/// `epoch` is the transaction's `dirty_epoch`: the leaf is then still a leaf of that tree
/// (pages leave a tree only by being freed), the invariant `put_in_leaf` needs.
#[derive(Clone, Copy)]
struct PutHint {
    idx: usize,
    leaf: u64,
    slot: usize,
    epoch: u64,
    /// Consecutive puts landing in one leaf (saturating at 3): the hint is tried only when
    /// this is non-zero, so that random puts pay no failed try before their descent.
    streak: u8,
    /// Set by an APPEND put, which lands at the right edge: the transaction's `shape` and the
    /// tree's root then. While both are unchanged (and `epoch` holds) no page was split, merged
    /// or freed, so `leaf` is still the rightmost leaf and the next APPEND goes to its end
    /// without a descent (`insert::append_in_leaf`).
    tail: Option<(u64, u64)>,
}

impl<'env> RwTxn<'env> {
    pub(crate) fn begin(env: &'env Env) -> Result<RwTxn<'env>> {
        Ok(Self::begin_with(env, true)?.expect("a waiting begin always gets the writer"))
    }

    /// Begins a write transaction if the writer is free now, without waiting (None when
    /// another transaction, of this handle or of any other, holds it).
    pub(crate) fn try_begin(env: &'env Env) -> Result<Option<RwTxn<'env>>> {
        Self::begin_with(env, false)
    }

    fn begin_with(env: &'env Env, wait: bool) -> Result<Option<RwTxn<'env>>> {
        let inner = &env.inner;
        refuse_inside_group_job(inner.id)?;
        let mut g = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
        // Waiting is first come, first served once a waiter starves: a thread that waited
        // `STARVED` claims the writer's next hand-off (the oldest starved ticket wins), and
        // until it has it, no one else takes the writer, not even the thread that just
        // released it. Until then, whoever comes first takes it (cheapest: no hand-off to a
        // sleeping thread). The counters are read and written under the mutex.
        let mut ticket = 0u64;
        let mut since = std::time::Instant::now();
        loop {
            let prio = inner.writer_priority.load(Relaxed);
            if g.is_some() && (prio == 0 || prio == ticket) {
                break;
            }
            if !wait {
                return Ok(None);
            }
            if ticket == 0 {
                // Counted under the mutex, where `put_writer` reads the count.
                ticket = inner.writer_tickets.fetch_add(1, Relaxed);
                since = std::time::Instant::now();
                inner.writer_waiters.fetch_add(1, Relaxed);
            }
            g = inner
                .writer_cv
                .wait_timeout(g, STARVED)
                .unwrap_or_else(|p| p.into_inner())
                .0;
            if since.elapsed() >= STARVED {
                let prio = inner.writer_priority.load(Relaxed);
                if prio == 0 || ticket < prio {
                    inner.writer_priority.store(ticket, Relaxed);
                }
            }
        }
        if ticket != 0 {
            inner.writer_waiters.fetch_sub(1, Relaxed);
            if inner.writer_priority.load(Relaxed) == ticket {
                inner.writer_priority.store(0, Relaxed);
            }
        }
        let mut ws = g.take().expect("checked");
        drop(g);
        // Then the writer lock shared with other handles (waits for a writer in another
        // process; the kernel frees it if that process dies).
        let locked = inner
            .shared
            .lock
            .lock(
                crate::os::LockKind::Exclusive,
                crate::format::LB_WRITER,
                wait,
            )
            .and_then(|got| {
                if got {
                    failpoint!("writer.locked");
                    inner.refresh_writer(&mut ws)?;
                }
                Ok(got)
            });
        match locked {
            Ok(true) => {}
            Ok(false) => {
                inner.put_writer(ws);
                return Ok(None);
            }
            Err(e) => {
                inner.put_writer(ws);
                return Err(e);
            }
        }
        let base = ws.meta.clone();
        let mut pins = inner.shared.pinned(base.txnid);
        if !base.is_steady() {
            pins.push(base.steady_txnid());
            pins.sort_unstable();
        }
        ws.free.release(&pins);
        // What `release` did holds whatever this transaction does (a run no pinned snapshot
        // can see stays unseeable: pins only move forward), so an abort keeps it rather than
        // redoing it at the next begin (after open that was the whole free set, each time);
        // the changed keys stay dirty and reach the free tree with the next commit.
        ws.free.forget_undo();
        let txnid = ws.next_txnid;
        let dirty = std::mem::take(&mut ws.dirty_spare);
        Ok(Some(RwTxn {
            env,
            ws: Some(ws),
            txnid,
            npages: base.npages,
            free_rec: base.free,
            dbs: vec![Some(TxnDb {
                rec: base.main,
                dirty: false,
                deleted: false,
                fast: None,
            })],
            views: RefCell::new(Vec::new()),
            base,
            dirty,
            frames: Vec::new(),
            freed_clean: Vec::new(),
            changed: false,
            persisting: false,
            free_upgraded: false,
            put_hint: None,
            dirty_epoch: 0,
            shape: 0,
            dup_scratch: Vec::new(),
            in_place: env.inner.opts.wants_map_writes(),
            effects: (env.inner.opts.durability == crate::options::Durability::Logged
                && env.inner.log.is_some())
            .then(Default::default),
            no_sync: false,
        }))
    }

    pub(crate) fn ws(&mut self) -> &mut WriterState {
        self.ws
            .as_mut()
            .expect("writer state present while the transaction lives")
    }

    /// This transaction's id, numbered as LMDB numbers them (see [`user_txnid`]): a new
    /// environment's first write transaction is 1.
    pub fn id(&self) -> u64 {
        user_txnid(self.txnid)
    }

    /// The key order, flags and order bits of `db` (checks the handle).
    #[inline]
    fn view(&self, db: Database) -> Result<(usize, DbView)> {
        let idx = db.idx as usize;
        if db.env_id == self.env.inner.id {
            if let Ok(c) = self.views.try_borrow() {
                if let Some(Some(v)) = c.get(idx) {
                    if v.gen == self.env.inner.db_gen() {
                        return Ok((idx, v.clone()));
                    }
                }
            }
        }
        let (idx, v) = self.env.inner.db_view(db)?;
        // A user-supplied order that reads through this transaction may hold the cache.
        if let Ok(mut c) = self.views.try_borrow_mut() {
            if c.len() <= idx {
                c.resize(idx + 1, None);
            }
            c[idx] = Some(v.clone());
        }
        Ok((idx, v))
    }

    /// A database's index, record (stamped with this handle's order bits, for the write that
    /// follows) and key order; refuses a database kept in an order this handle lacks.
    pub(crate) fn db_state(&mut self, db: Database) -> Result<(usize, DbRecord, KeyCmp)> {
        self.db_state_for(db, true)
            .map(|(idx, rec, cmp, _)| (idx, rec, cmp))
    }

    /// `db_state` (the order check only with `guard`), plus the database's flags.
    pub(crate) fn db_state_for(
        &mut self,
        db: Database,
        guard: bool,
    ) -> Result<(usize, DbRecord, KeyCmp, DbFlags)> {
        if db.env_id == self.env.inner.id {
            if let Some(Some(d)) = self.dbs.get(db.idx as usize) {
                if let (Some((gen, cmp, flags)), false) = (&d.fast, d.deleted) {
                    if *gen == self.env.inner.db_gen() {
                        return Ok((db.idx as usize, d.rec, cmp.clone(), *flags));
                    }
                }
            }
        }
        let (idx, mut v) = self.view(db)?;
        if self.dbs.len() <= idx {
            self.dbs.resize(idx + 1, None);
        }
        if self.dbs[idx].is_none() {
            let name = self.env.inner.db_name(idx).ok_or(Error::BadDbi)?;
            let rec = self.named_rec(&name)?.ok_or(Error::BadDbi)?;
            self.dbs[idx] = Some(TxnDb {
                rec,
                dirty: false,
                deleted: false,
                fast: None,
            });
        }
        let d = self.dbs[idx].as_ref().expect("loaded");
        if d.deleted {
            return Err(Error::BadDbi);
        }
        // The handle's flags (and so its order) follow this transaction's record: they are
        // the environment's, which an aborted transaction that dropped the database and
        // created it again with other flags changed, as does a reader's open of an older one.
        let stored = DbFlags::from_bits_retain(u32::from(d.rec.flags));
        if idx != 0 && stored != v.flags {
            let name = self.env.inner.db_name(idx).ok_or(Error::BadDbi)?;
            self.env.inner.register_db(&name, stored)?;
            v = self.view(db)?.1;
        }
        let d = self.dbs[idx].as_mut().expect("loaded");
        let mut rec = d.rec;
        self.env.inner.stamp_order(idx, &mut rec, v.bits, guard)?;
        if guard {
            // Stamping is idempotent and persists only with a write, so the stamped record
            // may stand in for the loaded one.
            d.rec = rec;
            d.fast = Some((v.gen, v.cmp.clone(), v.flags));
        }
        Ok((idx, rec, v.cmp, v.flags))
    }

    pub(crate) fn db_ro(&self, db: Database) -> Result<(DbRecord, KeyCmp)> {
        let (idx, v) = self.view(db)?;
        let rec = match self.dbs.get(idx) {
            Some(Some(d)) if d.deleted => return Err(Error::BadDbi),
            Some(Some(d)) => d.rec,
            _ => {
                let name = self.env.inner.db_name(idx).ok_or(Error::BadDbi)?;
                self.named_rec(&name)?.ok_or(Error::BadDbi)?
            }
        };
        // The record decides the order when the handle's flags are not its own (see
        // `db_state_for`).
        let stored = DbFlags::from_bits_retain(u32::from(rec.flags));
        if idx != 0 && v.flags != stored {
            return Ok((rec, crate::db::cmp_for(stored)));
        }
        Ok((rec, v.cmp))
    }

    /// The main database's record as this transaction sees it, and its key order.
    pub(crate) fn main_ro(&self) -> Result<(DbRecord, KeyCmp)> {
        let (_, v) = self.view(self.env.main_db())?;
        let rec = self.dbs[0].as_ref().expect("main").rec;
        Ok((rec, v.cmp))
    }

    /// The record of named database `name` as the main tree of this transaction holds it
    /// (None: no such database).
    fn named_rec(&self, name: &str) -> Result<Option<DbRecord>> {
        let (main, cmp) = self.main_ro()?;
        Ok(match catalog_lookup(self, &main, &cmp, name)? {
            Named::Db(rec) => Some(rec),
            Named::Plain | Named::Absent => None,
        })
    }

    pub(crate) fn set_rec(&mut self, idx: usize, rec: DbRecord) {
        let d = self.dbs[idx].as_mut().expect("loaded");
        d.rec = rec;
        d.dirty = true;
        self.changed = true;
    }

    /// The value stored under `key`, as this transaction sees it.
    pub fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>> {
        let (rec, cmp) = self.db_ro(db)?;
        btree::search::get(self, &rec, &cmp, key)
    }

    fn check_put(&self, flags: DbFlags, key: &[u8], vlen: usize) -> Result<()> {
        let max = format::max_key_size(self.env.inner.page_size);
        if key.len() > max {
            return Err(Error::KeyTooLarge {
                len: key.len(),
                max,
            });
        }
        if flags.contains(DbFlags::INTEGER_KEY) && key.len() != 4 && key.len() != 8 {
            return Err(Error::BadIntegerKey { len: key.len() });
        }
        if vlen > format::MAX_VALUE {
            return Err(Error::ValueTooLarge {
                len: vlen,
                max: format::MAX_VALUE,
            });
        }
        Ok(())
    }

    /// A put of a value (None: `vlen` zeroed bytes, RESERVE), tried first in leaf `hint`
    /// (see `put_hinted`); returns the leaf and slot it landed in, when known.
    fn put_at(
        &mut self,
        db: Database,
        key: &[u8],
        val: Option<&[u8]>,
        vlen: usize,
        flags: PutFlags,
        hint: Option<(u64, usize)>,
    ) -> Result<Option<(u64, usize)>> {
        let (idx, mut rec, cmp, dbflags) = self.db_state_for(db, true)?;
        if btree::dup::is_dupsort(&rec) {
            let val = val.ok_or_else(|| {
                Error::Invalid("RESERVE is not allowed in a DUP_SORT database".into())
            })?;
            let added = self
                .put_dup(idx, rec, &cmp, key, val, flags)
                .inspect_err(|e| self.log_failed(e))?;
            if added {
                self.log_put(idx, &cmp, key, val);
            }
            return Ok(None);
        }
        self.check_put(dbflags, key, vlen)?;
        let mode = if flags.contains(PutFlags::APPEND) {
            btree::insert::Mode::Append
        } else if flags.contains(PutFlags::NO_OVERWRITE) {
            btree::insert::Mode::NoOverwrite
        } else {
            btree::insert::Mode::Upsert
        };
        // A cursor brings its own hint; the transaction's serves plain puts. A hint of another
        // database or an older epoch is dead (see `PutHint`).
        let from_cursor = hint.is_some();
        let live = self
            .put_hint
            .filter(|h| h.idx == idx && h.epoch == self.dirty_epoch);
        let hint = hint.or_else(|| live.filter(|h| h.streak > 0).map(|h| (h.leaf, h.slot)));
        // APPEND after an APPEND of this tree, nothing split or freed since: the end of the
        // rightmost leaf, without the descent from the root.
        let tail = live
            .filter(|_| !from_cursor && mode == btree::insert::Mode::Append)
            .filter(|h| h.tail == Some((self.shape, rec.root)))
            .map(|h| h.leaf);
        let shortcut = match (tail, hint, val) {
            (Some(leaf), _, Some(v)) => {
                btree::insert::append_in_leaf(self, &mut rec, &cmp, leaf, key, v)?
                    .map(|i| (btree::insert::Outcome::Inserted, Some((leaf, i))))
            }
            (None, Some(at), Some(v)) => {
                btree::insert::put_in_leaf(self, &mut rec, &cmp, at, key, v, mode)?
                    .map(|(o, i)| (o, Some((at.0, i))))
            }
            _ => None,
        };
        let r = match shortcut {
            Some(done) => Ok(done),
            None => {
                let val = btree::insert::NewValue {
                    bytes: val,
                    len: vlen,
                    flags: 0,
                };
                btree::insert::put_landing(self, &mut rec, &cmp, key, val, mode)
            }
        };
        // Whatever the descent changed before a failure is the transaction's state now.
        self.set_rec(idx, rec);
        let r = r.map_err(|e| self.off_main(idx, e));
        let (outcome, landed) = r.inspect_err(|e| {
            self.put_hint = None;
            self.log_failed(e);
        })?;
        if !from_cursor {
            // A put that freed a dirty page bumped the epoch: the streak starts over.
            let live = live.filter(|h| h.epoch == self.dirty_epoch);
            self.put_hint = landed.map(|(leaf, slot)| PutHint {
                idx,
                leaf,
                slot,
                epoch: self.dirty_epoch,
                streak: match live {
                    Some(h) if h.leaf == leaf => (h.streak + 1).min(3),
                    Some(h) => h.streak / 2,
                    None => 0,
                },
                tail: (mode == btree::insert::Mode::Append).then_some((self.shape, rec.root)),
            });
        }
        match outcome {
            btree::insert::Outcome::Exists => Err(Error::KeyExists),
            _ => {
                match val {
                    Some(v) => self.log_put(idx, &cmp, key, v),
                    // RESERVE: the value is written after this call returns.
                    None => self.effects = None,
                }
                Ok(landed)
            }
        }
    }

    /// A change that failed may have left part of its work in the transaction (a split made
    /// before the disk filled up): the log cannot say what, so the commit will be steady.
    #[cold]
    pub(crate) fn log_failed(&mut self, e: &Error) {
        if !matches!(e, Error::KeyExists) {
            self.effects = None;
        }
    }

    /// Records a put for the log (logged mode).
    #[inline]
    pub(crate) fn log_put(&mut self, idx: usize, cmp: &KeyCmp, key: &[u8], val: &[u8]) {
        self.log_effect(idx, cmp, |e| e.put(idx, key, val));
    }

    /// Records a delete of `key` (all its values), or of the pair `key`/`val`.
    pub(crate) fn log_delete(&mut self, idx: usize, cmp: &KeyCmp, key: &[u8], val: Option<&[u8]>) {
        self.log_effect(idx, cmp, |e| match val {
            Some(v) => e.delete_pair(idx, key, v),
            None => e.delete(idx, key),
        });
    }

    /// Records an effect on database `idx` unless the log cannot carry it: a database in a
    /// user-supplied order cannot be replayed before its handle sets the order again, so the
    /// commit will be steady.
    #[inline]
    fn log_effect(
        &mut self,
        idx: usize,
        cmp: &KeyCmp,
        record: impl FnOnce(&mut crate::wal::Effects),
    ) {
        if self.effects.is_none() {
            return;
        }
        if matches!(cmp, KeyCmp::Custom(_)) || self.env.inner.db_dup_cmp(idx).is_some() {
            self.effects = None;
        } else if let Some(e) = &mut self.effects {
            record(e);
        }
    }

    /// `put` from a cursor: `hint` is the leaf and slot the cursor's previous put landed in (a
    /// dirty leaf of this database's tree, no page freed since), tried before a descent from
    /// the root. Returns the leaf and slot this put landed in, when known.
    pub(crate) fn put_hinted(
        &mut self,
        db: Database,
        key: &[u8],
        value: &[u8],
        flags: PutFlags,
        hint: Option<(u64, usize)>,
    ) -> Result<Option<(u64, usize)>> {
        self.put_at(db, key, Some(value), value.len(), flags, hint)
    }

    /// Stores `value` under `key`. `PutFlags::NO_OVERWRITE` fails with [`Error::KeyExists`] if
    /// the key exists (read the existing value with `get`); `PutFlags::APPEND` requires the key
    /// to sort after every key of the database and fills pages instead of splitting them.
    ///
    /// In a DUP_SORT database the value joins the key's sorted set of values (a pair that
    /// exists already is left as it is, or with `NO_DUP_DATA` fails with `KeyExists`);
    /// `APPEND_DUP` requires it to sort after the key's values. See `put_multiple`.
    pub fn put(&mut self, db: Database, key: &[u8], value: &[u8], flags: PutFlags) -> Result<()> {
        self.put_at(db, key, Some(value), value.len(), flags, None)
            .map(|_| ())
    }

    /// Reserves `len` zeroed bytes under `key` and returns them for the caller to fill.
    pub fn put_reserve(
        &mut self,
        db: Database,
        key: &[u8],
        len: usize,
        flags: PutFlags,
    ) -> Result<&mut [u8]> {
        self.put_at(db, key, None, len, flags, None)?;
        let (_, rec, cmp) = self.db_state(db)?;
        debug_assert!(
            !btree::dup::is_dupsort(&rec),
            "put_at refuses RESERVE there"
        );
        let (pgno, i, exact) = btree::search::find_leaf(self, &rec, &cmp, key)?
            .ok_or_else(|| Error::corrupted("reserved key vanished"))?;
        if !exact {
            return Err(Error::corrupted("reserved key vanished"));
        }
        let n = btree::tree_page(self, pgno)?.node(i)?;
        if n.is_big() {
            let opg = format::decode_u64(n.val)?;
            let b = self.page_mut(opg)?;
            return Ok(&mut format::overflow_value_mut(b)[..len]);
        }
        let (at, l) = btree::tree_page(self, pgno)?.value_range(i)?;
        Ok(&mut self.page_mut(pgno)?[at..at + l])
    }

    /// Deletes `key` (in a DUP_SORT database, with all its values); returns whether it
    /// existed.
    pub fn delete(&mut self, db: Database, key: &[u8]) -> Result<bool> {
        let (idx, mut rec, cmp) = self.db_state(db)?;
        let r = if btree::dup::is_dupsort(&rec) {
            btree::dup::delete_all(self, &mut rec, &cmp, key).map(|n| n > 0)
        } else {
            btree::delete::delete(self, &mut rec, &cmp, key)
        };
        if matches!(r, Ok(true)) {
            self.set_rec(idx, rec);
            self.log_delete(idx, &cmp, key, None);
        }
        r.map_err(|e| {
            self.log_failed(&e);
            self.off_main(idx, e)
        })
    }

    /// A write to database `idx` that met a named database's node (`Incompatible`): in the
    /// main database the caller's mistake, anywhere else a damaged file (such nodes live in
    /// the main tree only).
    #[cold]
    pub(crate) fn off_main(&self, idx: usize, e: Error) -> Error {
        match e {
            Error::Incompatible { what, .. } if idx != 0 => Error::corrupted(format!(
                "database {}: a named database's node outside the main database ({what})",
                self.env.inner.db_name(idx).unwrap_or_default()
            )),
            e => e,
        }
    }

    /// Forgets where the last put landed: the next put descends from the root (for changes
    /// to a tree that do not go through `put_at`: the catalog's names).
    pub(super) fn forget_put_hint(&mut self) {
        self.put_hint = None;
    }

    /// Discards every change.
    pub fn abort(self) {}

    fn finish(&mut self) {
        if let Some(mut ws) = self.ws.take() {
            // Abort: undo every change to the free set since the transaction began.
            ws.free.rollback(0);
            ws.free.forget_undo();
            // Dirty keys stay: persisting a key again is idempotent, and keys released at
            // open must reach the free tree with the next commit.
            for (_, buf) in self.dirty.drain() {
                if let PageBuf::Heap(buf) = buf {
                    if buf.len() == self.env.inner.page_size && ws.pool.len() < 1024 {
                        ws.pool.push(buf);
                    }
                }
            }
            // A small map is kept for the next transaction; a large one is let go.
            if self.dirty.capacity() <= 1024 {
                ws.dirty_spare = std::mem::take(&mut self.dirty);
            }
            self.env.inner.put_writer(ws);
        }
    }
}

impl Drop for RwTxn<'_> {
    fn drop(&mut self) {
        self.finish();
    }
}

impl PageSource for RwTxn<'_> {
    #[inline]
    fn page_size(&self) -> usize {
        self.env.inner.page_size
    }
    #[inline]
    fn page(&self, pgno: u64) -> Result<&[u8]> {
        if let Some(b) = self.dirty.get(&pgno) {
            return Ok(&b[..self.env.inner.page_size]);
        }
        self.clean_pages(pgno, 1)
    }
    fn pages(&self, pgno: u64, span: u64) -> Result<&[u8]> {
        if let Some(b) = self.dirty.get(&pgno) {
            return Ok(b);
        }
        self.clean_pages(pgno, span)
    }
}

impl RwTxn<'_> {
    /// Takes `span` page numbers (from the free set, else the end of the file) without a
    /// buffer: the caller puts one in `dirty`.
    fn alloc_pgno(&mut self, span: u64) -> Result<u64> {
        let ps = self.env.inner.page_size;
        let from_free = if self.persisting {
            None
        } else {
            self.ws().free.alloc(span)
        };
        let pg = match from_free {
            Some(p) => p,
            None => {
                let p = self.npages;
                let end = p + span;
                if let Some(max) = self.env.inner.max_size() {
                    if end * ps as u64 > max {
                        return Err(Error::MapFull { limit: max });
                    }
                }
                self.npages = end;
                p
            }
        };
        if let Some(f) = self.frames.last_mut() {
            f.saved.entry(pg).or_insert(None);
        }
        self.changed = true;
        Ok(pg)
    }
}

impl RwTxn<'_> {
    /// A buffer for the `span` pages at `pgno`, just allocated to this transaction, whose
    /// contents the caller overwrites: the pages themselves in the writable map when the
    /// environment writes in place (the file grown to hold them first), else a pooled page
    /// buffer; None: the caller allocates one.
    fn page_buf(&mut self, pgno: u64, span: u64) -> Option<PageBuf> {
        let ps = self.env.inner.page_size as u64;
        if self.in_place {
            let (off, len) = (pgno * ps, span * ps);
            let storage = &*self.env.inner.storage;
            // A failed growth (a full disk) leaves this transaction's new pages to pwrite,
            // whose commit reports the error.
            if off + len > storage.len() && self.ensure_len(off + len).is_err() {
                self.in_place = false;
            } else {
                // docs/safety.md §8: these pages were just allocated to this write transaction,
                // the only one (writer lock), which is `PageBuf::in_map`'s contract.
                if let Some(b) = PageBuf::in_map(storage, off, len) {
                    return Some(b);
                }
            }
        }
        if span == 1 {
            return self.ws().pool.pop().map(PageBuf::Heap);
        }
        None
    }
}

impl PageWriter for RwTxn<'_> {
    #[inline]
    fn is_dirty(&self, pgno: u64) -> bool {
        self.dirty.contains_key(&pgno)
    }

    fn touch(&mut self, pgno: u64) -> Result<u64> {
        if self.dirty.contains_key(&pgno) {
            self.save_for_frame(pgno);
            return Ok(pgno);
        }
        // The clean image borrows the environment, not the transaction.
        let src = self.clean_pages(pgno, 1)?;
        let birth = format::page_id(src)?.txnid;
        let new = self.alloc_pgno(1)?;
        // The copy overwrites every byte, so the buffer is taken as it is (zero-filling it
        // first cost as much as the copy).
        let buf = match self.page_buf(new, 1) {
            Some(mut b) => {
                b.copy_from_slice(src);
                b
            }
            None => PageBuf::Heap(Box::<[u8]>::from(src)),
        };
        self.dirty.insert(new, buf);
        self.free_clean(pgno, 1, birth)?;
        Ok(new)
    }

    #[inline]
    fn page_mut(&mut self, pgno: u64) -> Result<&mut [u8]> {
        self.save_for_frame(pgno);
        self.changed = true;
        self.dirty
            .get_mut(&pgno)
            .map(|b| &mut b[..])
            .ok_or_else(|| Error::internal(format!("page {pgno} is not writable")))
    }

    fn alloc(&mut self, span: u64) -> Result<u64> {
        self.shape += 1;
        let ps = self.env.inner.page_size;
        let pg = self.alloc_pgno(span)?;
        // Not cleared: every caller formats the page (`PageMut::init`, `PackedLeafMut::init`,
        // `init_overflow` and the value's padding, `build_list_page`), and the bytes no header
        // counts (between the slots and the nodes) are never read; zeroing each new page was
        // 9% of a sorted load's instructions (docs/design.md, "Free pages").
        let buf = match self.page_buf(pg, span) {
            Some(b) => b,
            None => PageBuf::Heap(vec![0u8; span as usize * ps].into_boxed_slice()),
        };
        self.dirty.insert(pg, buf);
        Ok(pg)
    }

    fn free(&mut self, pgno: u64, span: u64) -> Result<()> {
        self.shape += 1;
        if self.dirty.contains_key(&pgno) {
            self.dirty_epoch += 1;
            self.save_for_frame(pgno);
            if let Some(PageBuf::Heap(buf)) = self.dirty.remove(&pgno) {
                if buf.len() == self.env.inner.page_size {
                    self.ws().pool.push(buf);
                }
            }
            // Born and freed inside this transaction: no snapshot ever saw it.
            self.ws().free.add_reusable(pgno, span);
            return Ok(());
        }
        let birth = format::page_id(self.clean_pages(pgno, span)?)?.txnid;
        self.free_clean(pgno, span, birth)
    }
}

impl<'env> RwTxn<'env> {
    /// Pages of the committed snapshot this transaction builds on.
    fn clean_pages(&self, pgno: u64, span: u64) -> Result<&'env [u8]> {
        if pgno == 0 || pgno.checked_add(span).is_none_or(|e| e > self.base.npages) {
            return Err(Error::corrupted(format!(
                "pages {pgno}+{span} outside the snapshot"
            )));
        }
        let env: &'env Env = self.env;
        let ps = env.inner.page_size;
        crate::storage::read_pages(&*env.inner.storage, ps, pgno, span, self.base.txnid)
    }

    #[inline]
    fn free_clean(&mut self, pgno: u64, span: u64, birth: u64) -> Result<()> {
        self.freed_clean.push((pgno, span, birth));
        self.changed = true;
        Ok(())
    }

    /// Moves the pages freed since the last call into the free set as pending runs: sorted,
    /// and adjacent pages of one birth coalesced into one run (a transaction that rewrites
    /// what the previous one wrote frees long runs of them). A page freed twice, or one
    /// already free, is a tree that references a page twice: refused, before anything of
    /// this transaction is written.
    pub(crate) fn flush_freed(&mut self) -> Result<()> {
        if self.freed_clean.is_empty() {
            return Ok(());
        }
        let mut freed = std::mem::take(&mut self.freed_clean);
        crate::radix::sort_by_page(&mut freed, |f| f.0);
        let txnid = self.txnid;
        let free: &mut FreeState = &mut self.ws.as_mut().expect("writer state").free;
        let mut result = Ok(());
        let mut i = 0;
        while i < freed.len() {
            let (start, mut len, birth) = freed[i];
            let mut j = i + 1;
            while let Some(&(p, span, b)) = freed.get(j) {
                if p < start + len {
                    result = Err(Error::corrupted(format!(
                        "page {p} freed twice (referenced twice?)"
                    )));
                    break;
                }
                if p != start + len || b != birth {
                    break;
                }
                len += span;
                j += 1;
            }
            if result.is_err() {
                break;
            }
            if !free.add_pending(start, len, birth, txnid) {
                result = Err(Error::corrupted(format!(
                    "pages {start}+{len} freed while free (referenced twice?)"
                )));
                break;
            }
            i = j;
        }
        // The buffer is kept for the next frees.
        freed.clear();
        self.freed_clean = freed;
        result
    }
}
