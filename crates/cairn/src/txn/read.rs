//! Read transactions: a registered snapshot; reads go straight to the map.

use crate::btree;
use crate::catalog::{catalog_lookup, catalog_names, Named};

use crate::db::{Database, DbFlags, Stat};
use crate::error::{Error, Result};
use crate::format::user_txnid;
use crate::format::{DbRecord, KeyCmp};
use crate::snapshot::Snapshot;
use crate::state::Env;
use std::cell::RefCell;

/// A read-only transaction: one consistent snapshot for its whole life. `Send`, so it can move
/// between threads; dropping it ends it.
pub struct RoTxn<'env> {
    env: &'env Env,
    snap: Snapshot<'env>,
    slot: usize,
    main_cmp: KeyCmp,
    cache: RefCell<Vec<Option<(DbRecord, KeyCmp)>>>,
}

// SAFETY-free note: RoTxn holds only shared references and a RefCell; it is Send because the
// snapshot's pages never change while its slot is registered (docs/design.md, "Readers").

impl<'env> RoTxn<'env> {
    pub(crate) fn begin(env: &'env Env) -> Result<RoTxn<'env>> {
        let storage = &*env.inner.storage;
        let (slot, meta) = env
            .inner
            .shared
            .begin_read(&|t| crate::recover::meta_from_file(storage, t))?;
        Ok(RoTxn {
            env,
            snap: Snapshot::new(&*env.inner.storage, meta),
            slot,
            main_cmp: env.inner.db_cmp(0),
            cache: RefCell::new(Vec::new()),
        })
    }

    pub(crate) fn snapshot(&self) -> &Snapshot<'env> {
        &self.snap
    }

    /// The transaction id of the snapshot, numbered as LMDB numbers them (see [`user_txnid`]):
    /// 0 for a new environment's empty snapshot.
    pub fn id(&self) -> u64 {
        user_txnid(self.snap.meta.txnid)
    }

    /// Forgets the orders this transaction took from the handle when it first used each
    /// database, so that an order set since ([`Env::set_key_order`], [`Env::set_dup_order`];
    /// the C API's mdb_set_compare inside a read transaction) applies to it too.
    pub fn refresh_orders(&mut self) {
        self.main_cmp = self.env.inner.db_cmp(0);
        self.cache.get_mut().clear();
    }

    pub(crate) fn db(&self, db: Database) -> Result<(DbRecord, KeyCmp)> {
        // The main database needs no registry lookup: the read path takes no lock.
        if db.idx == 0 && db.env_id == self.env.inner.id {
            return Ok((self.snap.meta.main, self.main_cmp.clone()));
        }
        // A handle of this environment cached by an earlier call was checked then.
        if db.env_id == self.env.inner.id {
            if let Some(Some(hit)) = self.cache.borrow().get(db.idx as usize) {
                return Ok(hit.clone());
            }
        }
        // The registry's generation first: what the lookups below read is at least this new,
        // so an answer remembered under it is never older than it says (see `known`).
        let gen = self.env.inner.db_gen();
        let (txnid, main) = (self.snap.meta.txnid, self.snap.meta.main);
        if db.env_id == self.env.inner.id {
            if let Some(hit) = known::get(db, gen, txnid, &main) {
                self.remember(db.idx as usize, &hit);
                return Ok(hit);
            }
        }
        let idx = self.env.inner.check_db(db)?;
        let name = self.env.inner.db_name(idx).ok_or(Error::BadDbi)?;
        let Named::Db(rec) =
            catalog_lookup(&self.snap, &self.snap.meta.main, &self.main_cmp, &name)?
        else {
            return Err(Error::BadDbi);
        };
        // The snapshot's record decides the order when the handle's flags are not its own (an
        // aborted drop-and-create with other flags, or a writer's re-creation since).
        let stored = DbFlags::from_bits_retain(u32::from(rec.flags));
        let cmp = if self.env.inner.db_flags(idx) == stored {
            self.env.inner.db_cmp(idx)
        } else {
            crate::db::cmp_for(stored)
        };
        let hit = (rec, cmp);
        known::put(db, gen, txnid, &main, &hit);
        self.remember(idx, &hit);
        Ok(hit)
    }

    /// Keeps database `idx`'s record and order for this transaction's next calls.
    fn remember(&self, idx: usize, hit: &(DbRecord, KeyCmp)) {
        // A user-supplied order that reads through this transaction may hold the cache.
        if let Ok(mut c) = self.cache.try_borrow_mut() {
            if c.len() <= idx {
                c.resize(idx + 1, None);
            }
            c[idx] = Some(hit.clone());
        }
    }

