//! Owned transaction state behind the Python objects.
//!
//! The engine's transactions and cursors borrow their environment (`RoTxn<'env>`,
//! `RwTxn<'env>`, `Cursor<'txn>`); Python objects must own what they hold. [`TxnState`] owns an
//! `Arc<Env>` together with the transaction, its nested levels and its cursors, with the
//! borrow lifetimes erased to `'static` (docs/safety.md, "Python bindings").
//!
//! Invariants that make the erasure sound:
//! - the environment, the transaction and every nested level live in heap allocations owned
//!   by the same `TxnState`, which never moves them (`Arc`, `Box`);
//! - drop order is fixed by `Drop for TxnState`: cursors first, then nested levels innermost
//!   first, then the transaction, and the `Arc<Env>` last (it is the last field);
//! - a cursor of a write transaction holds a shared borrow of the transaction; before any
//!   `&mut` access (`rw_mut`), every cursor is parked: its position is saved as a key and
//!   its engine cursor dropped, to be rebuilt on next use;
//! - a nested level is reached only through the innermost one (`rw_ref`/`rw_mut`), as the
//!   engine's reborrow chain requires;
//! - the state sits in a [`StateCell`], a lock that the GIL guards (no atomic operation on
//!   the per-operation path). It is held only with the GIL, never while Python code can run
//!   or an object the garbage collector tracks is allocated (a finaliser could re-enter);
//!   `copy` from a transaction holds it across a release of the GIL, and anyone else who
//!   wants it meanwhile waits with the GIL released.
//! - a grouped write's transaction (`Kind::Grouped`) is not owned: the group's leader lends it
//!   to one `write_grouped` callback, and the state holding it is ended (cursors and levels
//!   dropped, the pointer forgotten) before the leader gets it back (`env::GroupedCall::run`).

use crate::errors::{self, closed};
use cairn::{Cursor as ECursor, Database, Env, Nested, RoTxn, RwTxn};
use pyo3::prelude::*;
use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

/// A unique number per transaction level, so a handle to an ended level is recognised even
/// after a new level took its depth.
pub(crate) fn token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A small number identifying the calling OS thread (never 0).
pub(crate) fn thread_tag() -> u64 {
    thread_local! { static TAG: u64 = token(); }
    TAG.with(|t| *t)
}

/// What an environment shares with its transactions.
pub(crate) struct EnvCore {
    pub env: Arc<Env>,
    /// Live transactions, aborted when the environment closes.
    pub txns: Mutex<Vec<Weak<TxnShared>>>,
    /// `thread_tag()` of the thread that began the open top-level write transaction, or 0.
    pub writer: AtomicU64,
    /// py-lmdb's `max_spare_txns`.
    pub max_spare: u32,
    /// How many ended read transactions py-lmdb would keep as spares now (at most
    /// `max_spare`; a new read transaction takes one). The engine keeps its idle reader slots
    /// itself: `readers()` lists `spare + held` of this process's idle slots, as py-lmdb
    /// lists the slots of its spare transactions and of the ended ones not yet freed.
    pub spare: std::sync::atomic::AtomicU32,
    /// Read transactions ended whose object is still alive (py-lmdb frees a read
    /// transaction's slot, or keeps it as a spare, only when the object goes).
    pub held: std::sync::atomic::AtomicU32,
}

impl EnvCore {
    /// A read transaction began: it takes a spare if there is one.
    pub(crate) fn take_spare(&self) {
        let _ = self
            .spare
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// A read transaction ended: it becomes a spare if there is room.
    pub(crate) fn give_spare(&self) {
        let max = self.max_spare;
        let _ = self
            .spare
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            });
    }

    pub(crate) fn track(&self, t: &Arc<TxnShared>) {
        let mut g = lock(&self.txns);
        if g.len() >= 64 && g.len().is_power_of_two() {
            g.retain(|w| w.strong_count() > 0);
        }
        g.push(Arc::downgrade(t));
    }
}

/// Locks a mutex, ignoring poisoning: the state it guards is left consistent by every
/// operation before it can panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The transaction state behind its lock. The module declares that it needs the GIL
/// (`gil_used`), so every thread that runs it holds the GIL, which makes `busy` a lock without
/// atomic operations: it is read and written only with the GIL held, and the GIL's own
/// hand-over orders those accesses between threads. While `busy` is set, the one thread that
/// set it owns `state`, with or without the GIL (docs/safety.md §6, "State lock").
pub(crate) struct StateCell {
    busy: Cell<bool>,
    state: UnsafeCell<Option<TxnState>>,
}

