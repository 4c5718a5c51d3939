//! Group commit ([`Env::write_grouped`]): writers of one process that arrive while a commit is
//! in flight share the next one, so N concurrent durable writers pay about one flush per group
//! instead of one each (docs/design.md, "Group commit").
//!
//! Protocol. A caller queues its closure (a `Job`) and, if no thread is leading, leads; else it
//! sleeps on its own slot. A leader runs cycles: it takes up to `group_max_writes` jobs from the
//! front of the queue, begins one write transaction, runs each job in a nested transaction of
//! its own (taking newcomers while the group is under its size and time limits), commits once,
//! and answers every job of the group. It leads until its own job is answered, then hands the
//! lead to the owner of the job now first in the queue (or lets it go when the queue is empty).
//! A caller that finds no leader and an empty queue leads a group of one without queueing: its
//! closure runs on its own thread in a plain write transaction (`run_alone`).
//!
//! Invariants:
//! - FIFO: jobs run in the order they were queued, and a group takes the queue's front; so a
//!   caller waits at most for the group in flight when it arrived plus the groups needed for the
//!   jobs queued before it (no writer starves).
//! - A job is consumed (run, or dropped unrun) on the leader's thread before its slot is
//!   answered, and its caller does not return before the answer: what the closure borrows from
//!   the caller's stack outlives every use of it (the one `unsafe` block; docs/safety.md §9).
//! - Every job taken from the queue is answered, also when the leader unwinds (`Cycle`'s
//!   drop), and the lead is always passed on or released (`Lead`'s drop): no caller sleeps
//!   forever.
//! - A job that fails (its closure returns an error, panics, or hits a limit) is rolled back
//!   alone; the others of its group commit. A failed commit fails every job it carried.

use crate::error::{Error, Result};
use crate::state::Env;
use crate::txn::RwTxn;
use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

/// A queued closure: runs the caller's closure in the transaction it is given, in a nesting
/// level of its own when `framed`, stores the caller's result where the caller reads it, and
/// says whether its changes were kept (false: rolled back, or, unframed, to be rolled back by
/// aborting the transaction). `'a`: what it borrows from its caller's frame.
type BorrowedJob<'a> = Box<dyn for<'t, 'e> FnOnce(&'t mut RwTxn<'e>, bool) -> bool + Send + 'a>;
/// A queued closure as the queue holds it (see the safety argument in `write_grouped`).
type JobFn = BorrowedJob<'static>;

struct Job {
    run: JobFn,
    slot: Arc<Slot>,
}

/// Where a caller sleeps until its job is answered (or it is handed the lead).
struct Slot {
    state: Mutex<Answer>,
    cv: Condvar,
}

enum Answer {
    Waiting,
    /// The caller leads now (its job is still queued).
    Lead,
    /// The job ran; `Ok`: the group committed (or the job failed and was rolled back: its own
    /// result says so); `Err`: the group's commit failed.
    Done(Result<()>),
    /// The job was dropped unrun: the error says why.
    Unrun(Error),
}

/// The per-environment queue (kept in `EnvInner::group`, typed here).
#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Queue>,
}

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    leading: bool,
}

/// What a caller's closure produced: its value or error, or the panic it raised.
type Outcome<R> = std::thread::Result<Result<R>>;

impl Slot {
    fn answer(&self, a: Answer) {
        *lock(&self.state) = a;
        self.cv.notify_one();
    }

