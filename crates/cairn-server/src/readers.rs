//! Reader threads: a few threads of the server's own that run its short reads (a document by
//! id), each read in a read transaction begun and ended on the thread that runs it.
//!
//! Why not the blocking pool: there every read was a hand-off to an idle pool thread (a futex
//! wake and two context switches per request, 15% of the server's samples at 4,000
//! connections).
//!
//! Why batches: under the benchmark the server has one core (docs/bench/serve), where every
//! wake of a reader thread is a context switch; waking a reader for each read cost 1.3 to 2
//! switches per GET (docs/bench/serve/README.md, "Server CPU per GET"). So a read queued on
//! the event loop does not wake a reader by itself. The first read queued while a reader
//! sleeps spawns a kick: a task that yields once (tokio runs a yielded task after the tasks
//! ready now and the I/O events of its next poll) and then wakes a reader, which takes every
//! read queued meanwhile. A reader answers its reads when the queue is empty or `BATCH` of
//! them are done, so the event loop is woken once for them, not once each.
//!
//! Invariants:
//! - A job runs whole on one reader thread; nothing it holds (a transaction) crosses threads.
//! - At most `QUEUE` jobs are queued or unanswered; a request finding none free waits as a
//!   task, not as a blocked thread.
//! - No job is forgotten: whenever a job is queued, a reader is awake (it takes the queue's
//!   jobs before it sleeps, under the queue's lock) or a kick is pending (it wakes one).
//! - A finished job is answered at most `BATCH - 1` jobs later, and before its reader sleeps.
//! - A job that panics answers its request with the panic (a 500 from the caller); its thread
//!   goes on with the next job.
//! - The threads end once the queue is closed (the server's state dropped) and empty.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Jobs queued or unanswered at most.
const QUEUE: usize = 1024;

/// Finished jobs a reader holds before answering them. A read stalled on the disk holds up
/// at most this many minus one finished ones (the other readers take the queued ones).
const BATCH: usize = 16;

type Panic = Box<dyn std::any::Any + Send>;

/// A read: run on a reader thread, then answered (its result sent to the waiting request).
trait Job: Send {
    fn run(&mut self);
    fn answer(self: Box<Self>);
}

struct Read<F, R> {
    f: Option<F>,
    out: Option<Result<R, Panic>>,
    tx: tokio::sync::oneshot::Sender<Result<R, Panic>>,
    /// The job's place in the queue's bound, given back when it is answered.
    _slot: tokio::sync::OwnedSemaphorePermit,
}

impl<F: FnOnce() -> R + Send, R: Send> Job for Read<F, R> {
    fn run(&mut self) {
        if let Some(f) = self.f.take() {
            self.out = Some(std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
        }
    }

    fn answer(self: Box<Self>) {
        if let Some(r) = self.out {
            // The request may have gone (its connection closed): nothing to answer then.
            let _ = self.tx.send(r);
        }
    }
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Box<dyn Job>>,
    /// Readers waiting on the condition variable.
    sleeping: usize,
    /// A kick is spawned and has not yet run.
    kick_pending: bool,
    closed: bool,
}

#[derive(Default)]
struct Queue {
    state: Mutex<State>,
    wake: Condvar,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic never happens under this lock (jobs run outside it); poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes a reader if jobs wait (the kick's second half).
    fn kick(&self) {
        let mut st = self.lock();
        st.kick_pending = false;
        if !st.jobs.is_empty() && st.sleeping > 0 {
            self.wake.notify_one();
        }
    }

    /// A reader thread: takes jobs one at a time, runs them, answers them in batches.
    fn serve(&self) {
        let mut done: Vec<Box<dyn Job>> = Vec::with_capacity(BATCH);
        loop {
            let mut st = self.lock();
            let mut job = st.jobs.pop_front();
            if job.is_none() && !done.is_empty() {
                // Nothing more to run now: answer the finished ones before sleeping.
                drop(st);
                done.drain(..).for_each(|j| j.answer());
                continue;
            }
            while job.is_none() {
                if st.closed {
                    return;
                }
                st.sleeping += 1;
                st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                st.sleeping -= 1;
                job = st.jobs.pop_front();
            }
            drop(st);
            if let Some(mut j) = job {
                j.run();
                done.push(j);
            }
            if done.len() >= BATCH {
                done.drain(..).for_each(|j| j.answer());
            }
        }
    }
}

/// Wakes a reader when dropped: after its task's yield, or when a runtime shutting down drops
/// the task unrun (so a pending kick is never lost).
struct Kick(Arc<Queue>);

impl Drop for Kick {
    fn drop(&mut self) {
        self.0.kick();
    }
}

/// The reader threads' queue.
pub struct Readers {
    queue: Arc<Queue>,
    slots: Arc<tokio::sync::Semaphore>,
}

impl Readers {
    /// Starts `threads` reader threads (at least 1).
    pub fn start(threads: usize) -> std::io::Result<Readers> {
        let queue = Arc::new(Queue::default());
        let readers = Readers {
            queue: queue.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(QUEUE)),
        };
        for i in 0..threads.max(1) {
            let q = queue.clone();
            // On an error the threads already started end when `readers` is dropped.
            std::thread::Builder::new()
                .name(format!("cairn-reader-{i}"))
                .spawn(move || q.serve())?;
        }
        Ok(readers)
    }