// SAFETY: docs/safety.md §6, "State lock": `busy` is only touched with the GIL held, and
// `state` only by the thread that set `busy`, until it clears it (with the GIL held).
unsafe impl Sync for StateCell {}

impl StateCell {
    pub(crate) fn new(st: TxnState) -> StateCell {
        StateCell {
            busy: Cell::new(false),
            state: UnsafeCell::new(Some(st)),
        }
    }

    /// Takes the lock; waits (with the GIL released) while another thread holds it, which
    /// only `copy` from a transaction does for long.
    #[inline]
    pub(crate) fn lock<'a>(&'a self, py: Python<'_>) -> StateGuard<'a> {
        while self.busy.get() {
            self.wait(py);
        }
        self.busy.set(true);
        StateGuard {
            cell: self,
            _not_send: PhantomData,
        }
    }

    #[cold]
    fn wait(&self, py: Python<'_>) {
        py.detach(|| std::thread::sleep(Duration::from_micros(200)));
    }

    /// The lock if nobody holds it (a finaliser may run while this thread holds it).
    pub(crate) fn try_lock<'a>(&'a self, _py: Python<'_>) -> Option<StateGuard<'a>> {
        if self.busy.get() {
            return None;
        }
        self.busy.set(true);
        Some(StateGuard {
            cell: self,
            _not_send: PhantomData,
        })
    }
}

/// The held lock of a [`StateCell`]. Not `Send`: it is released where it was taken, with
/// the GIL held (a guard is dropped only in code that holds the GIL).
pub(crate) struct StateGuard<'a> {
    cell: &'a StateCell,
    _not_send: PhantomData<*const ()>,
}

impl Deref for StateGuard<'_> {
    type Target = Option<TxnState>;
    #[inline]
    fn deref(&self) -> &Option<TxnState> {
        // SAFETY: docs/safety.md §6, "State lock": this guard set `busy`, so this thread alone
        // reaches `state` until the guard drops.
        unsafe { &*self.cell.state.get() }
    }
}

impl DerefMut for StateGuard<'_> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Option<TxnState> {
        // SAFETY: as in `deref`; `&mut self` makes this the only reference through the guard.
        unsafe { &mut *self.cell.state.get() }
    }
}

impl Drop for StateGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.cell.busy.set(false);
    }
}

/// One top-level transaction and its nested levels, shared by their Python objects and
/// cursors.
pub(crate) struct TxnShared {
    pub state: StateCell,
    /// memoryviews handed out with `buffers=True`, released when the transaction ends.
    pub views: Mutex<Vec<Py<PyAny>>>,
    pub write: bool,
    pub buffers: bool,
    pub core: Arc<EnvCore>,
    /// The process that began the transaction.
    pub pid: u32,
    /// Set when a read transaction ended (see `EnvCore::held`).
    pub ended_read: std::sync::atomic::AtomicBool,
    /// The transaction is a grouped write's, lent to its callback
    /// (`Environment.write_grouped`): the group commits it, so its root refuses
    /// `commit`/`abort`, and it ends when the callback returns.
    pub grouped: bool,
}

impl Drop for TxnShared {
    fn drop(&mut self) {
        if self.ended_read.load(Ordering::Relaxed) {
            self.core.held.fetch_sub(1, Ordering::Relaxed);
            self.core.give_spare();
        }
    }
}