    fn wait(&self) -> Answer {
        let mut g = lock(&self.state);
        while matches!(*g, Answer::Waiting) {
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        std::mem::replace(&mut *g, Answer::Waiting)
    }
}

/// A poisoned lock here only means a panic elsewhere while it was held; the queue's state is
/// kept consistent at every unlock, so it is used as is.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Env {
    /// Runs `f` in a write transaction shared with the other threads' grouped writes of this
    /// process, and returns once its changes are committed (durable, in
    /// [`Durability::Durable`](crate::Durability) mode).
    ///
    /// Writers that arrive while a commit is in flight share the next one: one leader runs
    /// their closures one after another, each in a nested transaction of its own, commits
    /// once (one flush) and answers them all. A closure that returns an error or panics is
    /// rolled back alone: its caller gets its error (or the panic, resumed on the caller's
    /// thread), and the others still commit. A failed commit is every member's error.
    ///
    /// `f` may run on another thread (the leader's; hence `Send`), after the closures queued
    /// before it and before the ones queued after. Inside `f`, beginning another write
    /// transaction of this environment (`write_txn`, `write_grouped`, `sync`) is an error
    /// ([`Error::Invalid`]), never a deadlock. Groups are bounded by
    /// [`EnvOptions::group_max_writes`](crate::EnvOptions::group_max_writes) and
    /// [`EnvOptions::group_max_time`](crate::EnvOptions::group_max_time). Other processes
    /// group their own writers; groups of different processes take turns at the writer lock.
    ///
    /// ```
    /// # let dir = tempfile::tempdir()?;
    /// let env = cairn::Env::open(dir.path())?;
    /// let db = env.main_db();
    /// std::thread::scope(|s| {
    ///     for t in 0..4u32 {
    ///         let env = &env;
    ///         s.spawn(move || {
    ///             env.write_grouped(|txn| txn.put(db, &t.to_be_bytes(), b"v", Default::default()))
    ///         });
    ///     }
    /// });
    /// assert_eq!(env.read_txn()?.stat(db)?.entries, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_grouped<R, F>(&self, f: F) -> Result<R>
    where
        F: FnOnce(&mut RwTxn<'_>) -> Result<R> + Send,
        R: Send,
    {
        self.inner.check_usable()?;
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        crate::txn::refuse_inside_group_job(self.inner.id)?;
        let group = self.inner.group();
        if let Some(lead) = lead_if_idle(group) {
            return self.run_alone(lead, f);
        }
        let mut out: Option<Outcome<R>> = None;
        let out_ref = &mut out;
        let run = move |txn: &mut RwTxn<'_>, framed: bool| -> bool {
            let depth = framed.then(|| txn.push_frame());
            let r = catch_unwind(AssertUnwindSafe(|| f(txn)));
            let keep = matches!(r, Ok(Ok(_)));
            if let Some(depth) = depth {
                txn.settle_frames(depth, keep);
            }
            *out_ref = Some(r);
            keep
        };
        let run: BorrowedJob<'_> = Box::new(run);
        // SAFETY: docs/safety.md §9. Only the lifetime bound changes (same layout). The box
        // borrows `f`'s captures and `out` from this frame; it is consumed (called or dropped)
        // by a leader before the slot is answered (`Cycle`), and this function does not return
        // or unwind before `slot.wait()` gives an answer (`wait` neither panics nor returns
        // early), so no borrow outlives this frame.
        #[allow(unsafe_code)]
        let run: JobFn = unsafe { std::mem::transmute::<BorrowedJob<'_>, JobFn>(run) };
        let slot = Arc::new(Slot {
            state: Mutex::new(Answer::Waiting),
            cv: Condvar::new(),
        });
        let lead = {
            let mut q = lock(&group.queue);
            q.jobs.push_back(Job {
                run,
                slot: slot.clone(),
            });
            !std::mem::replace(&mut q.leading, true)
        };
        let answer = if lead {
            self.lead(group, &slot)
        } else {
            match slot.wait() {
                Answer::Lead => self.lead(group, &slot),
                a => a,
            }
        };
        match (answer, out) {
            (_, Some(Err(panic))) => resume_unwind(panic),
            (Answer::Done(Ok(())), Some(Ok(r))) => r,
            (Answer::Done(Err(e)), Some(Ok(r))) => r.and(Err(e)),
            (Answer::Unrun(e), None) | (Answer::Done(Err(e)), None) => Err(e),
            _ => Err(Error::internal(
                "group commit: a job was answered without its result",
            )),
        }
    }

    /// A group led by a caller that found no leader and an empty queue: its closure runs on
    /// its own thread, unboxed and without a nesting level, so a lone writer pays what a plain
    /// transaction costs (issue 21: no slower at one thread). Writers that queue while it runs
    /// join the group as in `cycle`; those that come later wait for its commit and get the
    /// lead from `lead`'s drop. If `f` fails or panics, the transaction aborts (on drop) before
    /// any newcomer joined, and the lead is passed on.
    fn run_alone<R, F>(&self, lead: Lead<'_>, f: F) -> Result<R>
    where
        F: FnOnce(&mut RwTxn<'_>) -> Result<R>,
    {
        let opts = &self.inner.opts;
        let group = lead.0;
        let mut txn = RwTxn::begin(self)?;
        let started = Instant::now();
        let running = crate::txn::GroupJobMark::enter(self.inner.id);
        let v = f(&mut txn)?;
        drop(running);
        let mut cycle = Cycle::default();
        let room = opts.group_max_writes.saturating_sub(1);
        if room > 0
            && started.elapsed() < opts.group_max_time
            && take(group, &mut cycle.todo, room) > 0
        {
            // Not fresh: the newcomers run in nesting levels, and none begins a new transaction.
            txn = self
                .run_jobs(group, &mut cycle, txn, started, false, 1)
                .ok_or_else(|| Error::internal("group commit: a joined group began again"))?;
        }
        let r = match txn.commit() {
            Ok(()) => {
                cycle.finish(Ok(()));
                Ok(v)
            }
            Err(e) => {
                cycle.finish(Err(e.duplicate()));
                Err(e)
            }
        };
        drop(lead);
        r
    }

    /// Runs groups until `own`'s job is answered, then passes the lead on; returns the answer.
    fn lead(&self, group: &Group, own: &Slot) -> Answer {
        let _lead = Lead(group);
        let mut cycle = Cycle::default();
        loop {
            self.cycle(group, &mut cycle);
            let mut g = lock(&own.state);
            if !matches!(*g, Answer::Waiting) {
                return std::mem::replace(&mut *g, Answer::Waiting);
            }
        }
    }

    /// One group: take jobs, run them in one write transaction, commit, answer. `cycle` comes
    /// empty and is left empty (its buffers are kept for the next group).
    fn cycle(&self, group: &Group, cycle: &mut Cycle) {
        take(group, &mut cycle.todo, self.inner.opts.group_max_writes);
        let txn = match RwTxn::begin(self) {
            Ok(t) => t,
            Err(e) => return cycle.finish(Err(e)),
        };
        if let Some(txn) = self.run_jobs(group, cycle, txn, Instant::now(), true, 0) {
            cycle.finish(txn.commit());
        }
    }

    /// Runs `cycle`'s jobs in `txn`, then the newcomers while the group is under its limits
    /// (`others`: members already in `txn` that `cycle` does not list); returns the
    /// transaction to commit, or `None` if beginning one again failed (the cycle is then
    /// answered). The first job of a `fresh` transaction runs without a nesting level (most
    /// groups of a lightly loaded writer hold one job, which then costs what a plain
    /// transaction costs); if it fails, the transaction is aborted and begun again.
    fn run_jobs<'e>(
        &'e self,
        group: &Group,
        cycle: &mut Cycle,
        mut txn: RwTxn<'e>,
        started: Instant,
        mut fresh: bool,
        others: usize,
    ) -> Option<RwTxn<'e>> {
        let opts = &self.inner.opts;
        let mut running = crate::txn::GroupJobMark::enter(self.inner.id);
        loop {
            while let Some(job) = cycle.todo.pop_front() {
                // Listed before it runs, so that an unwinding leader answers it too.
                cycle.ran.push((job.slot, false));
                let kept = (job.run)(&mut txn, !fresh);
                if let Some(last) = cycle.ran.last_mut() {
                    last.1 = kept;
                }
                if fresh && !kept {
                    drop(running);
                    drop(txn);
                    txn = match RwTxn::begin(self) {
                        Ok(t) => t,
                        Err(e) => {
                            cycle.finish(Err(e));
                            return None;
                        }
                    };
                    running = crate::txn::GroupJobMark::enter(self.inner.id);
                    continue;
                }
                fresh = false;
            }
            let room = opts
                .group_max_writes
                .saturating_sub(cycle.ran.len() + others);
            if room == 0 || started.elapsed() >= opts.group_max_time {
                break;
            }
            // Newcomers that queued while this group ran join it.
            if take(group, &mut cycle.todo, room) == 0 {
                break;
            }
        }
        drop(running);
        Some(txn)
    }
}

/// Takes the lead if no thread leads and no job is queued (the lone writer's fast path).
fn lead_if_idle(group: &Group) -> Option<Lead<'_>> {
    let mut q = lock(&group.queue);
    if q.leading || !q.jobs.is_empty() {
        return None;
    }
    q.leading = true;
    Some(Lead(group))
}

