//! The cursor of a write transaction: positioning, then put and delete at the position.

use super::*;

/// A cursor of a write transaction: positioning plus put and delete at the position. Each
/// change re-seeks the cursor, so it stays valid whatever the change did to the pages. In a
/// DUP_SORT database it stands on a (key, value) pair.
///
/// Invariant: `leaf`, when set, is a dirty leaf of the database's tree and the slot where the
/// last `put` landed. The cursor borrows the transaction exclusively, so only its own methods change the
/// tree: `put` keeps the hint valid (it frees no tree page), every other change clears it.
pub struct CursorMut<'t, 'env> {
    txn: &'t mut RwTxn<'env>,
    db: Database,
    at: Option<(Vec<u8>, Vec<u8>)>,
    leaf: Option<(u64, usize)>,
    /// The position is the pair at `leaf` (set), not `at` (stale): a put leaves the copy of
    /// its pair to the first method that needs it, since runs of puts (putmulti) need none.
    landed: bool,
}

type Owned = Option<(Vec<u8>, Vec<u8>)>;

#[allow(clippy::should_implement_trait, reason = "LMDB's cursor vocabulary")]
impl<'t, 'env> CursorMut<'t, 'env> {
    pub(crate) fn new(txn: &'t mut RwTxn<'env>, db: Database) -> CursorMut<'t, 'env> {
        CursorMut {
            txn,
            db,
            at: None,
            leaf: None,
            landed: false,
        }
    }

    /// Copies the pair the last put landed on into `at`, if that is the position.
    fn settle(&mut self) -> Result<()> {
        if !self.landed {
            return Ok(());
        }
        self.landed = false;
        self.at = None;
        let Some((pg, slot)) = self.leaf else {
            return Ok(());
        };
        // Read where the put left it; `node_value` follows an overflow reference.
        let src: &RwTxn<'env> = self.txn;
        let n = crate::btree::tree_page(src, pg)?.node(slot)?;
        self.at = Some((n.key.to_vec(), crate::btree::node_value(src, &n)?.to_vec()));
        Ok(())
    }

