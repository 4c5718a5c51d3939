//! The writer thread: the server's grouped writes, queued by the request tasks and run by one
//! thread of the server's own, as many as are waiting in one engine group commit.
//!
//! Why not a blocking-pool thread per write waiting in `Env::write_grouped`: each write then
//! cost a pool hand-off, a wait on the group's slot and a wake from the leader (futex waits
//! and context switches were the largest share of the server's cycles under a 1,000-writer
//! load, `perf record` on the server). Here a request pushes its job on a queue and awaits
//! its answer as a task; the writer thread, once awake, takes every job waiting (at most
//! `Config::write_threads`, which bounds what the first of them waits for) and runs them in one `write_grouped` call, so writes still go through the engine's
//! group commit (an index build's steps, on threads of their own, share commits with them).
//!
//! Invariants:
//! - Each job runs in a nesting level of its own: a job that refuses (its closure's `Err`) or
//!   panics leaves nothing in the transaction; the others in the group are unaffected.
//! - A job's answer is sent only after the group's `write_grouped` returned: Ok means the
//!   commit is done (and flushed in durable mode); an engine error there is every job's.
//! - No transaction leaves the writer thread (the jobs are closures run on it).
//! - The queue holds at most `QUEUE` jobs: a request finding it full waits as a task.
//! - The thread ends when the last sender (the server's state) is dropped; the jobs it holds
//!   are finished first, then it drops its handle of the environment and says so
//!   ([`Stopped`]): `serve` waits for that (bounded) before the process exits, so the last
//!   handle closes the environment (a lazy one's last flush) instead of dying with the
//!   process.

use crate::error::ApiError;
use cairn::{Env, RwTxn};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Jobs waiting for the writer thread at most.
const QUEUE: usize = 8192;

