//! The state machine: client write batches applied to the node's environment, openraft's
//! `RaftStateMachine`.
//!
//! Invariants:
//! - One call to `apply` is one write transaction: the entries' operations, then
//!   `raft.sm/applied` (the last entry's log id) and, when an entry changed membership,
//!   `raft.sm/membership`; then one commit, not flushed. A crash leaves all of it or none
//!   (a power loss may drop the unflushed applies, together with their `applied`), so after
//!   a restart openraft re-applies exactly the entries after `applied`, which are still in
//!   the flushed log: every log write that could remove them (purge, an install) is a
//!   flushed commit made after the apply, so it flushes the apply too (apply is idempotent
//!   across crashes; docs/replication.md).
//! - A refused batch (a reserved or empty database name, a key or value Cairn refuses)
//!   changes nothing and is refused on every replica alike: the checks depend only on the
//!   request and on limits every replica shares. Any other Cairn error is a storage error,
//!   which stops the node (openraft treats state-machine errors as fatal).

use crate::ext::Extension;
use crate::raft::storage::{EntryPayload, OptionalSend, RaftStateMachine, StorageIOError};
use crate::raft::TypeConfig;
use crate::raft::{Entry, LogId, Snapshot, SnapshotMeta, StorageError, StoredMembership};
use crate::snapshot::SnapshotBuilder;
use crate::store::{db, err, msg, Res, Shared, SM_DB};
use crate::types::{check_ops, decode, encode, Op, Request, Response};
use cairn::{PutFlags, RoTxn, RwTxn};
use std::sync::Arc;

/// The state machine of one node (a handle to the node's shared storage).
pub struct StateMachine {
    pub(crate) shared: Arc<Shared>,
}

/// The last applied log id and membership as the read transaction `r` sees them.
pub(crate) fn read_applied(r: &RoTxn<'_>) -> Res<(Option<LogId>, StoredMembership)> {
    let sm = r.open_db(Some(SM_DB)).map_err(err)?;
    let applied = match r.get(sm, b"applied").map_err(err)? {
        Some(v) => decode(v).map_err(msg)?,
        None => None,
    };
    let membership = match r.get(sm, b"membership").map_err(err)? {
        Some(v) => decode(v).map_err(msg)?,
        None => StoredMembership::default(),
    };
    Ok((applied, membership))
}

/// Whether a Cairn error refuses the batch (the same on every replica) rather than failing
/// the node: the request's own shape against limits all replicas share.
fn is_refusal(e: &cairn::Error) -> bool {
    use cairn::Error::*;
    matches!(
        e,
        KeyTooLarge { .. } | ValueTooLarge { .. } | Invalid(_) | Incompatible { .. }
    )
}

