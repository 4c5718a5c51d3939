//! The owning handle (one environment, one collection, a transaction per call) and the
//! background index builder.
//!
//! Invariants:
//! - Every write of a [`Handle`] goes through group commit ([`crate::write_grouped`]), so
//!   concurrent callers share flushes and a failed call rolls back alone.
//! - A write through a handle bumps its clones' shared generation after it commits; a
//!   waiter reads the generation before it reads the feed and sleeps only while it is
//!   unchanged, so a write of this process is never missed between the read and the wait
//!   (writes of other processes or handles are seen by the waiter's periodic re-read).
//! - The builder holds the writer for one step at a time ([`Collection::build_step`] of at
//!   most its batch of documents), so writers wait at most one step for it.

use crate::{
    write_grouped, Change, Collection, Doc, DocText, IndexInfo, IndexSpec, IndexState, Query,
    QueryPage, Result, Retention, Token,
};
use cairn::Env;
use serde_json::Value;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Documents per build step of [`Handle::build_index`] and [`spawn_build`] unless told.
pub const DEFAULT_BUILD_BATCH: usize = 1_000;

/// A collection together with the environment it lives in: each method runs in a
/// transaction of its own (writes grouped with other threads' writes).
#[derive(Clone)]
pub struct Handle {
    env: Arc<Env>,
    coll: Collection,
    signal: Arc<Signal>,
}

/// Wakes feed waiters of one handle and its clones.
#[derive(Default)]
struct Signal {
    generation: Mutex<u64>,
    cv: Condvar,
}

impl Signal {
    fn generation(&self) -> u64 {
        *self.generation.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn bump(&self) {
        *self.generation.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.cv.notify_all();
    }

    /// Sleeps until the generation moves past `seen` or `d` passes.
    fn wait(&self, seen: u64, d: Duration) {
        let g = self.generation.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .cv
            .wait_timeout_while(g, d, |g| *g == seen)
            .unwrap_or_else(|p| p.into_inner());
    }
}

/// How often a feed waiter re-reads the feed when nothing woke it: the bound on the lag of
/// writes made through other handles or processes.
pub const FEED_POLL: Duration = Duration::from_millis(50);

impl Handle {
    /// Opens (creating if needed) the collection `name` of `env`.
    pub fn open(env: Arc<Env>, name: &str) -> Result<Handle> {
        let coll = Collection::open(&env, name)?;
        Ok(Handle {
            env,
            coll,
            signal: Arc::default(),
        })
    }

    /// The environment.
    pub fn env(&self) -> &Arc<Env> {
        &self.env
    }

    /// The transaction-level collection, for writes that join other work.
    pub fn collection(&self) -> &Collection {
        &self.coll
    }

    /// [`Collection::put`], committed.
    pub fn put(&self, id: &str, doc: &Value) -> Result<u64> {
        self.wrote(write_grouped(&self.env, |t| self.coll.put(t, id, doc)))
    }

    /// [`Collection::put_if`], committed.
    pub fn put_if(&self, id: &str, doc: &Value, expected: Option<u64>) -> Result<u64> {
        self.wrote(write_grouped(&self.env, |t| {
            self.coll.put_if(t, id, doc, expected)
        }))
    }

    /// [`Collection::delete`], committed.
    pub fn delete(&self, id: &str) -> Result<Option<u64>> {
        self.wrote(write_grouped(&self.env, |t| self.coll.delete(t, id)))
    }

    /// Wakes the feed waiters after a committed write.
    fn wrote<T>(&self, r: Result<T>) -> Result<T> {
        if r.is_ok() {
            self.signal.bump();
        }
        r
    }

    /// Tells this handle's feed waiters that the collection was written by other means (a
    /// transaction of the caller's own, through [`Handle::collection`]), after its commit.
    pub fn notify(&self) {
        self.signal.bump();
    }

    /// [`Collection::changes`], waiting up to `timeout` for the first change above `since`
    /// if there is none yet (a long poll; an SSE stream calls it in a loop). Writes through
    /// this handle or its clones wake it at once; others are seen within [`FEED_POLL`].
    pub fn wait_changes(&self, since: u64, limit: usize, timeout: Duration) -> Result<Vec<Change>> {
        let deadline = Instant::now() + timeout;
        loop {
            let seen = self.signal.generation();
            let ch = self.changes(since, limit)?;
            let now = Instant::now();
            if !ch.is_empty() || now >= deadline {
                return Ok(ch);
            }
            self.signal.wait(seen, FEED_POLL.min(deadline - now));
        }
    }

