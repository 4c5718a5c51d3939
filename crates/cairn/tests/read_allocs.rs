//! Reads allocate nothing once warm: opening a cursor, seeking, stepping, the *_MULTIPLE bulk
//! reads of sorted duplicates, plain gets and the iterators (over one key's values, over a
//! whole database) take no heap memory (a fresh cursor per lookup is a common pattern, and a
//! malloc and free per cursor was ~12% of a bulk read's instructions). A counting global
//! allocator watches the calls made by the test's own thread (its own test binary, so nothing
//! else installs an allocator).

use cairn::{DbFlags, Env, PutFlags};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

struct Counting;

thread_local! {
    /// Whether this thread's allocations are counted (const-initialised: reading it allocates
    /// nothing, so the allocator may).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}
static ALLOCS: AtomicU64 = AtomicU64::new(0);

fn count() {
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: docs/safety.md, "Test code": forwards every call to the system allocator
// unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for alloc.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: as for alloc.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocs_in(f: impl FnOnce()) -> u64 {
    ALLOCS.store(0, Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.load(Ordering::Relaxed)
}

const KEYS: u64 = 50;
const VALUES: u64 = 2_000;

fn key(k: u64) -> [u8; 8] {
    k.to_be_bytes()
}

#[test]
fn warm_reads_allocate_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    // Plain values, packed fixed-size duplicates, sorted variable-size duplicates.
    let layouts = [
        ("plain", DbFlags::empty()),
        ("fixed", DbFlags::DUP_SORT | DbFlags::DUP_FIXED),
        ("sorted", DbFlags::DUP_SORT),
    ];
    let [plain, fixed, sorted] =
        layouts.map(|(name, f)| w.create_db(Some(name), f | DbFlags::CREATE).unwrap());
    for k in 0..KEYS {
        w.put(plain, &key(k), &[7u8; 100], PutFlags::empty())
            .unwrap();
        // Enough values that each key's set is a sub-tree of several leaves.
        for v in 0..VALUES {
            w.put(fixed, &key(k), &v.to_be_bytes(), PutFlags::empty())
                .unwrap();
            w.put(sorted, &key(k), &(v * 3).to_be_bytes(), PutFlags::empty())
                .unwrap();
        }
    }
    w.commit().unwrap();

    let r = env.read_txn().unwrap();
    let pass = || {
        let mut n = 0u64;
        for k in 0..KEYS {
            assert!(r.get(plain, &key(k)).unwrap().is_some());
            // A fresh cursor per key, as LMDB programs and the benchmark harness do.
            let mut c = r.cursor(fixed).unwrap();
            assert!(c.set(&key(k)).unwrap().is_some());
            let mut chunk = c.get_multiple().unwrap();
            while let Some((_, vals)) = chunk {
                n += vals.len() as u64 / 8;
                chunk = c.next_multiple().unwrap();
            }
            let mut c = r.cursor(sorted).unwrap();
            assert!(c.set(&key(k)).unwrap().is_some());
            n += 1;
            while c.next_dup().unwrap().is_some() {
                n += 1;
            }
        }
        let mut c = r.cursor(plain).unwrap();
        let mut e = c.first().unwrap();
        while e.is_some() {
            n += 1;
            e = c.next().unwrap();
        }
        assert_eq!(n, KEYS * VALUES * 2 + KEYS);
    };
    // The first pass may allocate once: the transaction's cache of named databases, the
    // verified-page table's chunks.
    pass();
    assert_eq!(allocs_in(pass), 0, "allocations during warm reads");
    let iters = || {
        let mut n = 0u64;
        for k in 0..KEYS {
            for v in r.iter_dup(sorted, &key(k)).unwrap() {
                v.unwrap();
                n += 1;
            }
        }
        for e in r.iter(plain).unwrap() {
            e.unwrap();
            n += 1;
        }
        assert_eq!(n, KEYS * VALUES + KEYS);
    };
    iters();
    assert_eq!(allocs_in(iters), 0, "allocations during warm iteration");
}
