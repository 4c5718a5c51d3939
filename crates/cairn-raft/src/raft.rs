//! openraft behind Cairn's names: the type configuration and the aliases every other module
//! uses. This is the one place that spells openraft's generic types; a new openraft release
//! is absorbed here and in the trait implementations (log.rs, sm.rs, snapshot.rs), nowhere
//! else. openraft is pinned to `=0.9.25` (Cargo.toml; docs/replication.md, "Pieces").

use crate::types::{Request, Response};

openraft::declare_raft_types!(
    /// Cairn-Raft's openraft type configuration: write batches in, per-batch outcomes out,
    /// `u64` node ids, snapshots streamed from a file.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        // A snapshot is a Cairn data file; openraft reads and writes it in chunks, so a
        // snapshot of any size never sits in memory (docs/replication.md, "Snapshots").
        SnapshotData = tokio::fs::File,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A node's id within its cluster.
pub type NodeId = u64;
/// A node's address book entry.
pub type Node = openraft::BasicNode;
/// A log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// What a log entry carries.
pub type EntryPayload = openraft::EntryPayload<TypeConfig>;
/// A log entry's identity: leader term and index.
pub type LogId = openraft::LogId<NodeId>;
/// The persistent vote.
pub type Vote = openraft::Vote<NodeId>;
/// A membership configuration with the id of the log entry that set it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
/// A snapshot's metadata.
pub type SnapshotMeta = openraft::SnapshotMeta<NodeId, Node>;
/// A snapshot: metadata and a handle to its data.
pub type Snapshot = openraft::Snapshot<TypeConfig>;
/// The error every storage call returns; openraft stops the node on it.
pub type StorageError = openraft::StorageError<NodeId>;
/// The log's bounds.
pub type LogState = openraft::LogState<TypeConfig>;
/// A Raft node of this configuration.
pub type Raft = openraft::Raft<TypeConfig>;

pub use openraft::{BasicNode, Config, Membership, RaftMetrics, ServerState, SnapshotPolicy};

/// openraft's storage-level types for the modules implementing its traits.
pub(crate) mod storage {
    pub use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine};
    pub use openraft::{
        AnyError, EntryPayload, ErrorSubject, ErrorVerb, OptionalSend, RaftLogReader,
        RaftSnapshotBuilder, StorageIOError,
    };
}

/// openraft's storage traits and conformance suite, for tests that drive the storage
/// directly as openraft would.
pub mod testing {
    pub use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
    pub use openraft::testing::{log_id, StoreBuilder, Suite};
    pub use openraft::{RaftLogReader, RaftSnapshotBuilder};
}