impl TxnShared {
    /// Ends the whole transaction (all levels): commits the root if `commit`, else aborts.
    /// Releases the GIL around the commit.
    pub(crate) fn end_root(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        let st = self.state.lock(py).take();
        let Some(mut st) = st else {
            return Ok(());
        };
        if std::process::id() != self.pid {
            // A forked child ending a transaction it inherited: the reader slot and the writer
            // lock are the parent's, so nothing is released (py-lmdb's fork detection).
            std::mem::forget(st);
            return if commit {
                Err(errors::Error::new_err(
                    "the transaction belongs to the parent process (inherited across fork)",
                ))
            } else {
                Ok(())
            };
        }
        if !self.write {
            self.core.held.fetch_add(1, Ordering::Relaxed);
            self.ended_read.store(true, Ordering::Relaxed);
        }
        st.cursors.clear();
        st.tokens.clear();
        while let Some(n) = st.levels.pop() {
            drop(n);
        }
        let kind = st.kind.take();
        let env = st.env.clone();
        drop(st);
        let r = match kind {
            Some(Kind::Rw(t)) if commit => py.detach(move || {
                let r = (*t).commit();
                drop(env);
                r
            }),
            // A grouped transaction is only ever ended here, never committed: the group
            // commits it (`Transaction::end` refuses the callback's commit); dropping the
            // pointer leaves the transaction to the leader.
            other => {
                drop(other);
                drop(env);
                Ok(())
            }
        };
        if self.write {
            self.core.writer.store(0, Ordering::Release);
        }
        self.release_views(py);
        r.map_err(errors::map)
    }

    /// Releases every memoryview still alive, so that using it raises `ValueError`.
    pub(crate) fn release_views(&self, py: Python<'_>) {
        let views = std::mem::take(&mut *lock(&self.views));
        for v in views {
            // A view with exports of its own refuses release (BufferError); it then keeps
            // reading memory that stays mapped (docs/safety.md).
            let _ = v.call_method0(py, "release");
        }
    }

    /// Remembers a memoryview to release at the end; prunes views nobody else holds.
    pub(crate) fn track_view(&self, py: Python<'_>, v: Py<PyAny>) {
        let mut g = lock(&self.views);
        if g.len() >= 64 && g.len().is_power_of_two() {
            g.retain(|x| x.get_refcnt(py) > 1);
        }
        g.push(v);
    }
}