    /// [`Collection::query_path`].
    pub fn query_path(&self, path: &str, q: &Query) -> Result<QueryPage> {
        self.coll.query_path(&self.env.read_txn()?, path, q)
    }

    /// [`Collection::query_path_text`].
    pub fn query_path_text(
        &self,
        path: &str,
        q: &Query,
        f: impl FnMut(DocText<'_>) -> Result<()>,
    ) -> Result<Option<Token>> {
        self.coll.query_path_text(&self.env.read_txn()?, path, q, f)
    }

    /// [`Collection::get`].
    pub fn get(&self, id: &str) -> Result<Option<Doc>> {
        self.coll.get(&self.env.read_txn()?, id)
    }

    /// [`Collection::query`].
    pub fn query(&self, index: &str, q: &Query) -> Result<QueryPage> {
        self.coll.query(&self.env.read_txn()?, index, q)
    }

    /// [`Collection::changes`].
    pub fn changes(&self, since: u64, limit: usize) -> Result<Vec<Change>> {
        self.coll.changes(&self.env.read_txn()?, since, limit)
    }

    /// [`Collection::set_retention`], committed.
    pub fn set_retention(&self, r: Retention) -> Result<()> {
        write_grouped(&self.env, |t| self.coll.set_retention(t, r))
    }

    /// [`Collection::declare_index`], committed (the build is not run: see
    /// [`Handle::build_index`], [`spawn_build`]).
    pub fn declare_index(&self, name: &str, spec: IndexSpec) -> Result<IndexState> {
        write_grouped(&self.env, |t| self.coll.declare_index(t, name, spec))
    }

    /// [`Collection::drop_index`], committed.
    pub fn drop_index(&self, name: &str) -> Result<bool> {
        write_grouped(&self.env, |t| self.coll.drop_index(t, name))
    }

    /// [`Collection::index`].
    pub fn index(&self, name: &str) -> Result<Option<IndexInfo>> {
        self.coll.index(&self.env.read_txn()?, name)
    }

    /// [`Collection::indexes`].
    pub fn indexes(&self) -> Result<Vec<IndexInfo>> {
        self.coll.indexes(&self.env.read_txn()?)
    }

    /// One committed build step of `batch` documents.
    pub fn build_step(&self, name: &str, batch: usize) -> Result<IndexState> {
        write_grouped(&self.env, |t| self.coll.build_step(t, name, batch))
    }

    /// Starts a builder thread ([`spawn_build`]) for every index left Building (after a
    /// restart or a crash, nothing builds by itself); returns them with the index names.
    pub fn resume_builds(
        &self,
        batch: usize,
    ) -> Result<Vec<(String, JoinHandle<Result<IndexState>>)>> {
        Ok(self
            .indexes()?
            .into_iter()
            .filter(|i| matches!(i.state, IndexState::Building { .. }))
            .map(|i| {
                let j = spawn_build(self.clone(), &i.name, batch, |_| {});
                (i.name, j)
            })
            .collect())
    }

    /// Runs build steps on this thread until the index is not Building; returns its state.
    pub fn build_index(&self, name: &str, batch: usize) -> Result<IndexState> {
        loop {
            let s = self.build_step(name, batch)?;
            if !matches!(s, IndexState::Building { .. }) {
                return Ok(s);
            }
        }
    }
}

/// Builds the index `name` of `handle`'s collection on a thread of its own, one committed
/// step of `batch` documents at a time, and returns its final state (Ready, or Failed) when
/// joined. `progress` sees the state after each step (for a progress bar or a log). If the
/// index is dropped meanwhile, the thread ends with [`crate::Error::NoIndex`].
pub fn spawn_build(
    handle: Handle,
    name: &str,
    batch: usize,
    mut progress: impl FnMut(&IndexState) + Send + 'static,
) -> JoinHandle<Result<IndexState>> {
    let name = name.to_string();
    std::thread::spawn(move || loop {
        let s = handle.build_step(&name, batch)?;
        progress(&s);
        if !matches!(s, IndexState::Building { .. }) {
            return Ok(s);
        }
        // Let queued writers in between steps (they queue behind us in group commit).
        std::thread::yield_now();
    })
}
