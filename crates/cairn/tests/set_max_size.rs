//! `Env::set_max_size`: the size limit of an open environment can be raised up to the
//! reservation, and lowered.
use cairn::{Env, Error, PutFlags};

#[test]
fn raising_the_limit_lets_a_full_database_grow() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .max_size(Some(1 << 20))
        .map_reserve(64 << 20)
        .open(dir.path())
        .unwrap();
    let db = env.main_db();
    let val = vec![7u8; 4000];
    let mut full_at = None;
    for i in 0u32..1000 {
        let mut w = env.write_txn().unwrap();
        let r = match w.put(db, &i.to_be_bytes(), &val, PutFlags::empty()) {
            Ok(()) => w.commit(),
            Err(e) => Err(e),
        };
        match r {
            Ok(()) => {}
            Err(Error::MapFull { limit }) => {
                assert_eq!(limit, 1 << 20);
                full_at = Some(i);
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let full_at = full_at.expect("the 1 MiB limit is reached");
    assert!(matches!(
        env.set_max_size(Some(1 << 30)),
        Err(Error::Invalid(_))
    ));
    env.set_max_size(Some(8 << 20)).unwrap();
    assert_eq!(env.info().unwrap().max_size, Some(8 << 20));
    let mut w = env.write_txn().unwrap();
    for i in full_at..full_at + 500 {
        w.put(db, &i.to_be_bytes(), &val, PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    env.set_max_size(None).unwrap();
    assert_eq!(env.info().unwrap().max_size, None);
}

#[test]
fn without_map_reserve_the_limit_bounds_the_reservation() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options()
        .max_size(Some(2 << 20))
        .open(dir.path())
        .unwrap();
    assert!(env.set_max_size(Some(4 << 20)).is_err());
    env.set_max_size(Some(1 << 20)).unwrap();
}
