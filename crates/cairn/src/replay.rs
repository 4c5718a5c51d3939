//! Replaying the commit log at open (docs/design.md, "Logged commits"): the first handle to
//! open an environment applies the log's records that follow the recovered commit, in one write
//! transaction on a private handle over the same storage, and makes the result steady before
//! any other handle can see the file.
//!
//! Invariants:
//! - Only records of the recovered commit's epoch (its last steady txnid) that chain from the
//!   recovered commit are applied: the first one's base is the recovered txnid, each next one's
//!   base the previous one's txnid. Records at or below the recovered commit are in the data
//!   file already.
//! - A record that does not apply as recorded (a database missing, a delete of nothing) is
//!   damage: `Error::Corrupted`, and nothing is served.
//! - The walk reads at most the log's length (each record is at least a header long).

use crate::db::{Database, PutFlags};
use crate::error::{Error, Result};
use crate::format::Meta;
use crate::options::{Durability, EnvOptions};
use crate::state::Env;
use crate::storage::Storage;
use crate::wal::{self, Body, Link, Op};
use std::sync::Arc;

/// The records to replay onto `meta`, in order.
pub(crate) fn pending(log: &dyn Storage, meta: &Meta) -> Result<Vec<Vec<u8>>> {
    let epoch = meta.steady_txnid();
    let at = Link::of(meta);
    let mut tip = Link {
        txnid: epoch,
        fp: if meta.txnid == epoch { at.fp } else { 0 },
    };
    let mut off = 0u64;
    let mut out = Vec::new();
    // Each record is at least a header long: bounded by the log's length.
    while let Some((h, rec)) = wal::read(log, off, epoch)? {
        if !tip.leads_to(h.base) {
            break;
        }
        off += h.len();
        tip = h.own;
        if h.base.txnid < meta.txnid {
            continue; // in the data file already
        }
        if out.is_empty() && h.base != at {
            // The chain passes the recovered commit without naming it (another commit with
            // its txnid): nothing of it applies to this state.
            break;
        }
        out.push(rec);
    }
    Ok(out)
}

/// Replays the log onto the recovered commit `meta`; returns the commit to open at (a new
/// steady one when anything was replayed).
pub(crate) fn replay(
    storage: &Arc<dyn Storage>,
    log: &dyn Storage,
    opts: &EnvOptions,
    meta: Meta,
) -> Result<Meta> {
    let records = pending(log, &meta)?;
    if records.is_empty() {
        return Ok(meta);
    }
    if opts.read_only {
        return Err(Error::Invalid(format!(
            "the commit log holds {} commit(s) past the data file's last flushed one; open the \
             environment read-write once to replay them",
            records.len()
        )));
    }
    let mut tmp = opts.clone();
    tmp.durability = Durability::Lazy;
    tmp.sync_every = None;
    tmp.sync_bytes = None;
    tmp.max_dbs = tmp.max_dbs.max(1024);
    let env = Env::with_storage(storage.clone(), tmp)?;
    let mut w = env.write_txn()?;
    for rec in &records {
        apply(&mut w, rec).map_err(|e| {
            let txnid = u64::from_le_bytes(rec[24..32].try_into().expect("header"));
            Error::corrupted(format!(
                "commit log: the record of transaction {txnid} does not apply: {e}"
            ))
        })?;
    }
    w.commit_steady()?;
    drop(env);
    let (meta, _) = crate::recover::recover(&**storage)?;
    Ok(meta)
}

fn apply(w: &mut crate::txn::RwTxn<'_>, rec: &[u8]) -> Result<()> {
    let mut body = Body::parse(rec)?;
    let mut dbs: Vec<Database> = Vec::with_capacity(body.names.len());
    for name in &body.names {
        let db = if name.is_empty() {
            w.open_db(None)?
        } else {
            let name = std::str::from_utf8(name)
                .map_err(|_| Error::corrupted("database name is not UTF-8"))?;
            w.open_db(Some(name))?
        };
        dbs.push(db);
    }
    // Each op consumes at least nine bytes of the record: bounded by its length.
    while let Some(op) = body.next_op()? {
        match op {
            Op::Put(d, k, v) => w.put(dbs[d], k, v, PutFlags::empty())?,
            Op::Delete(d, k) => {
                if !w.delete(dbs[d], k)? {
                    return Err(Error::corrupted("a deleted key is absent"));
                }
            }
            Op::DeletePair(d, k, v) => {
                if !w.delete_pair(dbs[d], k, v)? {
                    return Err(Error::corrupted("a deleted pair is absent"));
                }
            }
        }
    }
    Ok(())
}
