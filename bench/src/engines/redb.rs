//! redb (pure Rust), one table of byte-string keys and values.

use std::path::{Path, PathBuf};

use anyhow::Result;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

use super::{Engine, ReadTxn, Visit, VisitPair, WriteKind, WriteTxn};

const TABLE: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");
const CACHE_BYTES: usize = 4 << 30;

pub struct Redb {
    db: Database,
    path: PathBuf,
    durability: Durability,
}

impl Redb {
    pub fn open(dir: &Path, durable: bool) -> Result<Redb> {
        let path = dir.join("data.redb");
        let db = Database::builder()
            .set_cache_size(CACHE_BYTES)
            .create(&path)?;
        let txn = db.begin_write()?;
        txn.open_table(TABLE)?;
        txn.commit()?;
        let durability = if durable {
            Durability::Immediate
        } else {
            Durability::None
        };
        Ok(Redb {
            db,
            path,
            durability,
        })
    }
}

struct Writer<'t> {
    table: redb::Table<'t, &'static [u8], &'static [u8]>,
}

impl WriteTxn for Writer<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.table.insert(key, value)?;
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.table.remove(key)?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        match self.table.get(key)? {
            Some(v) => {
                f(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

struct Reader {
    table: redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
}

impl ReadTxn for Reader {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        match self.table.get(key)? {
            Some(v) => {
                f(v.value());
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&self, reverse: bool, f: VisitPair<'_>) -> Result<u64> {
        let mut n = 0;
        let mut visit = |item: redb::Result<(_, _)>| -> Result<()> {
            let (k, v): (redb::AccessGuard<&[u8]>, redb::AccessGuard<&[u8]>) = item?;
            f(k.value(), v.value());
            n += 1;
            Ok(())
        };
        if reverse {
            for item in self.table.iter()?.rev() {
                visit(item)?;
            }
        } else {
            for item in self.table.iter()? {
                visit(item)?;
            }
        }
        Ok(n)
    }

    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize> {
        let mut n = 0;
        for item in self.table.range(start..)?.take(limit) {
            let (k, v) = item?;
            f(k.value(), v.value());
            n += 1;
        }
        Ok(n)
    }
}

impl Engine for Redb {
    fn write(
        &self,
        _kind: WriteKind,
        f: &mut dyn FnMut(&mut dyn WriteTxn) -> Result<()>,
    ) -> Result<()> {
        let mut txn = self.db.begin_write()?;
        txn.set_durability(self.durability)?;
        {
            let mut w = Writer {
                table: txn.open_table(TABLE)?,
            };
            if let Err(e) = f(&mut w) {
                drop(w);
                txn.abort()?;
                return Err(e);
            }
        }
        txn.commit()?;
        Ok(())
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()> {
        let txn = self.db.begin_read()?;
        let r = Reader {
            table: txn.open_table(TABLE)?,
        };
        f(&r)
    }

    fn sync(&self) -> Result<()> {
        // Commits made with Durability::None become durable with the next Immediate commit.
        let txn = self.db.begin_write()?;
        txn.commit()?;
        Ok(())
    }

    fn compact(&mut self, _scratch: &Path) -> Result<Option<u64>> {
        self.sync()?;
        self.db.compact()?;
        Ok(Some(super::disk_usage(&self.path)?.0))
    }
}
