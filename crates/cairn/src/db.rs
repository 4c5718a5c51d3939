//! Database handles, flags and statistics, and the catalog of named databases.

use crate::btree::{cursor::Position, PageSource, PageWriter, MAX_DEPTH};
use crate::env::{DbInfo, EnvInner, WriterState};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp};

macro_rules! flag_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident = $v:expr;)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(u32);
        impl $name {
            $($(#[$fm])* pub const $f: $name = $name($v);)*
            /// No flag.
            pub const fn empty() -> $name { $name(0) }
            /// The raw bits (LMDB's values).
            pub const fn bits(self) -> u32 { self.0 }
            /// From raw bits, keeping unknown ones.
            pub const fn from_bits_retain(b: u32) -> $name { $name(b) }
            /// Whether every flag of `o` is set.
            pub const fn contains(self, o: $name) -> bool { self.0 & o.0 == o.0 }
            /// Whether no flag is set.
            pub const fn is_empty(self) -> bool { self.0 == 0 }
        }
        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, o: $name) -> $name { $name(self.0 | o.0) }
        }
    };
}

flag_set! {
    /// Flags of a database, with LMDB's values.
    DbFlags {
        /// Keys compared from their last byte to their first.
        REVERSE_KEY = 0x02;
        /// Sorted duplicates: a key holds a sorted set of unique values (a multimap).
        DUP_SORT = 0x04;
        /// Keys are native unsigned 32- or 64-bit integers, ordered as numbers.
        INTEGER_KEY = 0x08;
        /// With DUP_SORT: all values of a key have one size and are stored packed.
        DUP_FIXED = 0x10;
        /// With DUP_SORT: values are native unsigned 32- or 64-bit integers, ordered as numbers.
        INTEGER_DUP = 0x20;
        /// With DUP_SORT: values are compared from their last byte to their first.
        REVERSE_DUP = 0x40;
        /// Create the database if it does not exist.
        CREATE = 0x4_0000;
    }
}

impl DbFlags {
    /// The flags stored with the database (CREATE is an instruction, not a property).
    pub fn persistent(self) -> DbFlags {
        DbFlags(self.0 & (0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40))
    }
}

flag_set! {
    /// Flags of a put, with LMDB's values.
    PutFlags {
        /// Fail with `KeyExists` if the key exists.
        NO_OVERWRITE = 0x10;
        /// DUP_SORT: fail with `KeyExists` if the key/value pair exists.
        NO_DUP_DATA = 0x20;
        /// The key sorts after every key of the database: fill pages, do not split them.
        /// In a DUP_SORT database the last key itself may be given with APPEND_DUP.
        APPEND = 0x2_0000;
        /// DUP_SORT: the value sorts after every value of its key (`AppendOrder` otherwise).
        APPEND_DUP = 0x4_0000;
        /// DUP_FIXED: many fixed-size values in one call (see `RwTxn::put_multiple`).
        MULTIPLE = 0x8_0000;
    }
}

/// A handle to a database of an environment. Copy it freely; it stays valid while the
/// environment is open (using it after the database was dropped gives `BadDbi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Database {
    pub(crate) idx: u32,
    pub(crate) env_id: u64,
}

impl Database {
    /// The handle's index (LMDB's dbi).
    pub fn index(&self) -> u32 {
        self.idx
    }
}

/// Statistics of one database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Page size.
    pub page_size: u32,
    /// Levels of the tree.
    pub depth: u32,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Entries.
    pub entries: u64,
}

impl Stat {
    pub(crate) fn of(r: &DbRecord, page_size: u32) -> Stat {
        Stat {
            page_size,
            depth: u32::from(r.depth),
            branch_pages: r.branch_pages,
            leaf_pages: r.leaf_pages,
            overflow_pages: r.overflow_pages,
            entries: r.entries,
        }
    }
}

/// The key order of a database with these flags.
pub(crate) fn cmp_for(flags: DbFlags) -> KeyCmp {
    if flags.contains(DbFlags::INTEGER_KEY) {
        KeyCmp::Integer
    } else if flags.contains(DbFlags::REVERSE_KEY) {
        KeyCmp::Reverse
    } else {
        KeyCmp::Bytes
    }
}

/// The value order of a DUP_SORT database with these flags.
pub(crate) fn dup_cmp_for(flags: DbFlags) -> KeyCmp {
    if flags.contains(DbFlags::INTEGER_DUP) {
        KeyCmp::Integer
    } else if flags.contains(DbFlags::REVERSE_DUP) {
        KeyCmp::Reverse
    } else {
        KeyCmp::Bytes
    }
}

/// Names in a catalog.
pub(crate) fn catalog_names<S: PageSource + ?Sized>(
    src: &S,
    catalog: &DbRecord,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut pos = Position::new();
    let mut more = pos.first(src, catalog)?;
    while more {
        let (k, _) = pos
            .current(src)?
            .ok_or_else(|| Error::corrupted("catalog cursor"))?;
        out.push(String::from_utf8_lossy(k).into_owned());
        more = pos.next(src)?;
    }
    Ok(out)
}

