//! Extensions of the replicated state machine: request kinds Cairn-Raft replicates and
//! applies without knowing them, for a layer above it (the document operations of `cairn
//! serve --cluster`, docs/serve-cluster.md). A `Request::Ext` entry carries an extension's
//! name and an opaque payload; on every replica, apply hands the payload to the extension of
//! that name, inside the apply transaction.
//!
//! Invariants (the contract an extension keeps, and what apply does around it):
//! - An extension's `apply` is deterministic: the same payload on the same state makes the
//!   same changes and the same answer on every replica. No clock, no randomness, no thread
//!   timing: whatever such a decision needs is taken by the proposer and put in the payload.
//! - It writes only through the transaction it is given, and never Cairn-Raft's own
//!   databases (names starting with `raft.`).
//! - It runs in a nested transaction of its own: a refusal (`Ok(Err(why))`) drops everything
//!   it wrote and is the entry's answer, the entry still counting as applied; a Cairn error
//!   (`Err`) is a storage error and stops the node, as for client batches.
//! - A node with no extension of the entry's name stops (a storage error) instead of
//!   skipping the entry: skipping would make its state diverge from the replicas that applied
//!   it. So every node must have an extension before the first entry for it is proposed.

use cairn::RwTxn;

/// A request kind applied by a layer above Cairn-Raft (see the module's contract).
pub trait Extension: Send + Sync + 'static {
    /// The name entries for this extension carry.
    fn name(&self) -> &str;

    /// Applies one entry's `payload` in `txn`: `Ok(Ok(answer))` when applied (the answer goes
    /// back to the proposer in [`crate::Response::data`]), `Ok(Err(why))` when refused.
    fn apply(&self, txn: &mut RwTxn<'_>, payload: &[u8]) -> cairn::Result<Result<Vec<u8>, String>>;
}