    /// Runs `f` on a reader thread and returns what it returned; `Err` with the panic's
    /// payload if it panicked, or `Err(None)` if the readers are gone (the server stopping).
    pub async fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Result<R, Option<Panic>> {
        let slot = self.slots.clone().acquire_owned().await.map_err(|_| None)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job = Box::new(Read {
            f: Some(f),
            out: None,
            tx,
            _slot: slot,
        });
        let spawn_kick = {
            let mut st = self.queue.lock();
            if st.closed {
                return Err(None);
            }
            st.jobs.push_back(job);
            let kick = st.sleeping > 0 && !st.kick_pending;
            st.kick_pending |= kick;
            kick
        };
        if spawn_kick {
            let kick = Kick(self.queue.clone());
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(async move {
                        tokio::task::yield_now().await;
                        drop(kick);
                    });
                }
                // Not on a runtime (cannot happen inside an async handler): wake at once.
                Err(_) => drop(kick),
            }
        }
        match rx.await {
            Ok(Ok(r)) => Ok(r),
            Ok(Err(panic)) => Err(Some(panic)),
            Err(_) => Err(None),
        }
    }
}

impl Drop for Readers {
    fn drop(&mut self) {
        // The readers run what is queued, answer it, and end.
        self.queue.lock().closed = true;
        self.queue.wake.notify_all();
        self.slots.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// More reads at once than a batch and than the queue's bound: every one is answered
    /// with its own result, on a multi-threaded and on a single-threaded runtime.
    fn many_reads(rt: tokio::runtime::Runtime) {
        let readers = Arc::new(Readers::start(2).unwrap());
        let n = QUEUE * 3;
        let got = rt.block_on(async {
            let tasks: Vec<_> = (0..n)
                .map(|i| {
                    let r = readers.clone();
                    tokio::spawn(async move { r.run(move || i * 2).await })
                })
                .collect();
            let mut got = Vec::new();
            for t in tasks {
                got.push(t.await.unwrap().ok().unwrap());
            }
            got
        });
        assert_eq!(got, (0..n).map(|i| i * 2).collect::<Vec<_>>());
    }

    #[test]
    fn every_read_is_answered() {
        many_reads(tokio::runtime::Builder::new_multi_thread().build().unwrap());
        many_reads(
            tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap(),
        );
    }

    #[test]
    fn a_panic_answers_its_own_read_only() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let readers = Readers::start(1).unwrap();
        rt.block_on(async {
            let bad = readers.run(|| -> u32 { panic!("a read's bug") }).await;
            assert!(matches!(bad, Err(Some(_))));
            assert_eq!(readers.run(|| 7u32).await.ok(), Some(7));
        });
    }

    #[test]
    fn a_dropped_kick_still_wakes_a_reader() {
        // The kick's task is dropped unrun with its runtime: the read queued behind it is
        // still taken and answered.
        let readers = Readers::start(1).unwrap();
        // Let the reader go to sleep, so that the next read spawns a kick.
        while readers.queue.lock().sleeping == 0 {
            std::thread::yield_now();
        }
        let rx = {
            let rt = tokio::runtime::Builder::new_current_thread()
                .build()
                .unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            let slot = rt.block_on(readers.slots.clone().acquire_owned()).unwrap();
            let (otx, _orx) = tokio::sync::oneshot::channel();
            let job = Box::new(Read {
                f: Some(move || tx.send(()).unwrap()),
                out: None,
                tx: otx,
                _slot: slot,
            });
            readers.queue.lock().jobs.push_back(job);
            readers.queue.lock().kick_pending = true;
            let kick = Kick(readers.queue.clone());
            rt.spawn(async move {
                tokio::task::yield_now().await;
                drop(kick);
            });
            rx
            // The runtime is dropped here, its kick task unrun.
        };
        rx.recv_timeout(std::time::Duration::from_secs(10))
            .expect("the queued read ran");
    }
}
