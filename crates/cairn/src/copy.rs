//! Hot copy of a read snapshot into a new file: page by page, or compacted by reloading every
//! database in key order (append mode; sorted duplicates in value order) into a fresh file.
//!
//! A compacting copy rebuilds trees, so it needs each database's order: the copy takes the
//! source handle's user-supplied orders (and so records them in the copy as the source does);
//! a database whose file says it has one the handle has not set is refused with
//! `Error::OrderUnknown` before anything is written (a page-by-page copy needs no order).

use crate::db::{DbFlags, PutFlags};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, Meta, SECTOR};
use crate::options::Durability;
use crate::state::Env;
use crate::txn::RoTxn;
use std::path::Path;

pub(crate) fn copy(txn: &RoTxn<'_>, dest: &Path, compact: bool) -> Result<()> {
    if dest.exists()
        && std::fs::metadata(dest)
            .map(|m| m.len() > 0 && m.is_file())
            .unwrap_or(false)
    {
        return Err(Error::Invalid(format!(
            "{} exists; a copy needs a new file",
            dest.display()
        )));
    }
    if compact {
        return compact_copy(txn, dest);
    }
    let snap = txn.snapshot();
    let m = &snap.meta;
    let ps = m.page_size as u64;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .map_err(|e| Error::io(format!("creating {}", dest.display()), e))?;
    // The copy's only commit is the snapshot's, marked steady; its pages are all copied, so
    // the runs it lists verify.
    let meta = Meta {
        version: format::FORMAT_VERSION,
        flags: format::MF_STEADY,
        last_steady: m.txnid,
        ..m.clone()
    };
    let mut page0 = vec![0u8; ps as usize];
    page0[..SECTOR].copy_from_slice(&meta.encode());
    // Written through `os::pwritev_all` (16 KiB calls), as commits are, so that the copy's
    // cached pages are not large folios that slow the first writer to open it (docs/design.md,
    // "Commit", step 4).
    crate::os::pwritev_all(&f, 0, &[&page0]).map_err(|e| Error::io("writing the copy", e))?;
    // Every page below npages is copied, free ones too, and a writer may be building new
    // pages in free ones right now (in place, through its writable map): so the pages are
    // read with pread into a buffer, never through a slice of the map (docs/safety.md, "page
    // lifetime"). What a free page holds does not matter to the copy, whose free tree is the
    // snapshot's; every page the snapshot reaches is pinned by this read transaction.
    let chunk = 256u64;
    let mut buf = vec![0u8; (chunk * ps) as usize];
    let mut pg = 1;
    while pg < m.npages {
        let n = chunk.min(m.npages - pg);
        let b = &mut buf[..(n * ps) as usize];
        snap.storage.read_at(pg * ps, b)?;
        crate::os::pwritev_all(&f, pg * ps, &[b]).map_err(|e| Error::io("writing the copy", e))?;
        pg += n;
    }
    f.sync_all().map_err(|e| Error::io("flushing the copy", e))
}

/// The orders of a source database: the source handle's user-supplied ones for database
/// `idx` (None: a named database this handle has not opened, which has only its flags'
/// orders), refusing a database whose record `rec` says it has one that the handle lacks.
fn source_orders(
    env: &Env,
    idx: Option<usize>,
    name: &str,
    rec: &DbRecord,
) -> Result<(Option<format::CmpFn>, Option<format::CmpFn>)> {
    let (keys, values) = match idx {
        Some(idx) => {
            let (k, _) = env.inner.db_orders(idx);
            let keys = match k {
                KeyCmp::Custom(f) => Some(f),
                _ => None,
            };
            let values = match env.inner.db_dup_cmp(idx) {
                Some(KeyCmp::Custom(f)) if crate::btree::dup::is_dupsort(rec) => Some(f),
                _ => None,
            };
            (keys, values)
        }
        None => (None, None),
    };
    let missing = [
        (format::ORDER_CUSTOM_KEYS, keys.is_some(), "keys"),
        (format::ORDER_CUSTOM_VALUES, values.is_some(), "values"),
    ]
    .into_iter()
    .find(|&(bit, set, _)| rec.order & bit != 0 && !set && rec.root != 0);
    if let Some((_, _, what)) = missing {
        return Err(Error::OrderUnknown {
            db: name.to_string(),
            what,
        });
    }
    Ok((keys, values))
}

