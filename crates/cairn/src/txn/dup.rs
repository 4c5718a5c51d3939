//! Sorted-duplicates operations of transactions: value counts, the iterator over one key's
//! values, and the writes that only DUP_SORT databases have (pair delete, MULTIPLE puts).
//! `RwTxn::put` and `RwTxn::delete` route DUP_SORT databases here too.

use crate::btree::dup::{self, DupPut};
use crate::db::{Database, DbFlags, PutFlags};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp};
use crate::txn::{RoTxn, RwTxn};

/// Refuses flag combinations LMDB does not define: the value orders need DUP_SORT.
pub(crate) fn check_db_flags(f: DbFlags) -> Result<()> {
    let dup_only = DbFlags::DUP_FIXED | DbFlags::INTEGER_DUP | DbFlags::REVERSE_DUP;
    if f.bits() & dup_only.bits() != 0 && !f.contains(DbFlags::DUP_SORT) {
        return Err(Error::Invalid(
            "DUP_FIXED, INTEGER_DUP and REVERSE_DUP need DUP_SORT".into(),
        ));
    }
    Ok(())
}

/// Checks a pair for a DUP_SORT database: keys leave room for a sub-tree record, values are
/// limited like keys (they are the sub-tree's keys), INTEGER_DUP values are 4 or 8 bytes.
fn check_pair(page_size: usize, flags: u16, key: &[u8], val: &[u8]) -> Result<()> {
    let max = format::max_key_size(page_size);
    if key.len() > max {
        return Err(Error::KeyTooLarge {
            len: key.len(),
            max,
        });
    }
    let f = DbFlags::from_bits_retain(u32::from(flags));
    if f.contains(DbFlags::INTEGER_KEY) && key.len() != 4 && key.len() != 8 {
        return Err(Error::BadIntegerKey { len: key.len() });
    }
    let vmax = format::max_key_size(page_size);
    if val.len() > vmax {
        return Err(Error::ValueTooLarge {
            len: val.len(),
            max: vmax,
        });
    }
    if f.contains(DbFlags::INTEGER_DUP) && val.len() != 4 && val.len() != 8 {
        return Err(Error::BadValueSize {
            len: val.len(),
            expected: if val.len() < 6 { 4 } else { 8 },
        });
    }
    Ok(())
}

impl RoTxn<'_> {
    /// The number of values stored under `key` (0 if absent; 1 in a database without
    /// DUP_SORT when present).
    pub fn count(&self, db: Database, key: &[u8]) -> Result<u64> {
        let (rec, cmp) = self.db(db)?;
        dup::count(self.snapshot(), &rec, &cmp, key)
    }
}

impl RwTxn<'_> {
    /// The number of values stored under `key`, as this transaction sees it.
    pub fn count(&self, db: Database, key: &[u8]) -> Result<u64> {
        let (rec, cmp) = self.db_ro(db)?;
        dup::count(self, &rec, &cmp, key)
    }

    pub(crate) fn put_dup(
        &mut self,
        idx: usize,
        mut rec: DbRecord,
        cmp: &KeyCmp,
        key: &[u8],
        val: &[u8],
        flags: PutFlags,
    ) -> Result<bool> {
        check_pair(self.env.inner.page_size, rec.flags, key, val)?;
        let f = DupPut {
            no_overwrite: flags.contains(PutFlags::NO_OVERWRITE),
            no_dup_data: flags.contains(PutFlags::NO_DUP_DATA),
            append: flags.contains(PutFlags::APPEND),
            append_dup: flags.contains(PutFlags::APPEND_DUP),
        };
        let mut scratch = std::mem::take(&mut self.dup_scratch);
        let vcmp = self.env.inner.db_dup_cmp(idx);
        let orders = dup::Orders {
            keys: cmp,
            values: vcmp.as_ref(),
        };
        let r = dup::put_ordered(self, &mut rec, orders, key, val, f, &mut scratch);
        self.dup_scratch = scratch;
        self.set_rec(idx, rec);
        r
    }

    /// MDB_MULTIPLE: stores the values packed in `values`, each `size` bytes, under `key`
    /// (DUP_SORT | DUP_FIXED databases). Returns how many were added (pairs that existed are
    /// skipped, or with `NO_DUP_DATA` stop the call with `KeyExists` after the ones before
    /// them were stored, as LMDB does).
    pub fn put_multiple(
        &mut self,
        db: Database,
        key: &[u8],
        values: &[u8],
        size: usize,
        flags: PutFlags,
    ) -> Result<usize> {
        let (idx, rec, cmp) = self.db_state(db)?;
        let f = DbFlags::from_bits_retain(u32::from(rec.flags));
        if !f.contains(DbFlags::DUP_SORT | DbFlags::DUP_FIXED) {
            return Err(Error::Invalid(
                "MULTIPLE needs a DUP_SORT | DUP_FIXED database".into(),
            ));
        }
        if size == 0 || !values.len().is_multiple_of(size) {
            return Err(Error::Invalid(format!(
                "MULTIPLE: {} bytes are not a whole number of {size}-byte values",
                values.len()
            )));
        }
        let mut added = 0;
        for v in values.chunks_exact(size) {
            let (_, rec, _) = self.db_state(db)?;
            if self
                .put_dup(idx, rec, &cmp, key, v, flags)
                .inspect_err(|e| self.log_failed(e))?
            {
                self.log_put(idx, &cmp, key, v);
                added += 1;
            }
        }
        Ok(added)
    }

    /// Deletes the pair `key`/`value` (in a database without DUP_SORT: `key` if its value is
    /// `value`). Returns whether it existed.
    pub fn delete_pair(&mut self, db: Database, key: &[u8], value: &[u8]) -> Result<bool> {
        let (idx, mut rec, cmp) = self.db_state(db)?;
        if !dup::is_dupsort(&rec) {
            if self.get(db, key)? != Some(value) {
                return Ok(false);
            }
            return self.delete(db, key);
        }
        let mut scratch = std::mem::take(&mut self.dup_scratch);
        let vcmp = self.env.inner.db_dup_cmp(idx);
        let orders = dup::Orders {
            keys: &cmp,
            values: vcmp.as_ref(),
        };
        let r = dup::delete_pair_ordered(self, &mut rec, orders, key, value, &mut scratch);
        self.dup_scratch = scratch;
        if matches!(r, Ok(true)) {
            self.set_rec(idx, rec);
            self.log_delete(idx, &cmp, key, Some(value));
        }
        r.inspect_err(|e| self.log_failed(e))
    }
}
