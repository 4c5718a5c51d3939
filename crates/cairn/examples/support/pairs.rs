//! What the sorted-duplicates profiling examples (dupsloop.rs, dupfixedloop.rs) share: the
//! workload's shape (N pairs over 1,000 keys, 10,000 per write transaction), its decimal
//! keys and its fixed-seed random orders. Included with `#[path]`, so not an example itself.

use cairn::{Env, RwTxn};

/// Keys the pairs are spread over.
pub const KEYS: u64 = 1000;
/// Pairs per write transaction.
pub const BATCH: usize = 10_000;

/// `i` as 16 decimal digits (cheap: the profile should show the engine, not formatting).
pub fn dec(mut i: u64) -> [u8; 16] {
    let mut b = [b'0'; 16];
    for d in b.iter_mut().rev() {
        *d = b'0' + (i % 10) as u8;
        i /= 10;
    }
    b
}

/// A permutation of 0..n (xorshift-driven Fisher-Yates, fixed seed).
pub fn permutation(n: u64, seed: u64) -> Vec<u64> {
    let mut v: Vec<u64> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..v.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

pub fn batches(
    env: &Env,
    order: &[u64],
    mut op: impl FnMut(&mut RwTxn<'_>, u64) -> cairn::Result<()>,
) -> cairn::Result<()> {
    for chunk in order.chunks(BATCH) {
        let mut w = env.write_txn()?;
        for &i in chunk {
            op(&mut w, i)?;
        }
        w.commit()?;
    }
    Ok(())
}
