//! The Raft log and vote in the node's environment: openraft's `RaftLogStorage` and
//! `RaftLogReader`.
//!
//! Invariants:
//! - `raft.log` holds a run of consecutive indexes (keys are big-endian, so key order is
//!   index order): appends extend it at the end, `truncate` cuts an end, `purge` a start.
//! - `raft.meta/purged` is the last purged log id, written in the transaction that deletes the
//!   entries, so the log's lower bound survives an empty log and a crash.
//! - Every write but `save_committed` is one durable Cairn commit (`commit_durable`: a
//!   logged commit, its record flushed), finished before the call returns (and, for an append, before openraft's
//!   flush callback fires); Cairn's single writer serializes them. `save_committed` commits
//!   without a flush: the value is advisory (store.rs, `env_options`).

use crate::raft::storage::{
    ErrorSubject, ErrorVerb, LogFlushed, OptionalSend, RaftLogReader, RaftLogStorage,
    StorageIOError,
};
use crate::raft::{Entry, LogId, LogState, StorageError, TypeConfig, Vote};
use crate::store::{commit_durable, db, err, Res, Shared, LOG_DB, META_DB};
use crate::types::{decode, encode};
use cairn::{Env, PutFlags};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

/// The log store of one node (cheap to clone: a handle to the node's shared storage).
#[derive(Clone)]
pub struct LogStore {
    pub(crate) shared: Arc<Shared>,
}

fn key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The half-open index range `[start, end)` of `range` (`end: None`: unbounded).
fn bounds(range: &impl RangeBounds<u64>) -> (u64, Option<u64>) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.checked_add(1),
        Bound::Excluded(&e) => Some(e),
        Bound::Unbounded => None,
    };
    (start, end)
}

fn read_meta<T: serde::de::DeserializeOwned>(env: &Env, name: &[u8]) -> Res<Option<T>> {
    let r = env.read_txn().map_err(err)?;
    let meta = r.open_db(Some(META_DB)).map_err(err)?;
    match r.get(meta, name).map_err(err)? {
        Some(v) => Ok(Some(decode(v).map_err(crate::store::msg)?)),
        None => Ok(None),
    }
}

/// Writes `raft.meta/name`; flushed before returning when `durable`.
fn write_meta<T: serde::Serialize>(env: &Env, name: &[u8], v: &T, durable: bool) -> Res<()> {
    let bytes = encode(v).map_err(crate::store::msg)?;
    let mut w = env.write_txn().map_err(err)?;
    let meta = db(&mut w, META_DB).map_err(err)?;
    w.put(meta, name, &bytes, PutFlags::empty()).map_err(err)?;
    if durable {
        commit_durable(w).map_err(err)
    } else {
        w.commit_no_sync().map_err(err)
    }
}

/// The entries with indexes in `[start, end)`.
pub(crate) fn read_entries(env: &Env, start: u64, end: Option<u64>) -> Res<Vec<Entry>> {
    let r = env.read_txn().map_err(err)?;
    let log = r.open_db(Some(LOG_DB)).map_err(err)?;
    let lo = key(start);
    let hi = end.map(key);
    let upper = match &hi {
        Some(h) => Bound::Excluded(&h[..]),
        None => Bound::Unbounded,
    };
    let mut out = Vec::new();
    for item in r
        .range(log, (Bound::Included(&lo[..]), upper))
        .map_err(err)?
    {
        let (_, v) = item.map_err(err)?;
        out.push(decode(v).map_err(crate::store::msg)?);
    }
    Ok(out)
}

/// Deletes the log entries with indexes in `[start, end)` in `w`.
fn delete_range(w: &mut cairn::RwTxn<'_>, start: u64, end: Option<u64>) -> Res<()> {
    let log = db(w, LOG_DB).map_err(err)?;
    let lo = key(start);
    let hi = end.map(key);
    let upper = match &hi {
        Some(h) => Bound::Excluded(&h[..]),
        None => Bound::Unbounded,
    };
    // The keys are collected first: the iterator borrows the transaction the deletes change.
    let keys: Vec<Vec<u8>> = w
        .range(log, (Bound::Included(&lo[..]), upper))
        .map_err(err)?
        .map(|item| item.map(|(k, _)| k.to_vec()))
        .collect::<cairn::Result<_>>()
        .map_err(err)?;
    for k in keys {
        w.delete(log, &k).map_err(err)?;
    }
    Ok(())
}