pub(crate) enum Kind {
    Ro(Box<RoTxn<'static>>),
    Rw(Box<RwTxn<'static>>),
    /// A grouped write's transaction, lent by the group's leader for the time of one callback
    /// (`Environment.write_grouped`; docs/safety.md §6, "Grouped writes").
    Grouped(GroupedRw),
}

/// The write transaction the group's leader lends to a `write_grouped` callback: a pointer
/// valid until the callback's state is ended, which `env::GroupedCall::run` does before it returns
/// to the leader (docs/safety.md §6, "Grouped writes").
pub(crate) struct GroupedRw(*mut RwTxn<'static>);

impl GroupedRw {
    /// Lends `txn`; the caller ends the state holding the result before `txn`'s borrow ends.
    pub(crate) fn lend(txn: &mut RwTxn<'_>) -> GroupedRw {
        // Only the lifetime changes (a pointer cast); the pointer is used while the borrow
        // lives (see the type).
        GroupedRw(std::ptr::from_mut(txn).cast::<RwTxn<'static>>())
    }

    fn get(&self) -> &RwTxn<'static> {
        // SAFETY: docs/safety.md §6, "Grouped writes": the leader's `&mut RwTxn` outlives this
        // state and is not used while the callback runs; the state lock makes this the only
        // access.
        unsafe { &*self.0 }
    }

    fn get_mut(&mut self) -> &mut RwTxn<'static> {
        // SAFETY: as in `get`; `&mut self` (through the state lock) is the only access.
        unsafe { &mut *self.0 }
    }
}

/// A (key, value) pair, owned.
pub(crate) type Pair = (Vec<u8>, Vec<u8>);

/// Where a parked cursor was: a key, and in a dupsort database the value too.
#[derive(Clone, Debug)]
pub(crate) enum Saved {
    Unset,
    At(Vec<u8>, Vec<u8>),
    /// The pair the cursor stood on was deleted through another cursor or the transaction
    /// (LMDB's C_DEL): the cursor waits in the gap the pair left, before `succ`, the pair
    /// that followed it when it went (None: the end). [`TxnState::after_delete`] keeps
    /// `succ` an existing pair.
    Gone {
        pair: Pair,
        succ: Option<Pair>,
    },
}

/// A cursor slot.
pub(crate) struct Slot {
    /// Unique per cursor, so a closed cursor never reaches a slot reused by another.
    pub id: u64,
    pub db: Database,
    /// Whether the database keeps sorted duplicates.
    pub dup: bool,
    pub cur: Option<ECursor<'static>>,
    pub saved: Saved,
    /// Whether the cursor stands on an entry.
    pub valid: bool,
    /// The entry the engine returned at the cursor's last move, when known: what `key()`,
    /// `value()` and `item()` read without asking the engine again. Valid until the cursor
    /// moves or the transaction changes: every change parks the cursors first, which clears
    /// it (docs/safety.md §6, "Entry cache").
    pub here: Option<(&'static [u8], &'static [u8])>,
    pub depth: usize,
    pub token: u64,
    /// Set while the cursor waits in the gap of a pair deleted under it (see
    /// [`Saved::Gone`]): the deleted pair. The engine cursor then stands on the pair that
    /// followed it (`valid`) or nowhere (the end): a forward step lands there without moving;
    /// a backward one moves from the gap. Any other move or read of the entry clears it.
    pub gone: Option<Pair>,
    /// A failed `next_dup`/`prev_dup` leaves the engine cursor on the key's last/first value
    /// while the cursor reports unpositioned, as LMDB keeps its position: `first_dup`,
    /// `last_dup` and `count` still work from there.
    pub anchored: bool,
}

impl Slot {
    /// Records where a move landed; returns whether on an entry.
    #[inline]
    pub(crate) fn land(&mut self, e: Option<(&'static [u8], &'static [u8])>) -> bool {
        self.here = e;
        self.valid = e.is_some();
        if self.gone.is_some() {
            self.gone = None;
        }
        self.anchored = false;
        self.valid
    }
}

/// The engine transaction with its cursors and nested levels (see the module invariants).
pub(crate) struct TxnState {
    pub cursors: Vec<Option<Slot>>,
    pub levels: Vec<Nested<'static, 'static>>,
    /// Token of each live level; index 0 is the top-level transaction.
    pub tokens: Vec<u64>,
    pub kind: Option<Kind>,
    /// Keeps the environment at a fixed address while anything above borrows it. Last field:
    /// dropped last.
    pub env: Arc<Env>,
}

// SAFETY: see docs/safety.md, "Python bindings". The cursors and nested levels borrow only
// allocations owned by this same value (the boxed transaction and the `Arc<Env>`), so they
// move between threads together with what they borrow; the state is only ever reached through
// the `StateCell` of `TxnShared`, so one thread at a time uses it. The engine's transactions
// are `Send` on their own.
unsafe impl Send for TxnState {}

impl Drop for TxnState {
    fn drop(&mut self) {
        self.cursors.clear();
        while let Some(n) = self.levels.pop() {
            drop(n);
        }
        self.kind = None;
    }
}

impl TxnState {
    fn with_kind(env: Arc<Env>, kind: Kind) -> TxnState {
        TxnState {
            cursors: Vec::new(),
            levels: Vec::new(),
            tokens: vec![token()],
            kind: Some(kind),
            env,
        }
    }

    pub(crate) fn new_ro(env: Arc<Env>) -> Result<TxnState, cairn::Error> {
        let txn = env.read_txn()?;
        // SAFETY: docs/safety.md, "Python bindings": `env` is an `Arc` stored in the same
        // state and dropped after the transaction (last field, explicit Drop order).
        let txn: RoTxn<'static> = unsafe { std::mem::transmute::<RoTxn<'_>, RoTxn<'static>>(txn) };
        Ok(Self::with_kind(env, Kind::Ro(Box::new(txn))))
    }

    /// Begins a write transaction; blocks while another one is open (call without the GIL).
    pub(crate) fn new_rw(env: Arc<Env>) -> Result<TxnState, cairn::Error> {
        let txn = env.write_txn()?;
        // SAFETY: docs/safety.md §6: as in `new_ro`.
        let txn: RwTxn<'static> = unsafe { std::mem::transmute::<RwTxn<'_>, RwTxn<'static>>(txn) };
        Ok(Self::with_kind(env, Kind::Rw(Box::new(txn))))
    }

    /// The state of a grouped write's callback over the transaction the leader lends.
    pub(crate) fn new_grouped(env: Arc<Env>, txn: GroupedRw) -> TxnState {
        Self::with_kind(env, Kind::Grouped(txn))
    }

    /// Checks that the level (`depth`, `token`) is alive and has no active child.
    #[inline]
    pub(crate) fn check(&self, depth: usize, token: u64) -> PyResult<()> {
        // Tokens are unique: the innermost level's token is this level alive and childless.
        if self.tokens.last() == Some(&token) {
            return Ok(());
        }
        self.check_failed(depth, token)
    }

    #[cold]
    fn check_failed(&self, depth: usize, token: u64) -> PyResult<()> {
        if self.tokens.get(depth) != Some(&token) {
            return Err(closed());
        }
        if self.tokens.len() != depth + 1 {
            return Err(errors::BadTxnError::new_err(
                "the transaction has an active child transaction; end the child first",
            ));
        }
        Ok(())
    }

    /// The write transaction as its innermost level sees it, for reading.
    #[inline]
    pub(crate) fn rw_ref(&self) -> Option<&RwTxn<'static>> {
        if let Some(n) = self.levels.last() {
            return Some(n);
        }
        match self.kind.as_ref()? {
            Kind::Rw(t) => Some(t),
            Kind::Grouped(t) => Some(t.get()),
            Kind::Ro(_) => None,
        }
    }

    /// The write transaction for changing it: parks every cursor first (their shared borrows
    /// end here). Fails with `ReadonlyError` in a read transaction.
    #[inline]
    pub(crate) fn rw_mut(&mut self) -> PyResult<&mut RwTxn<'static>> {
        self.park_cursors();
        if let Some(n) = self.levels.last_mut() {
            return Ok(n);
        }
        match self.kind.as_mut() {
            Some(Kind::Rw(t)) => Ok(t),
            Some(Kind::Grouped(t)) => Ok(t.get_mut()),
            Some(Kind::Ro(_)) => Err(errors::ReadonlyError::new_err(
                "cannot write in a read-only transaction (begin it with write=True)",
            )),
            None => Err(closed()),
        }
    }