/// Frees every page of a tree, sorted-duplicates sub-trees included.
pub(crate) fn free_tree<W: PageWriter + ?Sized>(w: &mut W, rec: &DbRecord) -> Result<()> {
    free_tree_level(w, rec, true)
}

/// Frees every page of one sorted-duplicates sub-tree (packed leaves included).
pub(crate) fn free_subtree<W: PageWriter + ?Sized>(w: &mut W, sub: &DbRecord) -> Result<()> {
    free_tree_level(w, sub, false)
}

fn free_tree_level<W: PageWriter + ?Sized>(w: &mut W, rec: &DbRecord, top: bool) -> Result<()> {
    if rec.root == 0 {
        return Ok(());
    }
    let ps = w.page_size();
    let mut stack = vec![(rec.root, 0usize)];
    let mut pages = Vec::new();
    let mut overflow = Vec::new();
    let mut subtrees = Vec::new();
    let limit = rec.branch_pages + rec.leaf_pages + 1;
    while let Some((pg, depth)) = stack.pop() {
        if depth > MAX_DEPTH || pages.len() as u64 > limit {
            return Err(Error::corrupted("tree larger than its record says"));
        }
        let b = w.page(pg)?;
        if !top && format::is_packed(b) {
            // A packed leaf of a DUPFIXED sub-tree: values only, nothing hangs below it.
            format::PackedLeaf::new(b, pg, Some(usize::from(rec.flags)))?;
            pages.push(pg);
            continue;
        }
        let p = format::Page::new(b, pg)?;
        for i in 0..p.nkeys() {
            let n = p.node(i)?;
            if p.is_leaf() {
                if n.flags & format::NF_SUBTREE != 0 {
                    // A sorted-duplicates sub-tree: its pages are counted in `rec` too.
                    if !top {
                        return Err(Error::corrupted("sub-tree inside a sub-tree"));
                    }
                    subtrees.push(DbRecord::decode_sub(n.val)?);
                } else if n.is_big() {
                    overflow.push((
                        format::decode_u64(n.val)?,
                        format::overflow_pages(ps, n.vlen as usize),
                    ));
                }
            } else {
                stack.push((format::decode_u64(n.val)?, depth + 1));
            }
        }
        pages.push(pg);
    }
    for pg in pages {
        w.free(pg, 1)?;
    }
    for (pg, span) in overflow {
        w.free(pg, span)?;
    }
    for sub in subtrees {
        if sub.root == 0 || sub.depth as usize > MAX_DEPTH {
            return Err(Error::corrupted("bad sorted-duplicates sub-tree record"));
        }
        free_tree_level(w, &sub, false)?;
    }
    Ok(())
}

/// What a transaction caches of a registered database: its key order and flags, valid while
/// the registry's generation (`EnvInner::db_gen`) is `gen`.
#[derive(Clone)]
pub(crate) struct DbView {
    pub gen: u64,
    pub cmp: KeyCmp,
    pub flags: DbFlags,
    /// Order bits a write through this handle stamps (see [`EnvInner::db_orders`]).
    pub bits: u16,
}

/// The order bits (`format::ORDER_CUSTOM_*`) of a registered database in this handle.
fn order_bits(d: &DbInfo) -> u16 {
    let mut bits = 0;
    if matches!(d.cmp, KeyCmp::Custom(_)) {
        bits |= format::ORDER_CUSTOM_KEYS;
    }
    if d.dup_cmp.is_some() {
        bits |= format::ORDER_CUSTOM_VALUES;
    }
    bits
}

impl EnvInner {
    pub(crate) fn check_db(&self, db: Database) -> Result<usize> {
        if db.env_id != self.id {
            return Err(Error::BadDbi);
        }
        let idx = db.idx as usize;
        if idx >= self.dbs.read().unwrap_or_else(|p| p.into_inner()).len() {
            return Err(Error::BadDbi);
        }
        Ok(idx)
    }

