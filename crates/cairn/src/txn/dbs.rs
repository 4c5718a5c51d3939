//! Databases inside a write transaction: opening and creating named databases, emptying and
//! dropping them, their statistics and names (the same `RwTxn` as `write`, split off for
//! size).
//!
//! Invariants:
//! - A named database is a key of the main database (flag NF_DB) holding its record; creating
//!   and dropping one changes that key at once, so the main tree is always current for names.
//! - Creating, emptying or dropping a database, and changing the main database's flags, are
//!   not logged (replay opens databases by name): each clears `effects`, which makes the
//!   commit steady in logged mode (docs/design.md, "Logged commits", step 2).
//! - A handle is registered before anything changes, so a full handle table (max_dbs) leaves
//!   the transaction as it was; a dropped database stays in `dbs`, marked deleted.

use super::write::{RwTxn, TxnDb};
use crate::btree;
use crate::catalog::{catalog_lookup, Named};
use crate::db::{Database, DbFlags, Stat};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord};

impl RwTxn<'_> {
    /// Opens a named database, creating it if `flags` contains [`DbFlags::CREATE`].
    pub fn create_db(&mut self, name: Option<&str>, flags: DbFlags) -> Result<Database> {
        let persistent = flags.persistent();
        super::dup::check_db_flags(persistent)?;
        let Some(name) = name else {
            let cur = self.dbs[0].as_ref().expect("main").rec;
            if cur.root == 0
                && cur.flags != persistent.bits() as u16
                && flags.contains(DbFlags::CREATE)
            {
                let mut rec = cur;
                rec.flags = persistent.bits() as u16;
                self.set_rec(0, rec);
                self.effects = None;
                self.env.inner.set_db_flags(0, persistent);
            }
            return Ok(self.env.main_db());
        };
        if name.is_empty() || name.len() > format::max_key_size(self.env.inner.page_size) {
            return Err(Error::Invalid(format!(
                "database name of {} bytes",
                name.len()
            )));
        }
        // LMDB's rule: a DUP_SORT or INTEGER_KEY main database holds no named database.
        let main_flags = self.dbs[0].as_ref().expect("main").rec.flags;
        if !crate::catalog::main_allows_named(main_flags) {
            if flags.contains(DbFlags::CREATE) {
                return Err(Error::Incompatible {
                    existing: u32::from(main_flags),
                    requested: persistent.bits(),
                    what: format!(
                        "named database {name:?}: the main database is DUP_SORT or \
                         INTEGER_KEY (flags {main_flags:#x}) and holds no named database"
                    ),
                });
            }
            return Err(Error::DbNotFound {
                name: name.to_string(),
            });
        }
        // The main tree is current for names: creating and dropping change it at once. A
        // database this transaction wrote has a newer record in `dbs`.
        let (main, mcmp) = self.main_ro()?;
        match catalog_lookup(self, &main, &mcmp, name)? {
            Named::Plain => Err(crate::catalog::plain_key_error(name)),
            Named::Db(found) => {
                let loaded = self
                    .env
                    .inner
                    .lookup_db(name)
                    .and_then(|i| self.dbs.get(i).cloned().flatten())
                    .filter(|d| !d.deleted);
                let rec = loaded.map_or(found, |d| d.rec);
                let stored = DbFlags::from_bits_retain(u32::from(rec.flags));
                if flags.contains(DbFlags::CREATE) && !persistent.is_empty() && persistent != stored
                {
                    return Err(Error::Incompatible {
                        existing: stored.bits(),
                        requested: persistent.bits(),
                        what: format!(
                            "database {name:?} was created with flags {:#x}, opened with {:#x}",
                            stored.bits(),
                            persistent.bits()
                        ),
                    });
                }
                let db = self.env.inner.register_db(name, stored)?;
                let idx = db.idx as usize;
                if self.dbs.len() <= idx {
                    self.dbs.resize(idx + 1, None);
                }
                if self.dbs[idx].as_ref().is_none_or(|d| d.deleted) {
                    self.dbs[idx] = Some(TxnDb {
                        rec,
                        dirty: false,
                        deleted: false,
                        fast: None,
                    });
                }
                Ok(db)
            }
            Named::Absent if flags.contains(DbFlags::CREATE) => {
                // The handle first: a full handle table (max_dbs) changes nothing.
                let db = self.env.inner.register_db(name, persistent)?;
                // Replay opens databases by name: creating one is not logged.
                self.effects = None;
                let idx = db.idx as usize;
                let rec = DbRecord {
                    flags: persistent.bits() as u16,
                    ..Default::default()
                };
                // Its key in the main database, at once (LMDB's layout).
                let (_, mut mrec, mcmp) = self.db_state(self.env.main_db())?;
                self.forget_put_hint();
                let v = rec.to_bytes();
                let r = btree::insert::put(
                    self,
                    &mut mrec,
                    &mcmp,
                    name.as_bytes(),
                    btree::insert::NewValue::with_flags(&v, format::NF_DB),
                    btree::insert::Mode::NoOverwrite,
                );
                self.set_rec(0, mrec);
                if r? != btree::insert::Outcome::Inserted {
                    return Err(Error::internal(format!(
                        "named database {name:?} appeared while being created"
                    )));
                }
                if self.dbs.len() <= idx {
                    self.dbs.resize(idx + 1, None);
                }
                self.dbs[idx] = Some(TxnDb {
                    rec,
                    dirty: true,
                    deleted: false,
                    fast: None,
                });
                self.changed = true;
                Ok(db)
            }
            Named::Absent => Err(Error::DbNotFound {
                name: name.to_string(),
            }),
        }
    }

    /// Opens an existing named database (None: the main database).
    pub fn open_db(&mut self, name: Option<&str>) -> Result<Database> {
        self.create_db(name, DbFlags::empty())
    }

    /// Empties a database, keeping it. Emptying the main database keeps the keys of the
    /// named databases (and so the databases): only its plain keys go.
    pub fn clear_db(&mut self, db: Database) -> Result<()> {
        // Emptying needs no order: allowed whatever order the database is kept in.
        let (idx, rec, cmp, _) = self.db_state_for(db, false)?;
        self.effects = None;
        let names = if idx == 0 {
            crate::catalog::catalog_entries(self, &rec)?
        } else {
            Vec::new()
        };
        if !names.is_empty() {
            // The names go back in order: refused (before anything is freed) when this
            // handle lacks the order the main database is kept in.
            self.db_state_for(db, true)?;
        }
        btree::free::free_tree(self, &rec)?;
        let mut empty = DbRecord {
            flags: rec.flags,
            ..Default::default()
        };
        if !names.is_empty() {
            // The names are put back in this handle's order, which the stamped bits name.
            empty.order = rec.order;
            self.forget_put_hint();
        }
        for (name, named) in names {
            let v = named.to_bytes();
            btree::insert::put(
                self,
                &mut empty,
                &cmp,
                &name,
                btree::insert::NewValue::with_flags(&v, format::NF_DB),
                btree::insert::Mode::Upsert,
            )?;
        }
        self.set_rec(idx, empty);
        Ok(())
    }

    /// Deletes a named database: its pages are freed and its key leaves the main database.
    /// The main database is only emptied (its named databases stay: see `clear_db`).
    pub fn drop_db(&mut self, db: Database) -> Result<()> {
        let idx = db.idx as usize;
        if idx != 0 && db.env_id == self.env.inner.id {
            // The main database must be writable by this handle before anything is freed.
            self.db_state(self.env.main_db())?;
        }
        self.clear_db(db)?;
        if idx != 0 {
            let name = self.env.inner.db_name(idx).ok_or(Error::BadDbi)?;
            let (_, mut mrec, mcmp) = self.db_state(self.env.main_db())?;
            self.forget_put_hint();
            let r = btree::delete::delete_db_node(self, &mut mrec, &mcmp, name.as_bytes());
            self.set_rec(0, mrec);
            if !r? {
                return Err(Error::internal(format!(
                    "named database {name:?} has no key in the main database"
                )));
            }
            self.dbs[idx].as_mut().expect("loaded").deleted = true;
        }
        Ok(())
    }

    /// Statistics of a database as this transaction sees it.
    pub fn stat(&self, db: Database) -> Result<Stat> {
        let (rec, _) = self.db_ro(db)?;
        Ok(Stat::of(&rec, self.base.page_size))
    }

    /// The names of the named databases as this transaction sees them.
    pub fn db_names(&self) -> Result<Vec<String>> {
        let (main, _) = self.main_ro()?;
        crate::catalog::catalog_names(self, &main)
    }
}