    /// Runs `f` on a read cursor re-seeked to the first pair at or after the remembered one,
    /// and remembers where it ends.
    fn with<F>(&mut self, f: F) -> Result<Owned>
    where
        F: for<'a> FnOnce(&mut Cursor<'a>, Option<(&[u8], &[u8])>) -> Result<Entry<'a>>,
    {
        self.settle()?;
        let at = self.at.take();
        let e = {
            let mut c = self.txn.cursor(self.db)?;
            if let Some((k, v)) = &at {
                c.seek_pair(k, v)?;
            }
            f(&mut c, at.as_ref().map(|(k, v)| (&k[..], &v[..])))?
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
        };
        self.at = e.clone();
        Ok(e)
    }

    /// MDB_FIRST.
    pub fn first(&mut self) -> Result<Owned> {
        self.with(|c, _| c.first())
    }
    /// MDB_LAST.
    pub fn last(&mut self) -> Result<Owned> {
        self.with(|c, _| c.last())
    }
    /// MDB_NEXT: the pair after the current one (even if that one was deleted).
    pub fn next(&mut self) -> Result<Owned> {
        self.with(|c, at| match at {
            None => c.first(),
            Some(at) => match c.current()? {
                Some(cur) if cur == at => c.next(),
                other => Ok(other),
            },
        })
    }
    /// MDB_PREV.
    pub fn prev(&mut self) -> Result<Owned> {
        self.with(|c, at| match at {
            None => c.last(),
            Some(_) => match c.current()? {
                Some(_) => c.prev(),
                None => c.last(),
            },
        })
    }
    /// MDB_NEXT_NODUP: the first value of the next key.
    pub fn next_nodup(&mut self) -> Result<Owned> {
        self.with(|c, at| match at {
            None => c.first(),
            Some((k, _)) => match c.current()? {
                Some((ck, _)) if ck == k => c.next_nodup(),
                other => Ok(other),
            },
        })
    }
    /// MDB_NEXT_DUP: the next value of the current key.
    pub fn next_dup(&mut self) -> Result<Owned> {
        self.settle()?;
        let at = self.at.clone();
        let e = self.with(|c, at| match (at, c.current()?) {
            (Some(at), Some(cur)) if cur == at => c.next_dup(),
            (Some((k, _)), Some(cur)) if cur.0 == k => Ok(Some(cur)),
            _ => Ok(None),
        })?;
        if e.is_none() {
            self.at = at;
        }
        Ok(e)
    }
    /// MDB_SET.
    pub fn set(&mut self, key: &[u8]) -> Result<Owned> {
        self.at = None;
        self.landed = false;
        self.with(|c, _| c.set(key))
    }
    /// MDB_SET_RANGE.
    pub fn set_range(&mut self, key: &[u8]) -> Result<Owned> {
        self.at = None;
        self.landed = false;
        self.with(|c, _| c.set_range(key))
    }
    /// MDB_GET_BOTH.
    pub fn get_both(&mut self, key: &[u8], value: &[u8]) -> Result<Owned> {
        self.at = None;
        self.landed = false;
        self.with(|c, _| c.get_both(key, value))
    }
    /// MDB_GET_CURRENT.
    pub fn current(&mut self) -> Result<Owned> {
        self.settle()?;
        let Some((k, v)) = self.at.clone() else {
            return Ok(None);
        };
        let mut c = self.txn.cursor(self.db)?;
        Ok(match c.seek_pair(&k, &v)? {
            Some(e) if e == (&k[..], &v[..]) => Some((k, v)),
            _ => None,
        })
    }
    /// mdb_cursor_count: the number of values of the current key.
    pub fn count(&mut self) -> Result<u64> {
        self.settle()?;
        match &self.at {
            Some((k, _)) => self.txn.count(self.db, k),
            None => Ok(0),
        }
    }
    /// Puts `key`/`value` and moves the cursor there.
    ///
    /// A put whose key falls within the leaf the previous put landed in goes straight there
    /// (LMDB's shortcut), so a run of sorted puts does not descend from the root each time.
    pub fn put(&mut self, key: &[u8], value: &[u8], flags: PutFlags) -> Result<()> {
        let hint = self.leaf;
        match self.txn.put_hinted(self.db, key, value, flags, hint) {
            Ok(Some(l)) => {
                self.leaf = Some(l);
                self.landed = true;
                return Ok(());
            }
            Ok(None) => self.leaf = None,
            Err(e) => {
                // KeyExists changed nothing: the position and hint stand. After any other
                // failure the tree may have changed under both.
                if !matches!(e, Error::KeyExists) {
                    self.leaf = None;
                    if self.landed {
                        self.landed = false;
                        self.at = None;
                    }
                }
                return Err(e);
            }
        }
        self.landed = false;
        // The position's buffers are reused.
        match &mut self.at {
            Some((k, v)) => {
                k.clear();
                k.extend_from_slice(key);
                v.clear();
                v.extend_from_slice(value);
            }
            None => self.at = Some((key.to_vec(), value.to_vec())),
        }
        Ok(())
    }
    /// MDB_CURRENT: replaces the value at the cursor (in a DUP_SORT database: the pair at the
    /// cursor by `key`/`value`).
    pub fn put_current(&mut self, value: &[u8]) -> Result<()> {
        self.settle()?;
        let (k, old) = self
            .at
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.leaf = None;
        let idx = self.txn.env.inner.check_db(self.db)?;
        if self.txn.env.inner.db_flags(idx).contains(DbFlags::DUP_SORT) {
            // The old pair goes; the new one takes its place in the value order.
            self.txn.delete_pair(self.db, &k, &old)?;
        }
        self.txn.put(self.db, &k, value, PutFlags::empty())?;
        self.at = Some((k, value.to_vec()));
        Ok(())
    }
    /// Deletes the pair at the cursor; the cursor then stands before the next pair.
    pub fn del_current(&mut self) -> Result<()> {
        self.settle()?;
        let (k, v) = self
            .at
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.leaf = None;
        if !self.txn.delete_pair(self.db, &k, &v)? {
            return Err(Error::Invalid("cursor entry no longer exists".into()));
        }
        Ok(())
    }
    /// MDB_NODUPDATA delete: deletes the current key with all its values.
    pub fn del_current_all(&mut self) -> Result<()> {
        self.settle()?;
        let (k, _) = self
            .at
            .clone()
            .ok_or_else(|| Error::Invalid("cursor is not positioned".into()))?;
        self.leaf = None;
        if !self.txn.delete(self.db, &k)? {
            return Err(Error::Invalid("cursor entry no longer exists".into()));
        }
        Ok(())
    }
}

// RoTxn must stay Send (read transactions move between threads).