    /// Saves each cursor's position as a key and drops its engine cursor.
    #[inline]
    pub(crate) fn park_cursors(&mut self) {
        if !self.cursors.is_empty() {
            self.park_each();
        }
    }

    fn park_each(&mut self) {
        if !matches!(self.kind, Some(Kind::Rw(_) | Kind::Grouped(_))) {
            return;
        }
        for s in self.cursors.iter_mut().flatten() {
            s.here = None;
            if let Some(c) = s.cur.take() {
                let at = match (s.valid || s.anchored, c.current()) {
                    (true, Ok(Some((k, v)))) => Some((k.to_vec(), v.to_vec())),
                    _ => None,
                };
                s.saved = match (s.gone.take(), at) {
                    (Some(pair), succ) => Saved::Gone { pair, succ },
                    (None, Some((k, v))) => Saved::At(k, v),
                    (None, None) => Saved::Unset,
                };
            }
        }
    }

    /// After a change that may have deleted pairs: each parked cursor whose pair is gone
    /// waits in its gap (LMDB moves no sibling cursor past the pair that followed), and a
    /// cursor already waiting keeps a `succ` that exists.
    pub(crate) fn after_delete(&mut self) -> Result<(), cairn::Error> {
        for i in 0..self.cursors.len() {
            let Some(s) = self.cursors[i].as_ref().filter(|s| s.cur.is_none()) else {
                continue;
            };
            let new = match &s.saved {
                Saved::At(k, v) => {
                    let mut c = self.engine_cursor(s.db)?;
                    if pair_exists(&mut c, s.dup, k, v)? {
                        continue;
                    }
                    Saved::Gone {
                        pair: (k.clone(), v.clone()),
                        succ: first_after(&mut c, s.dup, k, v)?,
                    }
                }
                Saved::Gone {
                    pair,
                    succ: Some((k, v)),
                } => {
                    let mut c = self.engine_cursor(s.db)?;
                    if pair_exists(&mut c, s.dup, k, v)? {
                        continue;
                    }
                    Saved::Gone {
                        pair: pair.clone(),
                        succ: first_after(&mut c, s.dup, k, v)?,
                    }
                }
                _ => continue,
            };
            self.cursors[i].as_mut().expect("checked").saved = new;
        }
        Ok(())
    }

    /// Places slot `i` after its own delete of `pair` (py-lmdb: on the pair that followed,
    /// from which a step moves on; at the end, waiting as a sibling would).
    pub(crate) fn place_after_own_delete(
        &mut self,
        i: usize,
        pair: Pair,
    ) -> Result<(), cairn::Error> {
        let Some(s) = self.cursors[i].as_ref() else {
            return Ok(());
        };
        let mut c = self.engine_cursor(s.db)?;
        let saved = if pair_exists(&mut c, s.dup, &pair.0, &pair.1)? {
            Saved::At(pair.0, pair.1)
        } else {
            match first_after(&mut c, s.dup, &pair.0, &pair.1)? {
                Some((k, v)) => Saved::At(k, v),
                None => Saved::Gone { pair, succ: None },
            }
        };
        drop(c);
        let s = self.cursors[i].as_mut().expect("checked");
        s.cur = None;
        s.saved = saved;
        Ok(())
    }