/// What a job's answer is sent with, given the group's outcome (None: committed).
pub(crate) type Finish = Box<dyn FnOnce(Option<&ApiError>) + Send>;
/// A write request's part on the writer thread: runs in its own nesting level; returns
/// whether that level is kept, and how to answer once the group's commit is known.
pub(crate) type Job = Box<dyn FnOnce(&mut RwTxn<'_>) -> (bool, Finish) + Send>;

/// The writer thread's queue.
pub(crate) struct Writer {
    tx: tokio::sync::mpsc::Sender<Job>,
    stopped: Stopped,
}

/// Set by the writer thread once it has ended and dropped its handle of the environment.
#[derive(Clone, Default)]
pub(crate) struct Stopped(Arc<(Mutex<bool>, Condvar)>);

impl Stopped {
    fn set(&self) {
        let (m, cv) = &*self.0;
        *m.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }

    /// Waits until the thread has ended, at most `limit`; whether it has.
    pub(crate) fn wait(&self, limit: Duration) -> bool {
        let (m, cv) = &*self.0;
        let deadline = Instant::now() + limit;
        let mut done = m.lock().unwrap_or_else(|p| p.into_inner());
        while !*done {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            done = cv
                .wait_timeout(done, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        true
    }
}

impl Writer {
    /// Starts the writer thread over `env`, running at most `batch` jobs in one commit.
    pub(crate) fn start(env: Arc<Env>, batch: usize) -> std::io::Result<Writer> {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Job>(QUEUE);
        let stopped = Stopped::default();
        let said = stopped.clone();
        std::thread::Builder::new()
            .name("cairn-writer".into())
            .spawn(move || {
                while let Some(first) = rx.blocking_recv() {
                    run_group(&env, first, &mut rx, batch);
                }
                drop(env);
                said.set();
            })?;
        Ok(Writer { tx, stopped })
    }

    /// What says that the thread has ended (after the last sender is dropped).
    pub(crate) fn stopped(&self) -> Stopped {
        self.stopped.clone()
    }

    /// Queues `job`; Err if the writer thread is gone (the server stopping, or a bug).
    pub(crate) async fn submit(&self, job: Job) -> Result<(), ApiError> {
        self.tx
            .send(job)
            .await
            .map_err(|_| ApiError::internal("the writer thread has stopped"))
    }
}

/// Runs `first` and the jobs queued behind it in one grouped write transaction, each in a
/// nesting level of its own, then answers each with the commit's outcome. Jobs that queue
/// while the group runs join it (up to `batch` in all), as the engine's own group does.
fn run_group(env: &Env, first: Job, rx: &mut tokio::sync::mpsc::Receiver<Job>, batch: usize) {
    let mut finish: Vec<Finish> = Vec::with_capacity(16);
    let r = env.write_grouped(|txn| {
        let mut next = Some(first);
        let mut taken = 0;
        while let Some(job) = next.take() {
            taken += 1;
            let mut level = txn.nested()?;
            // A panic (a bug) unwinds out of the job with its answer's sender, so that request
            // is answered 500 by its task; its level is rolled back below.
            match catch_unwind(AssertUnwindSafe(|| job(&mut level))) {
                Ok((true, f)) => {
                    finish.push(f);
                    level.commit()?;
                }
                Ok((false, f)) => {
                    finish.push(f);
                    level.abort();
                }
                Err(_) => level.abort(),
            }
            if taken < batch {
                next = rx.try_recv().ok();
            }
        }
        Ok(())
    });
    let err = r.err().map(ApiError::from);
    for f in finish {
        f(err.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use cairn::{Durability, PutFlags};

    /// A job that puts `key` and then keeps it (`keep`) or refuses (rolled back).
    fn put_job(
        db: cairn::Database,
        key: u32,
        keep: bool,
        tx: tokio::sync::oneshot::Sender<Result<u32, ApiError>>,
    ) -> Job {
        Box::new(move |txn| {
            let put = txn.put(db, &key.to_be_bytes(), b"v", PutFlags::empty());
            let ok = keep && put.is_ok();
            let finish: Finish = Box::new(move |failed| {
                let r = match (ok, failed) {
                    (false, _) => Err(ApiError::new(StatusCode::CONFLICT, "refused")),
                    (true, Some(e)) => Err(e.clone()),
                    (true, None) => Ok(key),
                };
                let _ = tx.send(r);
            });
            (ok, finish)
        })
    }

    /// Many requests queued at once share groups; a refused or panicking job leaves nothing,
    /// the others are committed and answered Ok; a panicking job's request sees its sender
    /// dropped (the route answers 500).
    #[test]
    fn refused_and_panicking_jobs_leave_nothing_and_the_rest_commit() {
        let dir = tempfile::tempdir().unwrap();
        let env = Arc::new(
            Env::options()
                .durability(Durability::Lazy)
                .open(dir.path())
                .unwrap(),
        );
        let db = env.main_db();
        let writer = Writer::start(env.clone(), 8).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let answers = rt.block_on(async {
            let mut rxs = Vec::new();
            for k in 0..100u32 {
                let (tx, rx) = tokio::sync::oneshot::channel();
                let job = if k % 10 == 7 {
                    // Puts, then panics: must be rolled back like a refusal.
                    Box::new(move |txn: &mut RwTxn<'_>| -> (bool, Finish) {
                        txn.put(db, &k.to_be_bytes(), b"v", PutFlags::empty())
                            .unwrap();
                        let _keep_sender_in_the_closure = &tx;
                        panic!("a job's bug");
                    }) as Job
                } else {
                    put_job(db, k, k % 3 != 0, tx)
                };
                writer.submit(job).await.unwrap();
                rxs.push((k, rx));
            }
            let mut out = Vec::new();
            for (k, rx) in rxs {
                out.push((k, rx.await));
            }
            out
        });
        let r = env.read_txn().unwrap();
        for (k, a) in answers {
            let stored = r.get(db, &k.to_be_bytes()).unwrap().is_some();
            if k % 10 == 7 {
                assert!(a.is_err(), "{k}: a panicking job's sender is dropped");
                assert!(!stored, "{k}: a panicking job's put was kept");
            } else if k % 3 == 0 {
                assert_eq!(a.unwrap().unwrap_err().status, StatusCode::CONFLICT);
                assert!(!stored, "{k}: a refused job's put was kept");
            } else {
                assert_eq!(a.unwrap().unwrap(), k);
                assert!(stored, "{k}: an acknowledged put is missing");
            }
        }
    }

    /// Dropping the queue ends the thread (it holds the environment until then), without
    /// anyone waiting for it.
    #[test]
    fn the_thread_ends_when_the_queue_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let env = Arc::new(Env::open(dir.path()).unwrap());
        let writer = Writer::start(env.clone(), 4).unwrap();
        assert_eq!(Arc::strong_count(&env), 2);
        let stopped = writer.stopped();
        assert!(
            !stopped.wait(Duration::from_millis(20)),
            "ended while queued to"
        );
        drop(writer);
        assert!(
            stopped.wait(Duration::from_secs(10)),
            "the writer thread lives on"
        );
        assert_eq!(Arc::strong_count(&env), 1, "ended but kept the environment");
    }
}