/// Moves up to `max` jobs from the queue's front to `into`; returns how many.
fn take(group: &Group, into: &mut VecDeque<Job>, max: usize) -> usize {
    let mut q = lock(&group.queue);
    let n = q.jobs.len().min(max.max(1));
    into.extend(q.jobs.drain(..n));
    n
}

/// The jobs of one group: answered by `finish`, or by the drop if the leader unwinds.
#[derive(Default)]
struct Cycle {
    /// Jobs run, with whether their changes were kept.
    ran: Vec<(Arc<Slot>, bool)>,
    /// Jobs taken but not run yet.
    todo: VecDeque<Job>,
}

impl Cycle {
    /// Answers every job of the group (the jobs not run are dropped first: `write_grouped`'s
    /// safety argument) and leaves the cycle empty, its buffers kept.
    fn finish(&mut self, commit: Result<()>) {
        let unrun: Vec<Arc<Slot>> = self.todo.drain(..).map(|j| j.slot).collect();
        match commit {
            Ok(()) => {
                for (slot, _) in self.ran.drain(..) {
                    slot.answer(Answer::Done(Ok(())));
                }
            }
            Err(e) => {
                for (slot, kept) in self.ran.drain(..) {
                    // A job rolled back lost nothing to the failed commit: its own error stands.
                    let r = if kept { Err(e.duplicate()) } else { Ok(()) };
                    slot.answer(Answer::Done(r));
                }
                for slot in unrun {
                    slot.answer(Answer::Unrun(e.duplicate()));
                }
            }
        }
    }
}

