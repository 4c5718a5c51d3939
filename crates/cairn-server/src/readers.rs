//! Reader threads: a few threads of the server's own that run its short reads (a document by
//! id), each read in a read transaction begun and ended on the thread that runs it.
//!
//! Why not the blocking pool: there every read was a hand-off to an idle pool thread (a futex
//! wake and two context switches per request, 15% of the server's samples at 4,000
//! connections). A reader thread that finds more jobs queued runs them one after the other
//! without sleeping, so under load the hand-off costs a queue push, not a wake.
//!
//! Invariants:
//! - A job runs whole on one reader thread; nothing it holds (a transaction) crosses threads.
//! - The queue holds at most `QUEUE` jobs; a request finding it full waits as a task, not as
//!   a blocked thread.
//! - A job that panics answers its request with the panic (a 500 from the caller); its thread
//!   goes on with the next job.
//! - The threads end when the last sender is dropped (the server's state).

use std::sync::{Arc, Mutex};

/// Jobs waiting for a reader thread at most.
const QUEUE: usize = 1024;

type Job = Box<dyn FnOnce() + Send>;

/// The reader threads' queue.
pub struct Readers {
    tx: tokio::sync::mpsc::Sender<Job>,
}

impl Readers {
    /// Starts `threads` reader threads (at least 1).
    pub fn start(threads: usize) -> std::io::Result<Readers> {
        let (tx, rx) = tokio::sync::mpsc::channel::<Job>(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..threads.max(1) {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("cairn-reader-{i}"))
                .spawn(move || loop {
                    // One thread waits on the queue at a time; the others wait for the lock.
                    let job = rx.lock().unwrap_or_else(|p| p.into_inner()).blocking_recv();
                    match job {
                        Some(job) => job(),
                        None => return,
                    }
                })?;
        }
        Ok(Readers { tx })
    }

    /// Runs `f` on a reader thread and returns what it returned; `Err` with the panic's
    /// payload if it panicked, or `Err(None)` if the readers are gone (the server stopping).
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, Option<Box<dyn std::any::Any + Send>>> {
        let (otx, orx) = tokio::sync::oneshot::channel();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            let _ = otx.send(r);
        });
        self.tx.send(job).await.map_err(|_| None)?;
        match orx.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(panic)) => Err(Some(panic)),
            Err(_) => Err(None),
        }
    }
}