    /// The value under `key` as this transaction sees it.
    #[inline]
    pub(crate) fn get(&self, db: Database, key: &[u8]) -> Result<Option<&[u8]>, cairn::Error> {
        match self.kind.as_ref() {
            Some(Kind::Ro(t)) => t.get(db, key),
            _ => match self.rw_ref() {
                Some(t) => t.get(db, key),
                None => Err(cairn::Error::Invalid("transaction ended".into())),
            },
        }
    }

    pub(crate) fn stat(&self, db: Database) -> Result<cairn::Stat, cairn::Error> {
        match self.kind.as_ref() {
            Some(Kind::Ro(t)) => t.stat(db),
            _ => match self.rw_ref() {
                Some(t) => t.stat(db),
                None => Err(cairn::Error::Invalid("transaction ended".into())),
            },
        }
    }

    pub(crate) fn id(&self) -> u64 {
        match self.kind.as_ref() {
            Some(Kind::Ro(t)) => t.id(),
            _ => self.rw_ref().map_or(0, |t| t.id()),
        }
    }

    /// A new engine cursor over `db` (its borrow erased; see the module invariants).
    fn engine_cursor(&self, db: Database) -> Result<ECursor<'static>, cairn::Error> {
        let c = match self.kind.as_ref() {
            Some(Kind::Ro(t)) => t.cursor(db)?,
            _ => match self.rw_ref() {
                Some(t) => t.cursor(db)?,
                None => return Err(cairn::Error::Invalid("transaction ended".into())),
            },
        };
        // SAFETY: docs/safety.md, "Python bindings": the cursor borrows the boxed transaction
        // owned by this state; slots are cleared before the transaction is dropped, and write
        // transactions park (drop) cursors before every `&mut` access.
        Ok(unsafe { std::mem::transmute::<ECursor<'_>, ECursor<'static>>(c) })
    }

    /// Adds a cursor slot; returns its index.
    pub(crate) fn open_cursor(
        &mut self,
        db: Database,
        dup: bool,
        depth: usize,
        token: u64,
    ) -> Result<(usize, u64), cairn::Error> {
        let cur = self.engine_cursor(db)?;
        let id = self::token();
        let slot = Slot {
            id,
            db,
            dup,
            cur: Some(cur),
            saved: Saved::Unset,
            valid: false,
            here: None,
            gone: None,
            anchored: false,
            depth,
            token,
        };
        if let Some(i) = self.cursors.iter().position(Option::is_none) {
            self.cursors[i] = Some(slot);
            Ok((i, id))
        } else {
            self.cursors.push(Some(slot));
            Ok((self.cursors.len() - 1, id))
        }
    }

    /// Slot `i` as it is (its engine cursor may be parked), checked to be cursor `id` of a
    /// usable level.
    #[inline]
    pub(crate) fn slot_mut(&mut self, i: usize, id: u64) -> PyResult<&mut Slot> {
        let (depth, token) = match self.cursors.get(i) {
            Some(Some(s)) if s.id == id => (s.depth, s.token),
            _ => return Err(closed()),
        };
        self.check(depth, token)?;
        Ok(self.cursors[i].as_mut().expect("checked"))
    }

    /// The engine cursor of slot `i`, rebuilt at its saved position if it was parked.
    #[inline]
    pub(crate) fn cursor(&mut self, i: usize, id: u64) -> PyResult<&mut Slot> {
        let tokens = &self.tokens;
        let ready = |s: &Slot| s.id == id && s.cur.is_some() && tokens.last() == Some(&s.token);
        if matches!(self.cursors.get(i), Some(Some(s)) if ready(s)) {
            return Ok(self.cursors[i].as_mut().expect("checked"));
        }
        self.cursor_rebuilt(i, id)
    }

    /// [`TxnState::cursor`] when the slot's engine cursor must be rebuilt (or the slot is not
    /// usable).
    fn cursor_rebuilt(&mut self, i: usize, id: u64) -> PyResult<&mut Slot> {
        let needs = match self.cursors.get(i) {
            Some(Some(s)) if s.id == id => {
                self.check(s.depth, s.token)?;
                s.cur.is_none()
            }
            _ => return Err(closed()),
        };
        if needs {
            let db = self.cursors[i].as_ref().expect("checked").db;
            let mut c = self.engine_cursor(db).map_err(errors::map)?;
            let s = self.cursors[i].as_mut().expect("checked");
            s.here = None;
            s.valid = match &s.saved {
                Saved::Unset => false,
                // An anchored cursor stands there but reports unpositioned.
                Saved::At(k, v) => {
                    seek_pair(&mut c, s.dup, k, v).map_err(errors::map)? && !s.anchored
                }
                Saved::Gone { pair, succ } => {
                    s.gone = Some(pair.clone());
                    match succ {
                        Some((k, v)) => seek_pair(&mut c, s.dup, k, v).map_err(errors::map)?,
                        None => false,
                    }
                }
            };
            s.cur = Some(c);
        }
        Ok(self.cursors[i].as_mut().expect("checked"))
    }

    /// Begins a nested write level; returns its depth and token.
    pub(crate) fn begin_nested(&mut self) -> PyResult<(usize, u64)> {
        let t = self.rw_mut()?;
        let n = t.nested().map_err(errors::map)?;
        // SAFETY: docs/safety.md, "Python bindings": the level borrows the boxed root
        // transaction through the current innermost level; levels are popped innermost first
        // before the root is dropped, and only the innermost level is ever used.
        let n = unsafe { std::mem::transmute::<Nested<'_, 'static>, Nested<'static, 'static>>(n) };
        self.levels.push(n);
        let tok = token();
        self.tokens.push(tok);
        Ok((self.tokens.len() - 1, tok))
    }

    /// Ends nested level `depth` (>= 1) and every level above it; commits it if `commit`.
    pub(crate) fn end_nested(&mut self, depth: usize, token: u64, commit: bool) -> PyResult<()> {
        if self.tokens.get(depth) != Some(&token) {
            return Ok(());
        }
        self.park_cursors();
        for s in self.cursors.iter_mut() {
            if s.as_ref().is_some_and(|c| c.depth >= depth) {
                *s = None;
            }
        }
        while self.levels.len() > depth {
            self.levels.pop();
        }
        let n = self.levels.pop().expect("level exists");
        self.tokens.truncate(depth);
        if commit {
            n.commit().map_err(errors::map)
        } else {
            drop(n);
            Ok(())
        }
    }
}

