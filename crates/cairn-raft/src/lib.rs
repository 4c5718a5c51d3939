//! # cairn-raft
//!
//! Cairn as the storage of an openraft node: the Raft log, the vote and the replicated state
//! machine in one Cairn environment. The design, and what a client is promised, is in
//! docs/replication.md.
//!
//! Invariants (each module states its own in detail):
//! - One environment per node holds `raft.log`, `raft.meta`, `raft.sm` and the client
//!   databases; `CURRENT` names it and changes only by rename (store.rs).
//! - Applied entries, the applied log id and the membership are written by one commit
//!   (sm.rs), so apply is idempotent across crashes.
//! - A snapshot is a hot copy whose metadata comes from the copy's own read transaction; an
//!   install keeps the node's log and vote and swaps environments under an exclusive hold of
//!   the shared handle (snapshot.rs).
//! - A stale-bounded read on a follower answers only from a state at least as new as its
//!   leader's commit index as of an append-entries it accepted within the bound (fresh.rs).
//! - openraft's types are named in `raft` (and used by the trait implementations only): its
//!   API changes are absorbed there.
//!
//! ```no_run
//! let storage = cairn_raft::Storage::open(std::path::Path::new("node1"))?;
//! let (log, sm) = (storage.log_store(), storage.state_machine());
//! // Hand `log` and `sm` to `cairn_raft::raft::Raft::new` with a network; read applied data
//! // through `storage.get`.
//! # Ok::<(), cairn_raft::Error>(())
//! ```

// The errors are openraft's `StorageError` (224 bytes) and its `AnyError` payload: the trait
// signatures fix them, so boxing them inside the crate would only add a conversion.
#![allow(clippy::result_large_err)]

pub mod cluster;
pub mod ext;
mod fresh;
mod group;
pub mod history;
mod log;
pub mod memnet;
pub mod net;
mod node;
pub mod raft;
mod sm;
mod snapshot;
mod store;
mod types;

pub use fresh::{Freshness, TooStale};
pub use log::LogStore;
pub use node::{Node, Written};
pub use sm::StateMachine;
pub use snapshot::SnapshotBuilder;
pub use types::{Op, Request, Response, FORMAT, RESERVED_PREFIX};

use std::path::Path;
use std::sync::Arc;

/// An error of Cairn-Raft's own calls (opening a node's storage, reads, writes).
#[derive(Debug)]
pub struct Error {
    inner: openraft::AnyError,
    leader: Option<raft::NodeId>,
    stale: Option<TooStale>,
}

impl Error {
    /// For a write or a linearizable read refused by a node that is not the leader: the
    /// leader it knows, to retry on.
    pub fn leader(&self) -> Option<raft::NodeId> {
        self.leader
    }

    /// For a bounded read ([`Node::read_bounded`]) this node refused: why it cannot show that
    /// its state is within the bound. A client may retry on the leader.
    pub fn too_stale(&self) -> Option<TooStale> {
        self.stale
    }
}

impl From<TooStale> for Error {
    fn from(s: TooStale) -> Error {
        Error {
            inner: openraft::AnyError::new(&s),
            leader: None,
            stale: Some(s),
        }
    }
}

impl From<openraft::AnyError> for Error {
    fn from(inner: openraft::AnyError) -> Error {
        Error {
            inner,
            leader: None,
            stale: None,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl std::error::Error for Error {}

/// One node's storage: the directory holding its environment and snapshots.
#[derive(Clone)]
pub struct Storage {
    shared: Arc<store::Shared>,
}

impl Storage {
    /// Opens (creating if needed) the node directory `dir`.
    pub fn open(dir: &Path) -> Result<Storage, Error> {
        Ok(Storage {
            shared: store::open(dir).map_err(Error::from)?,
        })
    }

    /// The log store to give openraft.
    pub fn log_store(&self) -> LogStore {
        LogStore {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The state machine to give openraft.
    pub fn state_machine(&self) -> StateMachine {
        StateMachine {
            shared: Arc::clone(&self.shared),
        }
    }

    /// The value of `key` in database `db` as this node has applied it: a local read, as
    /// fresh as this replica (docs/replication.md, "What a client is promised").
    pub fn get(&self, db: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.shared.with_env(|env| {
            let r = env.read_txn().map_err(store::err).map_err(Error::from)?;
            let d = match r.open_db(Some(db)) {
                Ok(d) => d,
                Err(cairn::Error::DbNotFound { .. }) => return Ok(None),
                Err(e) => return Err(Error::from(store::err(e))),
            };
            Ok(r.get(d, key)
                .map_err(store::err)
                .map_err(Error::from)?
                .map(<[u8]>::to_vec))
        })
    }

    /// Every key and value of database `db` as this node has applied it (empty if the
    /// database does not exist): a local read of one consistent state.
    #[allow(clippy::type_complexity)]
    pub fn scan(&self, db: &str) -> Result<Vec<(Vec<u8>, Vec<u8>)>, Error> {
        self.shared.with_env(|env| {
            let r = env.read_txn().map_err(store::err).map_err(Error::from)?;
            let d = match r.open_db(Some(db)) {
                Ok(d) => d,
                Err(cairn::Error::DbNotFound { .. }) => return Ok(Vec::new()),
                Err(e) => return Err(Error::from(store::err(e))),
            };
            let mut out = Vec::new();
            for item in r.iter(d).map_err(store::err).map_err(Error::from)? {
                let (k, v) = item.map_err(store::err).map_err(Error::from)?;
                out.push((k.to_vec(), v.to_vec()));
            }
            Ok(out)
        })
    }

    /// Runs `f` with this node's live environment (a layer above reading its applied state in
    /// transactions of its own: the document routes of `cairn serve --cluster`). The handle
    /// is held shared meanwhile, so a snapshot install waits for `f`: keep `f` short, and
    /// write nothing (writes go through the log). Database handles opened in `f` are good only
    /// inside it: an install swaps the environment.
    pub fn with_env<R>(&self, f: impl FnOnce(&cairn::Env) -> R) -> R {
        self.shared.with_env(f)
    }

    /// The last log id applied on this node.
    pub fn applied(&self) -> Result<Option<raft::LogId>, Error> {
        self.shared.with_env(|env| {
            let r = env.read_txn().map_err(store::err).map_err(Error::from)?;
            Ok(sm::read_applied(&r).map_err(Error::from)?.0)
        })
    }
}
