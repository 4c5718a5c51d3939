//! The commit protocol (docs/design.md, "Commit"): one flush per durable commit.
//!
//! 1. Named databases' records go into their nodes of the main tree; the previous commit's
//!    list pages are freed.
//! 2. The free set is persisted into the free tree until it stops changing (updating the tree
//!    allocates and frees pages, which changes the set; each page is copied at most once per
//!    transaction, so this converges in a few rounds; it is bounded anyway).
//! 3. Every dirty page is stamped (number, writer, checksum) and written, contiguous pages in
//!    one vectored write. The written runs are listed in the meta, or in list pages.
//! 4. The meta goes into a slot holding neither the previous commit nor the last steady one.
//! 5. Durable mode: one fdatasync. Ordering between pages and meta does not matter: recovery
//!    accepts a meta only if every page it lists verifies, else falls back to the previous one,
//!    whose pages this commit never overwrote. Logged mode: before the meta, the transaction's
//!    effects are appended to the log and the log alone is flushed (`wal`); the pages wait
//!    for a steady commit, as in lazy mode.

use crate::btree::{self, PageWriter};
use crate::error::{Error, Result};
use crate::format::{self, KeyCmp, Meta, WrittenRun, META_INLINE_RUNS, META_SLOTS, SECTOR};
use crate::options::Durability;
use crate::pagebuf::PageBuf;
use crate::recover::verify_commit;
use crate::txn::RwTxn;
use crate::wal;
use std::sync::atomic::Ordering;

const MAX_ROUNDS: usize = 1000;
/// A steady commit starts the device on its pages every this many bytes written (a hint: the
/// flush still makes them durable). Measured on examples/dupsloop (durable, ~35 MB a commit):
/// 32 KiB 3.8 s, 64-256 KiB 3.5-3.6 s, 1 MiB 3.9 s, 4 MiB and never 4.1 s for the inserts.
const WRITEBACK_KICK: u64 = 256 << 10;
/// Rounds of persisting the free set that may still allocate from it.
const PERSIST_ROUNDS_FROM_FREE: usize = 8;