/// Applies one client batch in a nested transaction of `w`, so a refusal part-way leaves
/// nothing of it. `Err` is a storage failure; a refusal is `Ok(Some(why))`.
fn apply_batch(w: &mut RwTxn<'_>, ops: &[Op]) -> Res<Option<String>> {
    if let Err(why) = check_ops(ops) {
        return Ok(Some(why));
    }
    let mut n = w.nested().map_err(err)?;
    let mut run = || -> cairn::Result<()> {
        for op in ops {
            match &op.value {
                Some(v) => {
                    let d = n.create_db(Some(&op.db), cairn::DbFlags::CREATE)?;
                    n.put(d, &op.key, v, PutFlags::empty())?;
                }
                None => match n.open_db(Some(&op.db)) {
                    Ok(d) => {
                        n.delete(d, &op.key)?;
                    }
                    // Deleting from a database never written is deleting nothing.
                    Err(cairn::Error::DbNotFound { .. }) => {}
                    Err(e) => return Err(e),
                },
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => {
            n.commit().map_err(err)?;
            Ok(None)
        }
        Err(e) if is_refusal(&e) => {
            n.abort();
            Ok(Some(e.to_string()))
        }
        Err(e) => Err(err(e)),
    }
}

/// Applies one client request: a batch, or a group of batches each applied on its own.
fn apply_request(w: &mut RwTxn<'_>, req: &Request, ext: Option<&dyn Extension>) -> Res<Response> {
    match req {
        Request::Write(ops) => Ok(Response {
            error: apply_batch(w, ops)?,
            ..Response::default()
        }),
        Request::Group(batches) => {
            let mut out = Vec::with_capacity(batches.len());
            for ops in batches {
                out.push(apply_batch(w, ops)?);
            }
            Ok(Response {
                batches: out,
                ..Response::default()
            })
        }
        Request::Ext { name, payload } => apply_ext(w, name, payload, ext),
    }
}

/// Applies an extension entry in a nested transaction of `w` (src/ext.rs's contract); an
/// entry for an extension this node lacks is a storage error.
fn apply_ext(
    w: &mut RwTxn<'_>,
    name: &str,
    payload: &[u8],
    ext: Option<&dyn Extension>,
) -> Res<Response> {
    let ext = ext.filter(|x| x.name() == name).ok_or_else(|| {
        msg(format!(
            "an entry for extension {name:?}, which this node lacks"
        ))
    })?;
    let mut n = w.nested().map_err(err)?;
    match ext.apply(&mut n, payload).map_err(err)? {
        Ok(data) => {
            n.commit().map_err(err)?;
            Ok(Response {
                data,
                ..Response::default()
            })
        }
        Err(why) => {
            n.abort();
            Ok(Response::refused(why))
        }
    }
}

/// Applies `entries` in one transaction, committed without a flush (see the module's
/// invariants).
pub(crate) fn apply_entries(
    env: &cairn::Env,
    entries: &[Entry],
    ext: Option<&dyn Extension>,
) -> Res<Vec<Response>> {
    let mut w = env.write_txn().map_err(err)?;
    let sm = db(&mut w, SM_DB).map_err(err)?;
    let mut out = Vec::with_capacity(entries.len());
    let mut membership = None;
    for e in entries {
        match &e.payload {
            EntryPayload::Blank => out.push(Response::default()),
            EntryPayload::Normal(req) => out.push(apply_request(&mut w, req, ext)?),
            EntryPayload::Membership(m) => {
                membership = Some(StoredMembership::new(Some(e.log_id), m.clone()));
                out.push(Response::default());
            }
        }
    }
    if let Some(last) = entries.last() {
        let v = encode(&Some(last.log_id)).map_err(msg)?;
        w.put(sm, b"applied", &v, PutFlags::empty()).map_err(err)?;
    }
    if let Some(m) = membership {
        let v = encode(&m).map_err(msg)?;
        w.put(sm, b"membership", &v, PutFlags::empty())
            .map_err(err)?;
    }
    // Not flushed (see the module's invariants): the entries are durable in the log, on a
    // majority, before openraft applies them. A flush here was one of three per entry.
    w.commit_no_sync().map_err(err)?;
    Ok(out)
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), StorageError> {
        self.shared
            .blocking(|s| {
                s.with_env(|env| {
                    let r = env.read_txn().map_err(err)?;
                    read_applied(&r)
                })
                .map_err(|e| StorageIOError::read_state_machine(e).into())
            })
            .await
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        self.shared
            .blocking(move |s| {
                let ext = s.extension.get().map(|x| &**x);
                s.with_env(|env| apply_entries(env, &entries, ext))
                    .map_err(|e| StorageIOError::write_state_machine(e).into())
            })
            .await
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder {
        SnapshotBuilder {
            shared: Arc::clone(&self.shared),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<tokio::fs::File>, StorageError> {
        crate::snapshot::begin_receiving(&self.shared).await
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta,
        snapshot: Box<tokio::fs::File>,
    ) -> Result<(), StorageError> {
        crate::snapshot::install(&self.shared, meta, snapshot).await
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, StorageError> {
        crate::snapshot::current(&self.shared).await
    }
}