fn read_err(e: openraft::AnyError) -> StorageError {
    StorageIOError::read_logs(e).into()
}

fn write_err(e: openraft::AnyError) -> StorageError {
    StorageIOError::write_logs(e).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (start, end) = bounds(&range);
        self.shared
            .blocking(move |s| {
                s.with_env(|env| read_entries(env, start, end))
                    .map_err(read_err)
            })
            .await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState, StorageError> {
        self.shared
            .blocking(|s| {
                s.with_env(|env| {
                    let purged: Option<LogId> = read_meta(env, b"purged")?;
                    let r = env.read_txn().map_err(err)?;
                    let log = r.open_db(Some(LOG_DB)).map_err(err)?;
                    let last = match r.iter(log).map_err(err)?.next_back() {
                        Some(item) => {
                            let (_, v) = item.map_err(err)?;
                            let e: Entry = decode(v).map_err(crate::store::msg)?;
                            Some(e.log_id)
                        }
                        None => purged,
                    };
                    Ok(LogState {
                        last_purged_log_id: purged,
                        last_log_id: last,
                    })
                })
                .map_err(read_err)
            })
            .await
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let vote = *vote;
        self.shared
            .blocking(move |s| {
                s.with_env(|env| write_meta(env, b"vote", &vote, true))
                    .map_err(|e| StorageIOError::write_vote(e).into())
            })
            .await
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        self.shared
            .blocking(|s| {
                s.with_env(|env| read_meta(env, b"vote"))
                    .map_err(|e| StorageIOError::read_vote(e).into())
            })
            .await
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        self.shared
            .blocking(move |s| {
                // Not flushed: openraft uses it only to apply sooner after a restart, and
                // an older value (one lost to a power loss) only means re-learning the
                // commit index from the leader. A flush here was one of three per entry.
                s.with_env(|env| write_meta(env, b"committed", &committed, false))
                    .map_err(|e| {
                        StorageIOError::new(ErrorSubject::Store, ErrorVerb::Write, e).into()
                    })
            })
            .await
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        self.shared
            .blocking(|s| {
                s.with_env(|env| read_meta::<Option<LogId>>(env, b"committed"))
                    .map(Option::flatten)
                    .map_err(|e| {
                        StorageIOError::new(ErrorSubject::Store, ErrorVerb::Read, e).into()
                    })
            })
            .await
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let res = self
            .shared
            .blocking(move |s| {
                s.with_env(|env| {
                    let mut w = env.write_txn().map_err(err)?;
                    let log = db(&mut w, LOG_DB).map_err(err)?;
                    for e in &entries {
                        let v = encode(e).map_err(crate::store::msg)?;
                        w.put(log, &key(e.log_id.index), &v, PutFlags::empty())
                            .map_err(err)?;
                    }
                    commit_durable(w).map_err(err)
                })
                .map_err(write_err)
            })
            .await;
        // The commit above was durable: the entries are readable and flushed at once, so the
        // callback fires here, after the commit, never before.
        match &res {
            Ok(()) => callback.log_io_completed(Ok(())),
            Err(e) => callback.log_io_completed(Err(std::io::Error::other(e.to_string()))),
        }
        res
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.shared
            .blocking(move |s| {
                s.with_env(|env| {
                    let mut w = env.write_txn().map_err(err)?;
                    delete_range(&mut w, log_id.index, None)?;
                    commit_durable(w).map_err(err)
                })
                .map_err(write_err)
            })
            .await
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.shared
            .blocking(move |s| {
                s.with_env(|env| {
                    let mut w = env.write_txn().map_err(err)?;
                    delete_range(&mut w, 0, log_id.index.checked_add(1))?;
                    let meta = db(&mut w, META_DB).map_err(err)?;
                    let v = encode(&log_id).map_err(crate::store::msg)?;
                    w.put(meta, b"purged", &v, PutFlags::empty()).map_err(err)?;
                    commit_durable(w).map_err(err)
                })
                .map_err(write_err)
            })
            .await
    }
}
