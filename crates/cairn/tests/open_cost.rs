//! Opening costs what recovery checks, not what the file holds: the free tree is read by a
//! handle's first write transaction, never at open (docs/design.md, "Opening after a crash").

use cairn::{Durability, Env, PutFlags};

#[test]
fn the_free_tree_is_read_at_the_first_write_not_at_open() {
    for mode in [Durability::Durable, Durability::Lazy] {
        let dir = tempfile::tempdir().unwrap();
        {
            let env = Env::options().durability(mode).open(dir.path()).unwrap();
            let db = env.main_db();
            for round in 0..20u32 {
                let mut w = env.write_txn().unwrap();
                for i in 0..500u32 {
                    let k = (i.wrapping_mul(2_654_435_761) ^ round).to_be_bytes();
                    w.put(db, &k, &[round as u8; 300], PutFlags::empty())
                        .unwrap();
                }
                w.commit().unwrap();
            }
            let r = env.read_txn().unwrap();
            assert!(
                !r.free_runs().unwrap().is_empty(),
                "{mode:?}: no free run to load"
            );
        }
        let env = Env::options().durability(mode).open(dir.path()).unwrap();
        let info = env.info().unwrap();
        assert_eq!(
            (info.free_pages, info.pending_pages),
            (0, 0),
            "{mode:?}: opening read the free tree"
        );
        // Reads need no free tree.
        assert!(env.read_txn().unwrap().stat(env.main_db()).unwrap().entries > 0);
        let w = env.write_txn().unwrap();
        w.commit().unwrap();
        let info = env.info().unwrap();
        assert!(
            info.free_pages + info.pending_pages > 0,
            "{mode:?}: the first write transaction did not read the free tree"
        );
        assert!(env.read_txn().unwrap().check().unwrap().is_ok());
    }
}
