//! Cairn, the engine under test (crates/cairn).

use std::path::Path;

use anyhow::Result;
use cairn::{Database, DbFlags, Durability, Env, PutFlags};

use super::{
    disk_usage, plain_one_put, Dups, Engine, OnePut, ReadTxn, Visit, VisitPair, WriteKind, WriteTxn,
};

pub struct Cairn {
    env: Env,
    db: Database,
    /// The group suite's threads commit through `Env::write_grouped` (`cairn-grouped`).
    grouped: bool,
}

impl Cairn {
    /// `dups`: the main database's value layout (DbFlags::DUP_SORT, with DUP_FIXED and
    /// INTEGER_DUP for `Dups::Fixed`).
    pub fn open(dir: &Path, durability: Durability, dups: Dups) -> Result<Cairn> {
        let env = Env::options().durability(durability).open(dir)?;
        let db = env.main_db();
        let flags = match dups {
            Dups::No => None,
            Dups::Sorted => Some(DbFlags::DUP_SORT),
            Dups::Fixed => Some(DbFlags::DUP_SORT | DbFlags::DUP_FIXED | DbFlags::INTEGER_DUP),
        };
        if let Some(f) = flags {
            let mut w = env.write_txn()?;
            w.create_db(None, f | DbFlags::CREATE)?;
            w.commit()?;
        }
        Ok(Cairn {
            env,
            db,
            grouped: false,
        })
    }

    /// The `cairn-grouped` configuration: the group suite's puts go through
    /// `Env::write_grouped`; everything else is as in `cairn-durable`.
    pub fn grouped(self) -> Cairn {
        Cairn {
            grouped: true,
            ..self
        }
    }
}

/// One thread's grouped writer: each put is a closure that joins the next group commit.
struct GroupedPut<'e> {
    env: &'e Env,
    db: Database,
}

impl OnePut for GroupedPut<'_> {
    fn put_one(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let db = self.db;
        self.env
            .write_grouped(|txn| txn.put(db, key, value, PutFlags::empty()))?;
        Ok(())
    }
}

struct Writer<'t, 'e> {
    txn: &'t mut cairn::RwTxn<'e>,
    db: Database,
}

impl WriteTxn for Writer<'_, '_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn.put(self.db, key, value, PutFlags::empty())?;
        Ok(())
    }

    fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.txn.put(self.db, key, value, PutFlags::APPEND)?;
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.txn.delete(self.db, key)?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        match self.txn.get(self.db, key)? {
            Some(v) => {
                f(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn delete_pair(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        Ok(self.txn.delete_pair(self.db, key, value)?)
    }
}

struct Reader<'t, 'e> {
    txn: &'t cairn::RoTxn<'e>,
    db: Database,
}

impl ReadTxn for Reader<'_, '_> {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        match self.txn.get(self.db, key)? {
            Some(v) => {
                f(v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&self, reverse: bool, f: VisitPair<'_>) -> Result<u64> {
        let mut n = 0;
        if reverse {
            for item in self.txn.iter(self.db)?.rev() {
                let (k, v) = item?;
                f(k, v);
                n += 1;
            }
        } else {
            for item in self.txn.iter(self.db)? {
                let (k, v) = item?;
                f(k, v);
                n += 1;
            }
        }
        Ok(n)
    }

    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize> {
        let mut n = 0;
        for item in self.txn.range(self.db, start..)?.take(limit) {
            let (k, v) = item?;
            f(k, v);
            n += 1;
        }
        Ok(n)
    }

    fn dup_values(&self, key: &[u8], f: Visit<'_>) -> Result<u64> {
        let mut n = 0;
        for v in self.txn.iter_dup(self.db, key)? {
            f(v?);
            n += 1;
        }
        Ok(n)
    }

    fn dup_chunks(&self, key: &[u8], f: Visit<'_>) -> Result<u64> {
        let mut c = self.txn.cursor(self.db)?;
        if c.set(key)?.is_none() {
            return Ok(0);
        }
        let mut n = 0;
        let mut chunk = c.get_multiple()?;
        while let Some((_, vals)) = chunk {
            f(vals);
            n += 1;
            chunk = c.next_multiple()?;
        }
        Ok(n)
    }
}

impl Engine for Cairn {
    fn write(
        &self,
        _kind: WriteKind,
        f: &mut dyn FnMut(&mut dyn WriteTxn) -> Result<()>,
    ) -> Result<()> {
        let mut txn = self.env.write_txn()?;
        let result = f(&mut Writer {
            txn: &mut txn,
            db: self.db,
        });
        match result {
            Ok(()) => txn.commit()?,
            Err(e) => {
                txn.abort();
                return Err(e);
            }
        }
        Ok(())
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()> {
        let txn = self.env.read_txn()?;
        f(&Reader {
            txn: &txn,
            db: self.db,
        })
    }

    fn sync(&self) -> Result<()> {
        self.env.sync()?;
        Ok(())
    }

    fn one_put_writer(&self) -> Result<Box<dyn OnePut + '_>> {
        if !self.grouped {
            return Ok(plain_one_put(self));
        }
        Ok(Box::new(GroupedPut {
            env: &self.env,
            db: self.db,
        }))
    }

    fn compact(&mut self, scratch: &Path) -> Result<Option<u64>> {
        let target = scratch.join("compact.cairn");
        self.env.copy_to(&target, true)?;
        Ok(Some(disk_usage(&target)?.0))
    }
}
