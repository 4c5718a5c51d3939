//! Hot copy of a read snapshot into a new file: page by page, or compacted by reloading every
//! database in key order (append mode; sorted duplicates in value order) into a fresh file.

use crate::db::{DbFlags, PutFlags};
use crate::env::{Durability, Env};
use crate::error::{Error, Result};
use crate::format::{self, Meta, SECTOR};
use crate::txn::RoTxn;
use std::io::Write;
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
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .map_err(|e| Error::io(format!("creating {}", dest.display()), e))?;
    // The copy's only commit is the snapshot's, marked steady; its pages are all copied, so
    // the runs it lists verify.
    let meta = Meta {
        flags: format::MF_STEADY,
        last_steady: m.txnid,
        ..m.clone()
    };
    let mut page0 = vec![0u8; ps as usize];
    page0[..SECTOR].copy_from_slice(&meta.encode());
    f.write_all(&page0)
        .map_err(|e| Error::io("writing the copy", e))?;
    let chunk = 256u64;
    let mut pg = 1;
    while pg < m.npages {
        let n = chunk.min(m.npages - pg);
        let b = snap.storage.bytes(pg * ps, (n * ps) as usize)?;
        f.write_all(b)
            .map_err(|e| Error::io("writing the copy", e))?;
        pg += n;
    }
    f.sync_all().map_err(|e| Error::io("flushing the copy", e))
}

fn compact_copy(txn: &RoTxn<'_>, dest: &Path) -> Result<()> {
    let src_env = txn.env();
    let out = Env::options()
        .page_size(src_env.page_size())
        .durability(Durability::Lazy)
        .max_dbs(src_env.inner.opts.max_dbs)
        .no_subdir(true)
        // A compacted copy is never larger than its source; reserving address space to
        // match (not the default 1 TiB) lets copies work where address space is limited
        // (ulimit -v, valgrind).
        .map_reserve((src_env.inner.storage.len() * 2).max(64 << 20))
        .open(dest)?;
    {
        let mut w = out.write_txn()?;
        let main_flags = DbFlags::from_bits_retain(u32::from(txn.snapshot().meta.main.flags));
        let main = w.create_db(None, main_flags | DbFlags::CREATE)?;
        for item in txn.iter(src_env.main_db())? {
            let (k, v) = item?;
            w.put(main, k, v, PutFlags::APPEND | PutFlags::APPEND_DUP)?;
        }
        for name in txn.db_names()? {
            let sdb = txn.open_db(Some(&name))?;
            let flags = src_env.inner.db_flags(sdb.idx as usize);
            let ddb = w.create_db(Some(&name), flags | DbFlags::CREATE)?;
            for item in txn.iter(sdb)? {
                let (k, v) = item?;
                w.put(ddb, k, v, PutFlags::APPEND | PutFlags::APPEND_DUP)?;
            }
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

impl Env {
    /// Writes a consistent copy of the current snapshot to `path` (a new data file) while
    /// writers go on. `compact` rewrites every database densely, leaving out free pages.
    pub fn copy_to(&self, path: impl AsRef<Path>, compact: bool) -> Result<()> {
        let r = self.read_txn()?;
        r.copy_to_file(path.as_ref(), compact)
    }
}
