//! Read-only views for operators' tools (`cairn stat`, `cairn dump`): a database's flags and
//! the free tree as a snapshot stores it. Nothing here changes state; every figure comes from
//! one snapshot.

use crate::alloc;
use crate::btree::cursor::Position;
use crate::db::{Database, DbFlags, Stat};
use crate::error::{Error, Result};
use crate::txn::RoTxn;

/// One run of free pages as a snapshot's free tree records it. Its transaction ids are the
/// file's own, one more than [`RoTxn::id`] and the reader list give for the same commit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct FreeRun {
    /// First page of the run.
    pub start: u64,
    /// Pages in the run.
    pub len: u64,
    /// Transaction that wrote the pages (0 for runs that were never visible).
    pub birth: u64,
    /// Transaction that freed them; 0 once they are reusable.
    pub freed: u64,
}

impl RoTxn<'_> {
    /// The stored flags of a database (LMDB's values; CREATE never appears).
    pub fn db_flags(&self, db: Database) -> Result<DbFlags> {
        let snap = self.snapshot();
        let bits = if db.idx == 0 && db.env_id == self.env().inner.id {
            snap.meta.main.flags
        } else {
            self.db(db)?.0.flags
        };
        Ok(DbFlags::from_bits_retain(u32::from(bits)).persistent())
    }

    /// Statistics of the free tree (the tree that records free page runs).
    pub fn free_tree_stat(&self) -> Stat {
        let m = &self.snapshot().meta;
        Stat::of(&m.free, m.page_size)
    }

    /// The free page runs this snapshot records, in page order. Runs with `freed != 0` may
    /// still be visible to older snapshots; the rest are reusable.
    pub fn free_runs(&self) -> Result<Vec<FreeRun>> {
        let snap = self.snapshot();
        let mut out = Vec::new();
        let mut pos = Position::new();
        let mut more = pos.first(snap, &snap.meta.free)?;
        while more {
            let (k, v) = pos
                .current(snap)?
                .ok_or_else(|| Error::corrupted("free tree cursor"))?;
            alloc::decode_free_record(snap.meta.version, k, v, |start, run| {
                out.push(FreeRun {
                    start,
                    len: run.len,
                    birth: run.birth,
                    freed: run.freed,
                });
                // A corrupt tree could loop; a snapshot cannot hold more runs than pages.
                if out.len() as u64 > snap.meta.npages {
                    return Err(Error::corrupted("free tree has more runs than pages"));
                }
                Ok(())
            })?;
            more = pos.next(snap)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use crate::{DbFlags, Env, PutFlags};

    #[test]
    fn flags_and_free_runs() {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        let db = w
            .create_db(Some("ints"), DbFlags::INTEGER_KEY | DbFlags::CREATE)
            .unwrap();
        for i in 0u32..2000 {
            w.put(db, &u32::to_le_bytes(i), &[7u8; 100], PutFlags::empty())
                .unwrap();
        }
        w.commit().unwrap();
        let mut w = env.write_txn().unwrap();
        w.clear_db(db).unwrap();
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let db = r.open_db(Some("ints")).unwrap();
        assert_eq!(r.db_flags(db).unwrap(), DbFlags::INTEGER_KEY);
        assert_eq!(r.db_flags(env.main_db()).unwrap(), DbFlags::empty());
        let runs = r.free_runs().unwrap();
        assert!(runs.iter().map(|f| f.len).sum::<u64>() > 10, "{runs:?}");
        assert!(runs.windows(2).all(|w| w[0].start + w[0].len <= w[1].start));
    }
}