impl RwTxn<'_> {
    /// Commits: atomic, and durable before returning in [`Durability::Durable`] mode.
    pub fn commit(mut self) -> Result<()> {
        let steady = self.env.inner.opts.durability == Durability::Durable;
        self.commit_inner(steady)
    }

    /// Commits and flushes, whatever the mode (used by `Env::sync`).
    pub(crate) fn commit_steady(mut self) -> Result<()> {
        self.commit_inner(true)
    }

    /// Commits without waiting for the disk, whatever the mode: atomic and visible at once,
    /// durable with the next commit that is (a [`commit`](Self::commit) in durable or logged
    /// mode, [`Env::sync`](crate::Env::sync)); a power loss before then may take it, never
    /// the file's consistency. In logged mode its record is appended to the log unflushed, so
    /// the next flushed record makes both durable (the log is written in order). For writes
    /// whose loss a later durable one repairs (a replica's applied entries: its flushed log
    /// replays them).
    pub fn commit_no_sync(mut self) -> Result<()> {
        self.no_sync = true;
        self.commit_inner(false)
    }

    fn commit_inner(&mut self, mut steady: bool) -> Result<()> {
        self.env.inner.check_usable()?;
        let lazy_unsynced = !self.base.is_steady();
        if !self.changed && (!steady || !lazy_unsynced) {
            return Ok(()); // Drop releases the writer state untouched.
        }
        let opts = &self.env.inner.opts;
        let (bytes, period) = (opts.sync_bytes, opts.sync_period());
        let no_sync = self.no_sync;
        let ws = self.ws();
        if !no_sync
            && (bytes.is_some_and(|limit| ws.unsynced_bytes >= limit)
                || period.is_some_and(|p| ws.last_sync.elapsed() >= p))
        {
            steady = true;
        }
        // Space (docs/design.md, "Lazy commits"; opt-in, `EnvOptions::flush_for_space`): pages
        // of the recovery point that this commit frees stay pending until the next flush; once
        // they are many, this commit flushes.
        // Counted only where the rule can act (a steady commit resets the count anyway), so
        // a commit without it does not walk its freed pages twice.
        let counting = opts.space_flush
            && opts.durability == Durability::Lazy
            && (bytes.is_some() || period.is_some());
        let held: u64 = if counting && !steady {
            let recovery = self.base.steady_txnid();
            (self.freed_clean.iter())
                .filter(|f| f.2 <= recovery)
                .map(|f| f.1)
                .sum()
        } else {
            0
        };
        if !steady
            && !no_sync
            && counting
            && crate::alloc::recovery_flush_due(self.ws().free.held() + held, self.npages)
        {
            steady = true;
        }
        // Logged mode: a commit is durable through its log record, or else steady.
        let mut record = None;
        if !steady && self.env.inner.opts.durability == Durability::Logged {
            record = self.log_record()?;
            // Unflushed, a commit the log cannot carry is left lazy: the next logged commit
            // finds the chain broken and flushes the data file, which covers this one.
            steady = record.is_none() && !no_sync;
        }
        failpoint!("commit.begin");
        match self.prepare_and_write(steady, record.as_mut()) {
            Ok(meta) => {
                if let Some((tail, rec)) = &record {
                    self.ws().log_tail = wal::Tail {
                        epoch: tail.epoch,
                        tip: wal::Link::of(&meta),
                        offset: tail.offset + rec.len() as u64,
                    };
                }
                self.ws().free.note_commit(held, steady);
                self.publish(meta, steady);
                Ok(())
            }
            Err((e, fatal)) => {
                if fatal {
                    self.env.inner.poisoned.store(true, Ordering::Relaxed);
                }
                Err(e)
            }
        }
    }

    /// This commit's log record and where it goes, or None when the commit must be steady: a
    /// change the log cannot carry, a base the log's chain does not reach (a commit of a
    /// handle in another mode), or a full log.
    fn log_record(&mut self) -> Result<Option<(wal::Tail, Vec<u8>)>> {
        let Some(log) = self.env.inner.log.clone() else {
            return Ok(None);
        };
        let Some(effects) = self.effects.take() else {
            return Ok(None);
        };
        let mut names = Vec::with_capacity(effects.dbs.len());
        for &idx in &effects.dbs {
            match idx {
                0 => names.push(Vec::new()),
                _ => match self.env.inner.db_name(idx) {
                    Some(n) => names.push(n.into_bytes()),
                    None => return Ok(None),
                },
            }
        }
        let epoch = self.base.steady_txnid();
        let known = self.ws().log_tail;
        let base = wal::Link::of(&self.base);
        let Some(tail) = wal::find_tail(&*log, known, epoch, base)? else {
            return Ok(None);
        };
        // The record's own fingerprint is the meta's, which is known only once the pages are
        // written (`prepare_and_write` fills it in).
        let own = wal::Link {
            txnid: self.txnid,
            fp: 0,
        };
        let rec = wal::encode(epoch, base, own, &names, &effects.ops);
        if tail.offset + rec.len() as u64 > log.len().min(self.env.inner.opts.log_size) {
            return Ok(None);
        }
        Ok(Some((tail, rec)))
    }

    /// Steps 1-5; an error is fatal when it came after the meta may have reached the file.
    fn prepare_and_write(
        &mut self,
        steady: bool,
        record: Option<&mut (wal::Tail, Vec<u8>)>,
    ) -> std::result::Result<Meta, (Error, bool)> {
        let soft = |e: Error| (e, false);
        self.save_catalog().map_err(soft)?;
        // The previous commit's list pages are no longer needed once this one is written.
        let base = self.base.clone();
        for pg in crate::recover::list_pages(&*self.env.inner.storage, &base).map_err(soft)? {
            self.free(pg, 1).map_err(soft)?;
        }
        // Give tail space back.
        let np = self.npages;
        self.npages = self.ws().free.trim_tail(np);
        let txnid = self.txnid;
        let ps = self.env.inner.page_size;
        let mut list_pages: Vec<u64> = Vec::new();
        let mut runs;
        let mut rounds = 0;
        loop {
            self.persist_free().map_err(soft)?;
            runs = self.written_runs(steady, &list_pages);
            let need = if runs.len() <= META_INLINE_RUNS {
                0
            } else {
                runs.len().div_ceil(format::list_capacity(ps))
            };
            if list_pages.len() >= need && self.ws().free.is_clean() {
                break;
            }
            while list_pages.len() < need {
                let pg = self.alloc(1).map_err(soft)?;
                list_pages.push(pg);
            }
            rounds += 1;
            if rounds > MAX_ROUNDS {
                return Err(soft(Error::internal("free list did not converge")));
            }
        }
        // Fill the list pages (unused trailing ones stay empty).
        let cap = format::list_capacity(ps);
        let inline = list_pages.is_empty();
        for (i, &pg) in list_pages.iter().enumerate() {
            let next = list_pages.get(i + 1).copied().unwrap_or(0);
            let chunk: &[WrittenRun] = if inline {
                &[]
            } else {
                let a = (i * cap).min(runs.len());
                let b = ((i + 1) * cap).min(runs.len());
                &runs[a..b]
            };
            let b = self.page_mut(pg).map_err(soft)?;
            format::build_list_page(b, chunk, next);
        }
        // Make room, stamp and write every dirty page.
        let need_len = self.npages * ps as u64;
        self.ensure_len(need_len).map_err(soft)?;
        self.env.inner.shared.set_inflight(txnid);
        failpoint!("commit.before_write_pages");
        let written = self.write_dirty(txnid, steady).map_err(soft)?;
        failpoint!("commit.after_write_pages");
        // A steady commit after unsteady ones depends on their pages, which its own list does
        // not name: flush them before the meta, so that the meta is durable only after them.
        if steady && !base.is_steady() {
            failpoint!("commit.before_data_sync");
            self.env.inner.storage.sync().map_err(soft)?;
            failpoint!("commit.after_data_sync");
        }
        let meta = Meta {
            version: format::FORMAT_VERSION,
            page_size: ps as u32,
            txnid,
            flags: if steady { format::MF_STEADY } else { 0 },
            npages: self.npages,
            last_steady: if steady { txnid } else { base.steady_txnid() },
            run_count: runs.len() as u32,
            list_head: list_pages.first().copied().unwrap_or(0),
            main: self.dbs[0].as_ref().expect("main").rec,
            free: self.free_rec,
            inline_runs: if inline { runs } else { Vec::new() },
            boot_id: self.env.inner.storage.boot_id(),
        };
        // Logged mode: the record is durable before the meta is written, so that a commit
        // whose meta any process can see is one replay can rebuild.
        if let (Some((tail, rec)), Some(log)) = (record, &self.env.inner.log) {
            wal::seal(rec, wal::Link::of(&meta));
            failpoint!("commit.before_log_write");
            let end = tail.offset + rec.len() as u64;
            let zeroed = self.ws().log_zeroed;
            if end > zeroed {
                let to = (end + wal::ZERO_AHEAD).min(log.len());
                let zeros = vec![0u8; (to - end) as usize];
                log.write_at(tail.offset, &[rec, &zeros]).map_err(soft)?;
                self.ws().log_zeroed = to;
            } else {
                log.write_at(tail.offset, &[rec]).map_err(soft)?;
            }
            if !self.no_sync {
                failpoint!("commit.before_log_sync");
                log.sync().map_err(soft)?;
                failpoint!("commit.after_log_sync");
            }
        }
        let slot = self.choose_slot();
        let storage = &*self.env.inner.storage;
        let fatal = |e: Error| (e, true);
        failpoint!("commit.before_meta_write");
        storage
            .write_meta((slot * SECTOR) as u64, &meta.encode())
            .map_err(fatal)?;
        failpoint!("commit.after_meta_write");
        if steady {
            failpoint!("commit.before_meta_sync");
            storage.sync().map_err(fatal)?;
            failpoint!("commit.after_meta_sync");
        }
        if cfg!(debug_assertions) {
            verify_commit(storage, &meta).map_err(fatal)?;
        }
        let ws = self.ws();
        ws.slots[slot] = txnid;
        ws.unsynced_bytes += written;
        Ok(meta)
    }

    fn publish(&mut self, meta: Meta, steady: bool) {
        let inner = &self.env.inner;
        let storage = &*inner.storage;
        let ps = inner.page_size as u64;
        let ws = self.ws.as_mut().expect("writer state");
        if steady {
            ws.unsynced_bytes = 0;
            ws.last_sync = std::time::Instant::now();
            // Give much free tail space back to the file system.
            let used = meta.npages * ps;
            let step = growth_step(used);
            if storage.len() > used + 2 * step {
                failpoint!("commit.before_truncate");
                let _ = storage.truncate(used + step);
                failpoint!("commit.after_truncate");
            }
        }
        ws.free.forget_undo();
        ws.next_txnid = meta.txnid + 1;
        inner.shared.publish(&meta);
        failpoint!("commit.after_publish");
        ws.meta = meta;
        // Dropping the transaction hands the writer state back; nothing is left to undo.
        let pool = &mut ws.pool;
        for (_, buf) in self.dirty.drain() {
            if let PageBuf::Heap(buf) = buf {
                if buf.len() == ps as usize && pool.len() < 1024 {
                    pool.push(buf);
                }
            }
        }
    }

    /// Records of named databases changed by this transaction go into their nodes of the main
    /// tree, in place (created and dropped databases changed the main tree already).
    fn save_catalog(&mut self) -> Result<()> {
        let names: Vec<(String, format::DbRecord)> = self
            .dbs
            .iter()
            .enumerate()
            .skip(1)
            .filter_map(|(i, d)| {
                let d = d.as_ref()?;
                if !d.dirty || d.deleted {
                    return None;
                }
                Some((self.env.inner.db_name(i)?, d.rec))
            })
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        // In place, without the main database's order check: a record keeps its size, so no
        // key moves, and the main database's record (its order bits) is left as it is.
        let (mut main, cmp) = self.main_ro()?;
        let mut r = Ok(());
        for (name, rec) in names {
            r = crate::catalog::update_record(self, &mut main, &cmp, name.as_bytes(), &rec);
            if r.is_err() {
                break;
            }
        }
        self.set_rec(0, main);
        r
    }

    /// Writes the changed spans' records into the free tree until nothing changes.
    fn persist_free(&mut self) -> Result<()> {
        let r = self
            .upgrade_free_tree()
            .and_then(|()| self.persist_free_rounds());
        self.persisting = false;
        r
    }

    /// A snapshot of format version 3 keys its free tree by run: the first commit on it frees
    /// that tree whole and records the set anew, span by span (its meta says version 4).
    /// Freeing the old tree's pages changes the set like any other freeing, before the rounds.
    fn upgrade_free_tree(&mut self) -> Result<()> {
        if self.base.version >= format::FORMAT_VERSION || self.free_upgraded {
            return Ok(());
        }
        let old = self.free_rec;
        btree::free::free_tree(self, &old)?;
        self.free_rec = format::DbRecord::default();
        self.ws().free.mark_all_dirty();
        self.free_upgraded = true;
        Ok(())
    }

    fn persist_free_rounds(&mut self) -> Result<()> {
        let mut spans = Vec::new();
        let mut val = Vec::new();
        for round in 0..MAX_ROUNDS {
            // Almost every commit settles in two or three rounds. Should emptied and split
            // pages keep taking turns, the tree's pages come from the end of the file from
            // then on: allocations stop changing the free set, which settles.
            self.persisting = round >= PERSIST_ROUNDS_FROM_FREE;
            self.flush_freed()?;
            self.ws().free.take_dirty(&mut spans);
            if spans.is_empty() {
                return Ok(());
            }
            // The spans come sorted, so runs of them fall in one leaf: each change tries the
            // dirty leaf of the previous one before descending (the hint is dropped when a
            // change may have split or freed pages).
            let mut hint: Option<(u64, usize)> = None;
            for &s in &spans {
                failpoint!("commit.persist_free");
                let mut rec = self.free_rec;
                let key = format::span_key(s);
                self.ws().free.encode_span(s, &mut val);
                if val.is_empty() {
                    let done = match hint {
                        Some((leaf, _)) => btree::delete::delete_in_leaf(
                            self,
                            &mut rec,
                            &KeyCmp::Bytes,
                            leaf,
                            &key,
                        )?
                        .map(|i| (leaf, i.saturating_sub(1))),
                        None => None,
                    };
                    hint = match done {
                        Some(d) => Some(d),
                        None => {
                            btree::delete::delete_landing(self, &mut rec, &KeyCmp::Bytes, &key)?
                        }
                    };
                } else {
                    let mut landed = None;
                    if let Some(h) = hint {
                        landed = btree::insert::put_in_leaf(
                            self,
                            &mut rec,
                            &KeyCmp::Bytes,
                            h,
                            &key,
                            &val,
                            btree::insert::Mode::Upsert,
                        )?
                        .map(|(_, i)| (h.0, i));
                    }
                    if landed.is_none() {
                        landed = btree::insert::put_landing(
                            self,
                            &mut rec,
                            &KeyCmp::Bytes,
                            &key,
                            btree::insert::NewValue::of(&val),
                            btree::insert::Mode::Upsert,
                        )?
                        .1;
                    }
                    hint = landed;
                }
                self.free_rec = rec;
            }
        }
        Err(Error::internal("free tree did not converge"))
    }

    /// The runs a steady commit lists for recovery to verify: its own pages. An unsteady
    /// (lazy) commit lists none: it is trusted only within the boot that wrote it, when its
    /// pages are in the page cache whole (docs/design.md, "Lazy commits").
    fn written_runs(&mut self, steady: bool, list_pages: &[u64]) -> Vec<WrittenRun> {
        if !steady {
            return Vec::new();
        }
        let ps = self.env.inner.page_size;
        let txnid = self.txnid;
        let mut pages: Vec<(u64, u64)> = self
            .dirty
            .iter()
            .filter(|(p, _)| !list_pages.contains(p))
            .map(|(&p, b)| (p, (b.len() / ps) as u64))
            .collect();
        crate::radix::sort_by_page(&mut pages, |p| p.0);
        let mut runs: Vec<WrittenRun> = Vec::new();
        for (p, span) in pages {
            if let Some(last) = runs.last_mut() {
                if last.start + u64::from(last.len) == p
                    && u64::from(last.len) + span < u64::from(u32::MAX)
                {
                    last.len += span as u32;
                    continue;
                }
            }
            runs.push(WrittenRun {
                start: p,
                len: span as u32,
                txnid,
            });
        }
        runs
    }

    pub(crate) fn ensure_len(&mut self, need: u64) -> Result<()> {
        let storage = &*self.env.inner.storage;
        let len = storage.len();
        if len >= need {
            return Ok(());
        }
        let mut target = need.max(len + growth_step(len));
        if let Some(max) = self.env.inner.max_size() {
            target = target.min(max).max(need);
        }
        let ps = self.env.inner.page_size as u64;
        target = target.div_ceil(ps) * ps;
        failpoint!("commit.before_grow");
        storage.grow(target)?;
        failpoint!("commit.after_grow");
        Ok(())
    }

    /// Stamps and writes every dirty page; returns the bytes written.
    ///
    /// Each run of contiguous pages is sealed (checksummed) right before it is written, while
    /// its bytes are in the CPU's cache for the write's copy. A steady commit starts the
    /// device on what it wrote every [`WRITEBACK_KICK`] bytes, so that the flush that follows
    /// finds most pages written or in flight instead of starting them all at once.
    fn write_dirty(&mut self, txnid: u64, steady: bool) -> Result<u64> {
        let ps = self.env.inner.page_size as u64;
        let mut pgnos: Vec<u64> = self.dirty.keys().copied().collect();
        crate::radix::sort_by_page(&mut pgnos, |&p| p);
        let env = self.env;
        let storage = &*env.inner.storage;
        let mut total = 0u64;
        let mut i = 0;
        // Bytes [lo, hi) written since the device was last started on them, and how many.
        let (mut lo, mut hi, mut pending) = (u64::MAX, 0u64, 0u64);
        while i < pgnos.len() {
            let start = pgnos[i];
            let in_place = matches!(self.dirty[&start], PageBuf::Map(_));
            let mut next = start;
            let mut j = i;
            // A run: contiguous pages, all in place in the map or all in buffers.
            while j < pgnos.len() && pgnos[j] == next && j - i < 1024 {
                let b = self.dirty.get_mut(&next).expect("listed");
                if matches!(b, PageBuf::Map(_)) != in_place {
                    break;
                }
                format::seal_page(b, next, txnid);
                next += b.len() as u64 / ps;
                j += 1;
            }
            let bufs: Vec<&[u8]> = pgnos[i..j].iter().map(|p| &*self.dirty[p]).collect();
            let bytes = (next - start) * ps;
            if i > 0 {
                failpoint!("commit.mid_write_pages");
            }
            if in_place {
                // Sealed where they lie: the map is the page cache.
                storage.stored(start * ps, &bufs);
            } else {
                storage.write_at(start * ps, &bufs)?;
            }
            total += bytes;
            if steady {
                lo = lo.min(start * ps);
                hi = hi.max(start * ps + bytes);
                pending += bytes;
                if pending >= WRITEBACK_KICK {
                    storage.start_writeback(lo, hi - lo);
                    (lo, hi, pending) = (u64::MAX, 0, 0);
                }
            }
            i = j;
        }
        Ok(total)
    }

    /// A meta slot holding neither the commit this one builds on nor the last steady one.
    fn choose_slot(&mut self) -> usize {
        let base = self.base.txnid;
        let steady = self.base.steady_txnid();
        let ws = self.ws();
        let mut best = None;
        for i in 0..META_SLOTS {
            let t = ws.slots[i];
            if t != 0 && (t == base || t == steady) {
                continue;
            }
            // Prefer an empty slot or one left by a failed commit, then the oldest.
            let rank = if t == 0 || t > base { 0 } else { t };
            if best.is_none_or(|(_, r)| rank < r) {
                best = Some((i, rank));
            }
        }
        best.expect("three slots, at most two protected").0
    }
}

/// How much the file grows at once: an eighth of its size, from 1 MiB to 256 MiB (the
/// preallocated tail counts in the file's size; a quarter left a 1M fillrandom's file at 278
/// MiB for 223 in use, an eighth at 244: docs/bench/causes.md, session 14).
pub(crate) fn growth_step(len: u64) -> u64 {
    (len / 8).clamp(1 << 20, 256 << 20)
}