/// A named database of the source, as the compacting copy rebuilds it.
struct Source {
    name: String,
    rec: DbRecord,
    /// The source handle's registered database of that name, if it opened it.
    idx: Option<usize>,
    orders: (Option<format::CmpFn>, Option<format::CmpFn>),
}

fn compact_copy(txn: &RoTxn<'_>, dest: &Path) -> Result<()> {
    let src_env = txn.env();
    let snap = txn.snapshot();
    // Every order is known before the destination is created: a refusal leaves no file.
    let main_orders = source_orders(src_env, Some(0), "(main)", &snap.meta.main)?;
    // The named databases, read from the main tree's records without opening handles (a
    // file may hold more of them than the handle table has room for).
    let mut named = std::collections::HashMap::new();
    for (key, rec) in crate::catalog::catalog_entries(snap, &snap.meta.main)? {
        let name = String::from_utf8(key.clone()).map_err(|_| {
            Error::Invalid(format!(
                "named database {:?}: a name that is not UTF-8 cannot be copied",
                String::from_utf8_lossy(&key)
            ))
        })?;
        let idx = src_env.inner.lookup_db(&name);
        let orders = source_orders(src_env, idx, &name, &rec)?;
        named.insert(
            key,
            Source {
                name,
                rec,
                idx,
                orders,
            },
        );
    }
    let max_dbs = src_env.inner.opts.max_dbs.max(named.len() as u32);
    let out = Env::options()
        .page_size(src_env.page_size())
        .durability(Durability::Lazy)
        .max_dbs(max_dbs)
        .no_subdir(true)
        // A compacted copy is never larger than its source; reserving address space to
        // match (not the default 1 TiB) lets copies work where address space is limited
        // (ulimit -v, valgrind).
        .map_reserve((src_env.inner.storage.len() * 2).max(64 << 20))
        .open(dest)?;
    {
        let mut w = out.write_txn()?;
        let main_flags = DbFlags::from_bits_retain(u32::from(snap.meta.main.flags));
        let main = w.create_db(None, main_flags | DbFlags::CREATE)?;
        out.set_key_order(main, main_orders.0)?;
        out.set_dup_order(main, main_orders.1)?;
        // One pass in the main database's order: a plain key is appended, a named database
        // is created (its key goes where an append would put it) and filled.
        for item in txn.iter(src_env.main_db())? {
            let (k, v) = item?;
            let Some(src) = named.remove(k) else {
                w.put(main, k, v, PutFlags::APPEND | PutFlags::APPEND_DUP)?;
                continue;
            };
            let flags = DbFlags::from_bits_retain(u32::from(src.rec.flags)).persistent();
            let ddb = w.create_db(Some(&src.name), flags | DbFlags::CREATE)?;
            out.set_key_order(ddb, src.orders.0.clone())?;
            out.set_dup_order(ddb, src.orders.1)?;
            let cmp = match src.orders.0 {
                Some(f) => KeyCmp::Custom(f),
                None => crate::db::cmp_for(flags),
            };
            let mut it = crate::Iter::new(snap, src.rec, cmp, ..)?;
            if let Some(idx) = src.idx {
                let sdb = crate::Database {
                    idx: idx as u32,
                    env_id: src_env.inner.id,
                };
                it = it.custom_dup_order(&src_env.inner, sdb)?;
            }
            for item in it {
                let (k, v) = item?;
                w.put(ddb, k, v, PutFlags::APPEND | PutFlags::APPEND_DUP)?;
            }
        }
        if let Some(src) = named.values().next() {
            return Err(Error::corrupted(format!(
                "named database {:?} not met walking the main database",
                src.name
            )));
        }
        w.commit()?;
    }
    out.sync()?;
    drop(out);
    let mut lock = dest.as_os_str().to_owned();
    lock.push("-lock");
    let _ = std::fs::remove_file(lock);
    Ok(())
}

impl RoTxn<'_> {
    /// Writes a copy of this snapshot to `path` (a new data file; see [`Env::copy_to`]).
    pub fn copy_to_file(&self, path: &std::path::Path, compact: bool) -> Result<()> {
        copy(self, path, compact)
    }
}

impl Env {
    /// Writes a consistent copy of the current snapshot to `path` (a new data file) while
    /// writers go on. `compact` rewrites every database densely, leaving out free pages.
    pub fn copy_to(&self, path: impl AsRef<Path>, compact: bool) -> Result<()> {
        let r = self.read_txn()?;
        r.copy_to_file(path.as_ref(), compact)
    }
}
