//! `cairn serve --cluster`: the document operations replicated through cairn-raft
//! (docs/serve-cluster.md). This module is the state machine's `doc` extension (cairn-raft's
//! src/ext.rs): the log entry ([`DocWrite`]), how every replica applies it, and its answer.
//! The routes that propose entries and read replicas are in `routes`, the process in `serve`.
//!
//! Invariants:
//! - Apply is deterministic: it reads no clock, draws no id and runs no thread. The time that
//!   stamps feed records and cuts age-bounded trimming (`at_ms`) and the id of every `POST`
//!   and of every bulk item without one are decided once, by the route on the leader, and
//!   travel in the entry.
//! - Apply runs the single-node server's own write functions (`store::put`, `delete`, `bulk`,
//!   with the entry's time) in the nested transaction cairn-raft gives it, so a replicated write changes
//!   exactly what the same request changes on `cairn serve`.
//! - A refusal is what the single-node server answers with a 4xx status (a failed If-Match,
//!   a missing document, a unique violation, a bad id, a document too large), plus too many
//!   collections: all depend only on the entry and on the replica's state and limits, which
//!   every replica shares (cairn-raft pins the page size and `max_dbs`). It is the entry's
//!   answer and changes nothing. Any other failure (the disk, a full map) is a storage error
//!   and stops the node, as it does for cairn-raft's own batches.
//! - An index build is a sequence of `BuildStep` entries, proposed by whichever node leads
//!   (module `routes`: after a declaration, and for every index found Building by a new
//!   leader), each applied at one log position on every replica; no replica builds on its
//!   own. A step from a deposed leader is harmless: committed, it advances every replica
//!   alike; otherwise it is truncated away.
//! - No collection handle outlives one apply: a snapshot install swaps the environment, and
//!   a handle opened before would name another environment's databases.
//! - The encoding is postcard (cairn-raft's), which is not self-describing: the types below
//!   (and `store::Preconditions`, `decode::Condition`, `decode::BulkOp`) only ever gain
//!   variants at the end; a changed field is a new variant.

pub mod routes;
pub mod serve;

use crate::decode::{self, BulkItem, BulkOp};
use crate::error::{ApiError, TOO_MANY_COLLECTIONS};
use crate::routes::index_json;
use crate::store::{self, Colls, IdGen, Preconditions};
use axum::http::StatusCode;
use cairn::RwTxn;
use cairn_doc::{Collection, IndexSpec, IndexState};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The extension's name in `Request::Ext` entries.
pub const EXTENSION: &str = "doc";

/// Longest id apply accepts: cairn-doc's bound (the routes check the environment's, which is
/// not lower under cairn-raft's pinned page size).
const MAX_ID: usize = 255;

/// One replicated document write: the leader's clock when it proposed, and the operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DocWrite {
    /// Milliseconds since the Unix epoch, on the leader, when it proposed.
    pub at_ms: u64,
    /// What to write.
    pub op: DocOp,
}

/// The document operations that are log entries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DocOp {
    /// `PUT /{coll}/{id}`, and `POST /{coll}` with the id the leader drew.
    Put {
        /// The collection.
        coll: String,
        /// The document's id.
        id: String,
        /// The document's JSON text as the route validated it.
        body: Vec<u8>,
        /// If-Match / If-None-Match.
        pre: Preconditions,
    },
    /// `DELETE /{coll}/{id}`.
    Delete {
        /// The collection.
        coll: String,
        /// The document's id.
        id: String,
        /// If-Match / If-None-Match.
        pre: Preconditions,
    },
    /// `POST /{coll}/_bulk`: one entry, its items applied in order.
    Bulk {
        /// The collection.
        coll: String,
        /// The items, each with its id.
        items: Vec<BulkEntry>,
    },
    /// `PUT /{coll}/_index/{name}`: Ready at once on an empty collection, else Building
    /// (the leader then proposes [`DocOp::BuildStep`]s until it is not).
    DeclareIndex {
        /// The collection (created if missing, as on `cairn serve`).
        coll: String,
        /// The index's name.
        name: String,
        /// Its JSON pointer.
        path: String,
        /// At most one document per value.
        unique: bool,
    },
    /// `DELETE /{coll}/_index/{name}`.
    DropIndex {
        /// The collection.
        coll: String,
        /// The index's name.
        name: String,
    },
    /// One step of an index build: the next `batch` documents above the build cursor, at
    /// the same log position on every replica, so cursors, unique checks and the Ready or
    /// Failed outcome agree.
    BuildStep {
        /// The collection.
        coll: String,
        /// The index's name.
        name: String,
        /// Documents in this step.
        batch: u64,
    },
}

