//! The replicated request (a write batch), its response, and the byte encoding of everything
//! Cairn-Raft stores.
//!
//! Invariant: a stored value decodes with the encoding named by `raft.meta/format`
//! ([`FORMAT`]); the encoding is postcard (docs/replication.md, "Encoding"), which is not
//! self-describing, so changing a stored type's fields means a new format number.

use serde::{de::DeserializeOwned, Deserialize, Serialize};

/// The version of the stored encoding, kept in `raft.meta/format`.
pub const FORMAT: u32 = 1;

/// Prefix of the databases Cairn-Raft keeps for itself; client batches may not touch them.
pub const RESERVED_PREFIX: &str = "raft.";

/// One operation of a write batch: a put (`value: Some`) or a delete (`value: None`) of `key`
/// in the named database `db` (created by its first put).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// Name of the database; not empty and not starting with [`RESERVED_PREFIX`].
    pub db: String,
    /// The key.
    pub key: Vec<u8>,
    /// The value to put, or `None` to delete the key.
    pub value: Option<Vec<u8>>,
}

impl Op {
    /// A put of `key` = `value` in `db`.
    pub fn put(db: &str, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Op {
        Op {
            db: db.to_string(),
            key: key.into(),
            value: Some(value.into()),
        }
    }

    /// A delete of `key` in `db`.
    pub fn delete(db: &str, key: impl Into<Vec<u8>>) -> Op {
        Op {
            db: db.to_string(),
            key: key.into(),
            value: None,
        }
    }
}

/// The replicated request: a write batch, applied atomically (all its operations in one
/// transaction) on every replica. An enum so that later request kinds (the document
/// operations of `cairn serve`) are new variants, leaving this one's encoding unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Puts and deletes, applied in order.
    Write(Vec<Op>),
    /// Several clients' write batches in one log entry (the leader groups the batches that
    /// arrive while earlier entries are being appended: group.rs). Each batch is applied as a
    /// `Write` would be, atomically and refused on its own, in order; the entry's response
    /// holds one outcome per batch. Added after `Write`, so `Write`'s encoding is unchanged.
    Group(Vec<Vec<Op>>),
    /// An entry for the extension named `name` (src/ext.rs), applied by it. Added after
    /// `Group`, so the earlier variants' encodings are unchanged.
    Ext {
        /// The extension's name.
        name: String,
        /// What the extension decodes.
        payload: Vec<u8>,
    },
}

/// Why the write batch `ops` must be refused (see [`Request::check`]).
pub(crate) fn check_ops(ops: &[Op]) -> Result<(), String> {
    for op in ops {
        if op.db.is_empty() {
            return Err("an empty database name".to_string());
        }
        if op.db.starts_with(RESERVED_PREFIX) {
            return Err(format!(
                "database {:?}: names starting with {RESERVED_PREFIX:?} are reserved",
                op.db
            ));
        }
    }
    Ok(())
}

impl Request {
    /// Why this request must be refused, checked by the client side before proposing and by
    /// apply again (so that a request built by other means is refused alike everywhere). A
    /// group is refused as a whole only here, before proposing; apply checks its batches one
    /// by one.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Request::Write(ops) => check_ops(ops),
            Request::Group(batches) => batches.iter().try_for_each(|ops| check_ops(ops)),
            Request::Ext { .. } => Ok(()),
        }
    }
}

/// The outcome of one applied log entry, as the client that proposed it sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// `None`: the batch was applied. `Some(why)`: it was refused and changed nothing (the
    /// refusal is deterministic, so every replica refused it). Blank and membership entries
    /// answer `None`. For a [`Request::Group`] entry: always `None`, the outcomes are in
    /// `batches`.
    pub error: Option<String>,
    /// For a [`Request::Group`] entry, the outcome of each batch in order (as `error` is for
    /// one batch); empty for every other entry.
    pub batches: Vec<Option<String>>,
    /// An applied extension entry's answer (empty for every other entry).
    pub data: Vec<u8>,
}

impl Response {
    /// The answer of a refused entry or batch.
    pub(crate) fn refused(why: String) -> Response {
        Response {
            error: Some(why),
            ..Response::default()
        }
    }
}

/// Encodes a stored value.
pub(crate) fn encode<T: Serialize>(v: &T) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(v).map_err(|e| format!("encoding: {e}"))
}

/// Decodes a stored value.
pub(crate) fn decode<T: DeserializeOwned>(b: &[u8]) -> Result<T, String> {
    postcard::from_bytes(b).map_err(|e| format!("decoding: {e}"))
}
