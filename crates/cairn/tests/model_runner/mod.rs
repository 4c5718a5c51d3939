//! The runner the model-based tests share (tests/model.rs: plain databases; tests/dups.rs:
//! sorted duplicates): random operations applied in write transactions and to a model, with
//! commits, aborts and reopens, the database checked against the model after each of them.
//! Each test says what its data operations do (`DataOp::apply`) and how to open and verify.

use cairn::{Database, Env, RwTxn};
use std::path::Path;

/// A step of a model test: a data operation of the test's own, or a transaction control.
#[derive(Debug, Clone)]
pub enum Step<D> {
    /// Applied to the write transaction and the pending model (`DataOp::apply`).
    Data(D),
    /// Commit the write transaction and begin the next one.
    Commit,
    /// Abort it and begin the next one.
    Abort,
    /// Commit it and reopen the environment.
    Reopen,
}

/// The data operations of a model test.
pub trait DataOp: Sized {
    /// The expected contents (committed or pending).
    type Model: Clone;
    /// Applies the operation to the transaction and to `pending`, asserting on the way.
    fn apply(self, txn: &mut RwTxn<'_>, dbs: &[Database], pending: &mut Self::Model);
}

/// Runs `ops` from an empty environment in a new directory (`empty` the model of it): opened
/// with `open` and verified with `verify` after every commit, abort and reopen, and at the end.
pub fn run<O: DataOp>(
    ops: Vec<Step<O>>,
    empty: O::Model,
    open: impl Fn(&Path) -> (Env, Vec<Database>),
    verify: impl Fn(&Env, &[Database], &O::Model),
) {
    let dir = tempfile::tempdir().unwrap();
    let mut committed = empty;
    let mut ops = ops.into_iter();
    loop {
        let (env, dbs) = open(dir.path());
        verify(&env, &dbs, &committed);
        if !session(&env, &dbs, &mut ops, &mut committed, &verify) {
            break;
        }
    }
}

/// Runs ops until a Reopen (returns true) or the end (false), with one write txn open.
fn session<O: DataOp>(
    env: &Env,
    dbs: &[Database],
    ops: &mut impl Iterator<Item = Step<O>>,
    committed: &mut O::Model,
    verify: &impl Fn(&Env, &[Database], &O::Model),
) -> bool {
    let mut pending = committed.clone();
    let mut txn = env.write_txn().unwrap();
    for op in ops.by_ref() {
        match op {
            Step::Data(d) => d.apply(&mut txn, dbs, &mut pending),
            Step::Commit => {
                txn.commit().unwrap();
                *committed = pending.clone();
                verify(env, dbs, committed);
                txn = env.write_txn().unwrap();
            }
            Step::Abort => {
                txn.abort();
                pending = committed.clone();
                verify(env, dbs, committed);
                txn = env.write_txn().unwrap();
            }
            Step::Reopen => {
                txn.commit().unwrap();
                *committed = pending;
                return true;
            }
        }
    }
    txn.commit().unwrap();
    *committed = pending;
    verify(env, dbs, committed);
    false
}