/// Whether the pair exists (outside dupsort databases: whether the key does).
fn pair_exists(
    c: &mut ECursor<'static>,
    dup: bool,
    key: &[u8],
    value: &[u8],
) -> Result<bool, cairn::Error> {
    Ok(if dup {
        c.get_both(key, value)?.is_some()
    } else {
        c.set(key)?.is_some()
    })
}

/// The first pair after `key`/`value` (outside dupsort databases: after `key`).
fn first_after(
    c: &mut ECursor<'static>,
    dup: bool,
    key: &[u8],
    value: &[u8],
) -> Result<Option<Pair>, cairn::Error> {
    if !seek_pair(c, dup, key, value)? {
        return Ok(None);
    }
    let e = match c.current()? {
        Some((k, v)) if k == key && (!dup || v == value) => c.next()?,
        other => other,
    };
    Ok(e.map(|(k, v)| (k.to_vec(), v.to_vec())))
}

/// Positions `c` at the first entry at or after `key` (in a dupsort database: at or after the
/// pair `key`/`value`, in key-then-value order); returns whether there is one.
pub(crate) fn seek_pair(
    c: &mut ECursor<'static>,
    dup: bool,
    key: &[u8],
    value: &[u8],
) -> Result<bool, cairn::Error> {
    if !dup {
        return Ok(c.set_range(key)?.is_some());
    }
    if c.get_both_range(key, value)?.is_some() {
        return Ok(true);
    }
    match c.set_range(key)? {
        // Every value of `key` sorts before `value`: the next key's first pair.
        Some((k, _)) if k == key => Ok(c.next_nodup()?.is_some()),
        other => Ok(other.is_some()),
    }
}
