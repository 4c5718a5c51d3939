//! Waiting for the writer is first come, first served once a waiter starves: a thread that has
//! waited past the starvation period gets the next hand-off, even against the thread that
//! releases the writer and asks again at once (which, unchecked, wins every time: it holds the
//! CPU while the waiter is still being woken).

use cairn::{Env, PutFlags};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[test]
fn a_starved_waiter_is_served_before_a_returning_writer() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path()).unwrap();
    let db = env.main_db();
    for round in 0..5u8 {
        let order = Arc::new(Mutex::new(Vec::new()));
        let held = env.write_txn().unwrap();
        let waiter = {
            let (env, order) = (env.clone(), order.clone());
            std::thread::spawn(move || {
                let mut w = env.write_txn().unwrap();
                order.lock().unwrap().push("waiter");
                w.put(db, b"waiter", &[round], PutFlags::empty()).unwrap();
                w.commit().unwrap();
            })
        };
        // Well past the starvation period (20 ms): the waiter has claimed the next hand-off.
        std::thread::sleep(Duration::from_millis(150));
        drop(held);
        let mut again = env.write_txn().unwrap();
        order.lock().unwrap().push("returning");
        again
            .put(db, b"returning", &[round], PutFlags::empty())
            .unwrap();
        again.commit().unwrap();
        waiter.join().unwrap();
        assert_eq!(
            *order.lock().unwrap(),
            ["waiter", "returning"],
            "round {round}: the returning writer went first"
        );
    }
}