/// One item of a replicated bulk write: a bulk item whose id is decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BulkEntry {
    /// The document's id (drawn by the leader if the client gave none).
    pub id: String,
    /// Put, create or delete.
    pub op: BulkOp,
    /// The document's JSON text, for puts and creates.
    pub doc: Option<Vec<u8>>,
    /// Only if the stored version is this one.
    pub if_match: Option<u64>,
}

/// An applied entry's answer to its proposer (cairn-raft's `Response::data`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Answer {
    /// A put: the document's new version (its ETag), and whether it was created.
    Written {
        /// The new version.
        version: u64,
        /// The document did not exist before.
        created: bool,
    },
    /// A delete: the version the document had.
    Deleted {
        /// The version deleted.
        version: u64,
    },
    /// A bulk write: its `results` array as JSON text, one result per item.
    Bulk {
        /// The JSON array.
        results: Vec<u8>,
    },
    /// An index declared or built a step: its JSON as the index routes show it, and whether
    /// it is still Building.
    Index {
        /// `{"name", "path", "unique", "state", ...}`.
        json: Vec<u8>,
        /// Still Building: more steps are needed.
        building: bool,
    },
    /// An index dropped.
    Dropped,
}

/// The state machine's `doc` extension (register it with `cairn_raft::Node::start_with`).
#[derive(Debug, Default)]
pub struct DocExtension;

/// Encodes an entry's payload.
pub fn encode(w: &DocWrite) -> Result<Vec<u8>, ApiError> {
    postcard::to_stdvec(w)
        .map_err(|e| ApiError::internal("encoding a log entry").with_detail(json!(e.to_string())))
}

/// A refusal as it travels back to the proposer: `{"status", "error", "detail"}`.
fn refusal(e: &ApiError) -> String {
    json!({ "status": e.status.as_u16(), "error": e.error, "detail": e.detail }).to_string()
}

/// The proposer's side of [`refusal`]: the error the single-node server would answer.
pub fn refused(why: &str) -> ApiError {
    let v: serde_json::Value = serde_json::from_str(why).unwrap_or(serde_json::Value::Null);
    let status = v["status"]
        .as_u64()
        .and_then(|s| StatusCode::from_u16(s as u16).ok());
    match (status, v["error"].as_str()) {
        (Some(s), Some(e)) => ApiError::new(s, e).with_detail(v["detail"].clone()),
        // Refused by cairn-raft itself (not by this extension): a bug or a mismatch.
        _ => ApiError::internal("the write was refused").with_detail(json!(why)),
    }
}

/// Whether a write's error is a refusal every replica makes alike (module invariants).
fn is_refusal(e: &ApiError) -> bool {
    e.status.is_client_error() || e.error == TOO_MANY_COLLECTIONS
}