impl Drop for Cycle {
    fn drop(&mut self) {
        // Reached with jobs left only when the leader unwinds (a bug in Cairn: the closures'
        // panics are caught): every member is answered, none sleeps forever.
        let unrun: Vec<Arc<Slot>> = self.todo.drain(..).map(|j| j.slot).collect();
        let why = || Error::internal("group commit: the leading thread panicked during the commit");
        for (slot, _) in self.ran.drain(..) {
            slot.answer(Answer::Done(Err(why())));
        }
        for slot in unrun {
            slot.answer(Answer::Unrun(why()));
        }
    }
}

/// The lead, held while a thread leads: dropping it (also on unwind) passes it to the owner of
/// the queue's first job, or releases it when the queue is empty.
struct Lead<'g>(&'g Group);

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        let mut q = lock(&self.0.queue);
        match q.jobs.front() {
            Some(next) => next.slot.answer(Answer::Lead),
            None => q.leading = false,
        }
    }
}

impl crate::state::EnvInner {
    /// This environment's group-commit queue, made at first use.
    fn group(&self) -> &Group {
        let any: &(dyn Any + Send + Sync) = &**self
            .group
            .get_or_init(|| Box::new(Group::default()) as Box<dyn Any + Send + Sync>);
        any.downcast_ref::<Group>()
            .expect("EnvInner::group holds only a Group")
    }
}