    pub(crate) fn db_cmp(&self, idx: usize) -> KeyCmp {
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx]
            .cmp
            .clone()
    }

    /// The key order of database `idx` in this handle, and the order bits
    /// (`format::ORDER_CUSTOM_*`) a write through this handle stores in its record.
    pub(crate) fn db_orders(&self, idx: usize) -> (KeyCmp, u16) {
        let g = self.dbs.read().unwrap_or_else(|p| p.into_inner());
        let d = &g[idx];
        (d.cmp.clone(), order_bits(d))
    }

    /// Stamps a record about to be written through this handle with its order bits (`bits`
    /// from [`EnvInner::db_orders`]). With `guard`, a non-empty database whose record claims a
    /// user-supplied order this handle lacks is refused: writing it in the flags' order would
    /// leave a tree in two orders at once.
    pub(crate) fn stamp_order(
        &self,
        idx: usize,
        rec: &mut DbRecord,
        mut bits: u16,
        guard: bool,
    ) -> Result<()> {
        if rec.flags & DbFlags::DUP_SORT.bits() as u16 == 0 {
            bits &= !format::ORDER_CUSTOM_VALUES;
        }
        let missing = rec.order & !bits;
        if guard && missing != 0 && rec.root != 0 {
            return Err(Error::OrderUnknown {
                db: self.db_name(idx).unwrap_or_else(|| "(main)".into()),
                what: if missing & format::ORDER_CUSTOM_KEYS != 0 {
                    "keys"
                } else {
                    "values"
                },
            });
        }
        rec.order = bits;
        Ok(())
    }

    /// The user-supplied value order of a DUP_SORT database, if one was set. Until any was
    /// (`custom_dup_orders`), answers without taking the `dbs` lock.
    pub(crate) fn db_dup_cmp(&self, idx: usize) -> Option<KeyCmp> {
        if !self.any_dup_order() {
            return None;
        }
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx]
            .dup_cmp
            .clone()
    }

    /// [`Self::db_dup_cmp`] for a handle: for a database with sorted duplicates (record
    /// `rec`), the order a cursor or iterator over it compares values with, if a user set one.
    /// Checks the handle only when some order exists (it was checked when `rec` was read).
    pub(crate) fn dup_order_of(&self, db: Database, rec: &DbRecord) -> Result<Option<KeyCmp>> {
        if !crate::btree::dups::is_dupsort(rec) || !self.any_dup_order() {
            return Ok(None);
        }
        Ok(self.db_dup_cmp(self.check_db(db)?))
    }

    #[inline]
    fn any_dup_order(&self) -> bool {
        self.custom_dup_orders
            .load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn db_flags(&self, idx: usize) -> DbFlags {
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx].flags
    }

    pub(crate) fn db_name(&self, idx: usize) -> Option<String> {
        self.dbs.read().unwrap_or_else(|p| p.into_inner())[idx]
            .name
            .clone()
    }

    pub(crate) fn lookup_db(&self, name: &str) -> Option<usize> {
        self.dbs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .position(|d| d.name.as_deref() == Some(name))
    }

    /// The registry for a change: the generation moves, so every cached view is dropped.
    pub(crate) fn dbs_mut(&self) -> std::sync::RwLockWriteGuard<'_, Vec<DbInfo>> {
        let g = self.dbs.write().unwrap_or_else(|p| p.into_inner());
        self.db_gen
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        g
    }

    /// The order and flags of `db`, read under one lock, with the registry's generation.
    pub(crate) fn db_view(&self, db: Database) -> Result<(usize, DbView)> {
        if db.env_id != self.id {
            return Err(Error::BadDbi);
        }
        let g = self.dbs.read().unwrap_or_else(|p| p.into_inner());
        // Read under the lock: a change bumps the generation while holding the write lock.
        let gen = self.db_gen.load(std::sync::atomic::Ordering::Acquire);
        let idx = db.idx as usize;
        let d = g.get(idx).ok_or(Error::BadDbi)?;
        Ok((
            idx,
            DbView {
                gen,
                cmp: d.cmp.clone(),
                flags: d.flags,
                bits: order_bits(d),
            },
        ))
    }

    /// The registry's generation (see [`EnvInner::dbs_mut`]).
    #[inline]
    pub(crate) fn db_gen(&self) -> u64 {
        self.db_gen.load(std::sync::atomic::Ordering::Acquire)
    }

    pub(crate) fn set_db_flags(&self, idx: usize, flags: DbFlags) {
        let mut g = self.dbs_mut();
        g[idx].flags = flags;
        g[idx].cmp = cmp_for(flags);
    }

    /// The handle of a named database, registering it on first use.
    pub(crate) fn register_db(&self, name: &str, flags: DbFlags) -> Result<Database> {
        let mut g = self.dbs_mut();
        if let Some(i) = g.iter().position(|d| d.name.as_deref() == Some(name)) {
            if g[i].flags != flags {
                g[i].flags = flags;
                g[i].cmp = cmp_for(flags);
            }
            return Ok(Database {
                idx: i as u32,
                env_id: self.id,
            });
        }
        if g.len() > self.opts.max_dbs as usize {
            return Err(Error::DbsFull {
                max: self.opts.max_dbs,
            });
        }
        g.push(DbInfo {
            name: Some(name.to_string()),
            flags,
            cmp: cmp_for(flags),
            dup_cmp: None,
        });
        Ok(Database {
            idx: (g.len() - 1) as u32,
            env_id: self.id,
        })
    }

    pub(crate) fn put_writer(&self, ws: WriterState) {
        failpoint!("writer.unlock");
        // Other handles may write once the byte is free; a failure to unlock is harmless (the
        // lock goes with the handle).
        let _ = self
            .shared
            .lock
            .lock(crate::os::LockKind::Unlock, crate::format::LB_WRITER, false);
        let mut g = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        *g = Some(ws);
        let waiting = self
            .writer_waiters
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0;
        drop(g);
        if waiting {
            self.writer_cv.notify_one();
        }
    }
}