    /// The value stored under `key`, borrowed from the map for the transaction's life.
    pub fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>> {
        // The hot path reads the record and order in place (no clone): the main database, or
        // one cached by an earlier call.
        if db.env_id == self.env.inner.id {
            if db.idx == 0 {
                return btree::search::get(&self.snap, &self.snap.meta.main, &self.main_cmp, key);
            }
            if let Ok(c) = self.cache.try_borrow() {
                if let Some(Some((rec, cmp))) = c.get(db.idx as usize) {
                    return btree::search::get(&self.snap, rec, cmp, key);
                }
            }
        }
        let (rec, cmp) = self.db(db)?;
        btree::search::get(&self.snap, &rec, &cmp, key)
    }

    /// Opens an existing named database (None: the main database).
    pub fn open_db(&self, name: Option<&str>) -> Result<Database> {
        let Some(name) = name else {
            return Ok(self.env.main_db());
        };
        match catalog_lookup(&self.snap, &self.snap.meta.main, &self.main_cmp, name)? {
            Named::Db(rec) => self
                .env
                .inner
                .register_db(name, DbFlags::from_bits_retain(u32::from(rec.flags))),
            Named::Plain => Err(crate::catalog::plain_key_error(name)),
            Named::Absent => Err(Error::DbNotFound {
                name: name.to_string(),
            }),
        }
    }

    /// Bytes of the file this snapshot's pages span (its page count, free pages included,
    /// times the page size): what LMDB compares with a handle's map size.
    pub fn used_bytes(&self) -> u64 {
        self.snap.meta.npages * u64::from(self.snap.meta.page_size)
    }

    /// Statistics of a database.
    pub fn stat(&self, db: Database) -> Result<Stat> {
        let (rec, _) = self.db(db)?;
        Ok(Stat::of(&rec, self.snap.meta.page_size))
    }

    /// The names of the named databases, in order.
    pub fn db_names(&self) -> Result<Vec<String>> {
        catalog_names(&self.snap, &self.snap.meta.main)
    }

    pub(crate) fn env(&self) -> &'env Env {
        self.env
    }
}

impl Drop for RoTxn<'_> {
    fn drop(&mut self) {
        self.env.inner.shared.end_read(self.slot);
    }
}

/// Named databases' records as this thread's last read transactions found them, so that a
/// transaction on the same snapshot (a server's read per request, most of them between two
/// commits) need not look the name up in the main tree again, nor take the handle registry's
/// lock four times: that was half of a read by id's engine work (1,500 of ~3,200
/// instructions, `cairn serve`'s GET under callgrind, docs/bench/serve/README.md).
///
/// Invariant: an entry answers only the same handle (environment and index), the same registry
/// generation (no database opened, closed, dropped or reordered since: the index still names
/// the same database with the same order), and the same snapshot (transaction id and main
/// tree record; a commit that changes a named database's record changes the main tree's), so
/// it is what the lookup would find. User-supplied orders are not kept (their closures stay
/// with their handle).
mod known {
    use crate::db::Database;
    use crate::format::{DbRecord, KeyCmp};
    use std::cell::RefCell;

    struct Entry {
        db: Database,
        gen: u64,
        txnid: u64,
        main: DbRecord,
        rec: DbRecord,
        cmp: KeyCmp,
    }

    /// Entries a thread keeps: one per named database it reads, for a handful of them.
    const MAX: usize = 16;

    thread_local! {
        static KNOWN: RefCell<Vec<Entry>> = const { RefCell::new(Vec::new()) };
    }

    pub(super) fn get(
        db: Database,
        gen: u64,
        txnid: u64,
        main: &DbRecord,
    ) -> Option<(DbRecord, KeyCmp)> {
        KNOWN
            .try_with(|k| {
                let k = k.try_borrow().ok()?;
                let e = k.iter().find(|e| e.db == db)?;
                (e.gen == gen && e.txnid == txnid && e.main == *main)
                    .then(|| (e.rec, e.cmp.clone()))
            })
            .ok()
            .flatten()
    }

    pub(super) fn put(
        db: Database,
        gen: u64,
        txnid: u64,
        main: &DbRecord,
        hit: &(DbRecord, KeyCmp),
    ) {
        if matches!(hit.1, KeyCmp::Custom(_)) {
            return;
        }
        let e = Entry {
            db,
            gen,
            txnid,
            main: *main,
            rec: hit.0,
            cmp: hit.1.clone(),
        };
        // A thread that is exiting has no use for it.
        let _ = KNOWN.try_with(|k| {
            let Ok(mut k) = k.try_borrow_mut() else {
                return;
            };
            if let Some(old) = k.iter_mut().find(|o| o.db == db) {
                *old = e;
            } else if k.len() < MAX {
                k.push(e);
            } else {
                // Full: the oldest entry goes.
                k.remove(0);
                k.push(e);
            }
        });
    }
}
