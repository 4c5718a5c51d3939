//! The lazy mode's space (docs/design.md, "Lazy commits"): the last steady snapshot, the
//! recovery point, keeps every page that later commits copy or drop until the next flush, so a
//! lazy file could hold the tree twice. With `EnvOptions::flush_for_space` a lazy commit
//! flushes once those held pages reach a quarter of the pages in use, whatever the time since
//! the last flush. The checks here
//! count pages, not time: the time rule is set to an hour, and `Env::sync` every 100 commits
//! stands in for it (a flush a second at 100 commits a second), so that a recovery point
//! holding the tree exists at all; between those, only the space rule flushes.
//!
//! The bound, derived from the tree: at the commit that flushes, the held pages H are under
//! npages / 4 plus what that one commit freed (C, at most its dirty pages); the pages in use are
//! the tree T, the held pages, and the copies the last commits freed but had not reused yet (at
//! most 2C: this commit's, pending, and the previous one's, reusable), so
//! npages <= T + npages / 4 + 3C, that is npages <= 4/3 (T + 3C). Without the rule, H grows to
//! the whole tree and npages to about 2T (the control below checks that it does exceed the
//! bound, so the bound can fail).

use cairn::{Durability, Env, PutFlags};
use std::time::Duration;

const N: u64 = 200_000;
const PER_TXN: u64 = 500;

/// A permutation of 0..n from a seed (multiplication by an odd constant modulo a power of two,
/// restricted to 0..n by cycle walking): every key once, in a scattered order.
fn order(n: u64, seed: u64) -> impl Iterator<Item = u64> {
    let m = n.next_power_of_two();
    (0..m)
        .map(move |i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15 | 1).wrapping_add(seed)) & (m - 1))
        .filter(move |&k| k < n)
}

/// Fills N keys in random order, then overwrites them all in another; returns the pages in
/// use, the file's length in pages and the tree's pages.
fn fill_and_overwrite(space: bool) -> (u64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .durability(Durability::Lazy)
        .sync_every(Some(Duration::from_secs(3600)))
        .flush_for_space(space)
        .open(dir.path())
        .unwrap();
    let db = env.main_db();
    for (pass, seed) in [(0u8, 7u64), (1, 1_000_003)] {
        let keys: Vec<u64> = order(N, seed).collect();
        assert_eq!(keys.len() as u64, N);
        for (i, chunk) in keys.chunks(PER_TXN as usize).enumerate() {
            if i % 100 == 99 {
                env.sync().unwrap();
            }
            let mut w = env.write_txn().unwrap();
            for &k in chunk {
                let value = [pass ^ k as u8; 100];
                w.put(db, format!("{k:016}").as_bytes(), &value, PutFlags::empty())
                    .unwrap();
            }
            w.commit().unwrap();
        }
    }
    let info = env.info().unwrap();
    let r = env.read_txn().unwrap();
    let st = r.stat(db).unwrap();
    assert_eq!(st.entries, N);
    assert!(r.check().unwrap().is_ok());
    let tree = st.branch_pages + st.leaf_pages + st.overflow_pages;
    let ps = info.page_size as u64;
    (info.last_pgno + 1, info.file_size / ps, tree)
}

#[test]
fn lazy_file_stays_within_a_third_above_its_tree() {
    let (npages, file_pages, tree) = fill_and_overwrite(true);
    // A commit of PER_TXN random puts copies at most one leaf per put plus the branches above
    // them and the free tree's pages: PER_TXN + tree / 64 bounds it with room to spare (the
    // branches are about one in 20 of the tree's pages, and a commit copies a share of them).
    let churn = PER_TXN + tree / 64;
    let bound = (tree + 3 * churn) * 4 / 3;
    eprintln!("space rule: npages {npages}, file {file_pages} pages, tree {tree}, bound {bound}");
    assert!(
        npages <= bound,
        "{npages} pages in use for a tree of {tree} (bound {bound})"
    );
    // The file's preallocated tail: at most one growth step (an eighth of the file) past the
    // pages in use, or the 1 MiB minimum step.
    assert!(
        file_pages <= npages + (npages / 8).max(256) + 1,
        "file of {file_pages} pages for {npages} in use"
    );

    // The control: without the rule (the default), only the syncs every 100 commits give the
    // held pages back, and the same load ends above the bound, so the bound above tests the
    // rule.
    let (npages, _, tree) = fill_and_overwrite(false);
    let bound = (tree + 3 * churn) * 4 / 3;
    eprintln!("no flush: npages {npages}, tree {tree}, bound {bound}");
    assert!(
        npages > bound,
        "without flushes {npages} pages in use for a tree of {tree}: the bound tests nothing"
    );
}
