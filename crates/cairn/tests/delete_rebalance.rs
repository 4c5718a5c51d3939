//! Random deletes over trees with a small fan-out (long keys), so that branch pages are often
//! left with one child beside a sibling too full to absorb them, then lose that child too.
//! Regression: such an emptied child made deletes fail with "branch with one empty child"
//! (found by the 1M-record benchmark). The checker runs after every commit.

use cairn::{Env, PutFlags};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn run(seed: u64, n: u64, klen: usize) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let db = env.main_db();
    let mut rng = Rng(seed);
    // A long common part before the distinguishing digits: separators are long too.
    let key = |i: u64, pad: usize| {
        let mut k = vec![b'k'; pad];
        k.extend_from_slice(format!("{i:012}").as_bytes());
        k
    };
    let mut keys: Vec<Vec<u8>> = (0..n).map(|i| key(i, (i as usize * 7919) % klen)).collect();
    let mut w = env.write_txn().unwrap();
    for k in &keys {
        w.put(db, k, &[1u8; 10], PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    // Delete in random order, a few per transaction.
    for i in (1..keys.len()).rev() {
        let j = (rng.next() % (i as u64 + 1)) as usize;
        keys.swap(i, j);
    }
    for chunk in keys.chunks(25) {
        let mut w = env.write_txn().unwrap();
        for k in chunk {
            assert!(w.delete(db, k).unwrap(), "seed {seed}: key missing");
        }
        w.commit().unwrap();
        let r = env.read_txn().unwrap();
        let rep = r.check().unwrap();
        assert!(rep.is_ok(), "seed {seed}: {:?}", rep.problems);
    }
    assert_eq!(env.read_txn().unwrap().stat(db).unwrap().entries, 0);
}

#[test]
fn random_deletes_with_long_keys() {
    for seed in 1..=6 {
        run(seed, 3000, 900);
    }
}

#[test]
fn random_deletes_with_mixed_keys() {
    for seed in 11..=14 {
        run(seed, 6000, 300);
    }
}