impl DocExtension {
    /// Applies one decoded entry in `txn`.
    fn run(&self, txn: &mut RwTxn<'_>, w: &DocWrite) -> Result<Answer, ApiError> {
        // No cache: collections are opened by name in this transaction (module invariants).
        let colls = Colls::default();
        match &w.op {
            DocOp::Put {
                coll,
                id,
                body,
                pre,
            } => {
                decode::address(coll, id, MAX_ID)?;
                let d = store::put(txn, &colls, coll, id, body, pre, w.at_ms)?;
                Ok(Answer::Written {
                    version: d.version,
                    created: d.created,
                })
            }
            DocOp::Delete { coll, id, pre } => {
                decode::address(coll, id, MAX_ID)?;
                let version = store::delete(txn, &colls, coll, id, pre, w.at_ms)?;
                Ok(Answer::Deleted { version })
            }
            DocOp::Bulk { coll, items } => {
                decode::collection(coll)?;
                let items: Vec<BulkItem> = items
                    .iter()
                    .map(|i| BulkItem {
                        id: Some(i.id.clone()),
                        op: i.op,
                        doc: i.doc.clone().map(Into::into),
                        if_match: i.if_match,
                    })
                    .collect();
                // Every item has its id: this generator is never drawn from.
                let none = IdGen::default();
                let r = store::bulk(txn, &colls, &none, coll, &items, MAX_ID, w.at_ms)?;
                Ok(Answer::Bulk {
                    results: serde_json::to_vec(&r).map_err(|e| {
                        ApiError::internal("bulk results").with_detail(json!(e.to_string()))
                    })?,
                })
            }
            DocOp::DeclareIndex {
                coll,
                name,
                path,
                unique,
            } => {
                decode::collection(coll)?;
                let spec = IndexSpec {
                    path: path.clone(),
                    unique: *unique,
                };
                let c = Collection::create(txn, coll).map_err(store::doc_error)?;
                let state = c
                    .declare_index(txn, name, spec.clone())
                    .map_err(store::doc_error)?;
                Ok(index_answer(name, &spec, &state))
            }
            DocOp::DropIndex { coll, name } => {
                let c = existing(txn, coll)?;
                match c.drop_index(txn, name).map_err(store::doc_error)? {
                    true => Ok(Answer::Dropped),
                    false => Err(ApiError::not_found("no such index")),
                }
            }
            DocOp::BuildStep { coll, name, batch } => {
                let c = existing(txn, coll)?;
                let batch = usize::try_from(*batch).unwrap_or(usize::MAX);
                let state = c.build_step(txn, name, batch).map_err(store::doc_error)?;
                let info = c
                    .index(&*txn, name)
                    .map_err(store::doc_error)?
                    .ok_or_else(|| ApiError::not_found("no such index"))?;
                Ok(index_answer(name, &info.spec, &state))
            }
        }
    }
}

/// An existing collection, opened in `txn`; 404 (a refusal) if there is none.
fn existing(txn: &mut RwTxn<'_>, coll: &str) -> Result<Collection, ApiError> {
    decode::collection(coll)?;
    match txn.open_db(Some(&cairn_doc::key::docs_db(coll))) {
        Ok(_) => Collection::create(txn, coll).map_err(store::doc_error),
        Err(cairn::Error::DbNotFound { .. }) => Err(ApiError::not_found("no such collection")),
        Err(e) => Err(e.into()),
    }
}

fn index_answer(name: &str, spec: &IndexSpec, state: &IndexState) -> Answer {
    Answer::Index {
        json: index_json(name, spec, state).to_string().into_bytes(),
        building: matches!(state, IndexState::Building { .. }),
    }
}

impl cairn_raft::ext::Extension for DocExtension {
    fn name(&self) -> &str {
        EXTENSION
    }

    fn apply(&self, txn: &mut RwTxn<'_>, payload: &[u8]) -> cairn::Result<Result<Vec<u8>, String>> {
        let w: DocWrite = match postcard::from_bytes(payload) {
            Ok(w) => w,
            Err(e) => {
                let e = ApiError::bad_request("an undecodable document entry")
                    .with_detail(json!(e.to_string()));
                return Ok(Err(refusal(&e)));
            }
        };
        match self.run(txn, &w) {
            Ok(a) => postcard::to_stdvec(&a)
                .map(Ok)
                .map_err(|e| cairn::Error::Internal(format!("encoding an answer: {e}"))),
            Err(e) if is_refusal(&e) => Ok(Err(refusal(&e))),
            Err(e) => Err(cairn::Error::Internal(format!(
                "document write: {e}: {}",
                e.detail
            ))),
        }
    }
}

#[cfg(test)]
mod tests;
