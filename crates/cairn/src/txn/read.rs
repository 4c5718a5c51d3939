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
        // A user-supplied order that reads through this transaction may hold the cache.
        if let Ok(mut c) = self.cache.try_borrow_mut() {
            if c.len() <= idx {
                c.resize(idx + 1, None);
            }
            c[idx] = Some(hit.clone());
        }
        Ok(hit)
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
