//! The linearizability checker (`cairn_raft::history`) on histories made by hand and by a
//! simulated register: it rejects stale reads, lost writes and reads of values never written,
//! accepts concurrent histories that have a linearization (unknown-outcome puts included),
//! agrees with an exhaustive search on thousands of small random histories, and decides a
//! history of thousands of operations within its budget.

use cairn_raft::history::{check, CheckError, History, Kind, Operation, Outcome, Rng, Workload};
use std::time::Duration;

const BUDGET: u64 = 10_000_000;

fn put(key: &str, v: &str, call: u64, ret: Option<u64>) -> Operation {
    Operation {
        client: 0,
        key: key.into(),
        kind: Kind::Put(Some(v.into())),
        call,
        ret,
    }
}

fn get(key: &str, v: Option<&str>, call: u64, ret: u64) -> Operation {
    Operation {
        client: 1,
        key: key.into(),
        kind: Kind::Get(v.map(str::to_string)),
        call,
        ret: Some(ret),
    }
}

fn linearizable(ops: &[Operation]) -> bool {
    match check(ops, BUDGET) {
        Ok(_) => true,
        Err(CheckError::NotLinearizable { .. }) => false,
        Err(e) => panic!("{e}"),
    }
}

/// A read of a value overwritten before the read began.
fn stale() -> [Operation; 3] {
    [
        put("k", "a", 0, Some(10)),
        put("k", "b", 20, Some(30)),
        get("k", Some("a"), 40, 50),
    ]
}

#[test]
fn a_stale_read_is_rejected() {
    let h = stale();
    assert!(!linearizable(&h));
    // The same read overlapping the second put may see either value.
    let h = [
        put("k", "a", 0, Some(10)),
        put("k", "b", 20, Some(45)),
        get("k", Some("a"), 40, 50),
    ];
    assert!(linearizable(&h));
}

#[test]
fn a_lost_write_is_rejected() {
    let h = [put("k", "a", 0, Some(10)), get("k", None, 20, 30)];
    assert!(!linearizable(&h));
    let h = [
        put("k", "a", 0, Some(10)),
        get("k", Some("a"), 20, 30),
        put("k", "b", 40, Some(50)),
        get("k", Some("a"), 60, 70),
    ];
    assert!(!linearizable(&h));
}

#[test]
fn a_read_of_a_value_never_written_is_rejected() {
    let h = [put("k", "a", 0, Some(10)), get("k", Some("z"), 20, 30)];
    assert!(!linearizable(&h));
    // Nor a value written to another key.
    let h = [put("k1", "a", 0, Some(10)), get("k2", Some("a"), 20, 30)];
    assert!(!linearizable(&h));
}

#[test]
fn concurrent_reads_may_see_either_side_of_a_put_but_never_go_back() {
    let ok = [
        put("k", "a", 0, Some(100)),
        get("k", None, 10, 20),
        get("k", Some("a"), 30, 40),
        get("k", Some("a"), 50, 60),
    ];
    assert!(linearizable(&ok));
    let back = [
        put("k", "a", 0, Some(100)),
        get("k", Some("a"), 10, 20),
        get("k", None, 30, 40),
    ];
    assert!(!linearizable(&back));
    // Two overlapping reads may disagree: each linearizes on its own side of the put.
    let overlap = [
        put("k", "a", 0, Some(100)),
        get("k", Some("a"), 10, 40),
        get("k", None, 20, 30),
    ];
    assert!(linearizable(&overlap));
}

#[test]
fn the_search_backtracks_over_concurrent_puts() {
    // Three overlapping puts; the reads after them fix the order b, a, c only through
    // backtracking (the first order tried, by invocation, is a, b, c).
    let h = [
        put("k", "a", 0, Some(50)),
        put("k", "b", 1, Some(50)),
        put("k", "c", 2, Some(90)),
        get("k", Some("b"), 3, 10),
        get("k", Some("a"), 11, 20),
        get("k", Some("c"), 95, 99),
    ];
    assert!(linearizable(&h));
    let mut bad = h.to_vec();
    bad.push(get("k", Some("b"), 100, 110));
    assert!(!linearizable(&bad));
}

#[test]
fn a_put_of_unknown_outcome_may_take_effect_late_or_never() {
    // Seen long after its client gave up on it.
    let h = [
        put("k", "a", 0, Some(10)),
        put("k", "x", 50, None),
        get("k", Some("a"), 60, 70),
        get("k", Some("x"), 1000, 1010),
    ];
    assert!(linearizable(&h));
    // Never seen at all.
    let h = [put("k", "x", 50, None), get("k", None, 60, 70)];
    assert!(linearizable(&h));
    // But never before it was invoked.
    let h = [put("k", "x", 50, None), get("k", Some("x"), 10, 20)];
    assert!(!linearizable(&h));
    // And it takes effect once: after it was seen and overwritten, it does not come back.
    let h = [
        put("k", "x", 0, None),
        get("k", Some("x"), 10, 20),
        put("k", "b", 30, Some(40)),
        get("k", Some("b"), 50, 60),
        get("k", Some("x"), 70, 80),
    ];
    assert!(!linearizable(&h));
}

#[test]
fn equal_instants_overlap() {
    let h = [put("k", "a", 0, Some(10)), get("k", None, 10, 20)];
    assert!(linearizable(&h));
}

#[test]
fn bad_input_and_the_budget_are_typed_errors() {
    let mut read = get("k", None, 0, 10);
    read.ret = None;
    assert!(matches!(
        check(&[read], BUDGET),
        Err(CheckError::BadInput { .. })
    ));
    assert!(matches!(
        check(&[put("k", "a", 10, Some(5))], BUDGET),
        Err(CheckError::BadInput { .. })
    ));
    let h = [put("k", "a", 0, Some(10)), get("k", Some("a"), 20, 30)];
    assert!(matches!(check(&h, 1), Err(CheckError::Undecided { .. })));
    let done = check(&h, BUDGET).unwrap();
    assert_eq!((done.keys, done.ops, done.unknown), (1, 2, 0));
}

#[test]
fn a_violation_report_names_the_key_and_where_the_search_stopped() {
    let h = stale();
    match check(&h, BUDGET) {
        Err(e @ CheckError::NotLinearizable { .. }) => {
            let text = e.to_string();
            assert!(text.contains("key \"k\""), "{text}");
            let CheckError::NotLinearizable { longest, .. } = e else {
                unreachable!()
            };
            assert_eq!(longest.len(), 2, "{longest:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// Every order of `ops` that respects real time, tried against the register.
fn exhaustive(ops: &[Operation]) -> bool {
    fn go(ops: &[Operation], used: &mut Vec<bool>, state: Option<String>) -> bool {
        if used.iter().all(|&u| u) {
            return true;
        }
        for i in 0..ops.len() {
            if used[i] {
                continue;
            }
            // `i` may come next only if no unused operation was answered before `i` began.
            let blocked = (0..ops.len())
                .any(|j| j != i && !used[j] && ops[j].ret.is_some_and(|r| r < ops[i].call));
            if blocked {
                continue;
            }
            let after = match &ops[i].kind {
                Kind::Put(v) => v.clone(),
                Kind::Get(v) if *v == state => state.clone(),
                Kind::Get(_) => continue,
            };
            used[i] = true;
            if go(ops, used, after) {
                return true;
            }
            used[i] = false;
        }
        false
    }
    go(ops, &mut vec![false; ops.len()], None)
}

#[test]
fn agrees_with_an_exhaustive_search_on_small_random_histories() {
    let mut rng = Rng::new(0x2545_F491_4F6C_DD1D);
    let values = ["a", "b", "c"];
    let (mut yes, mut no) = (0, 0);
    for _ in 0..4000 {
        let n = 1 + rng.below(7) as usize;
        let ops: Vec<Operation> = (0..n)
            .map(|_| {
                let call = rng.below(40);
                let ret = call + rng.below(20);
                let v = values[rng.below(3) as usize];
                match rng.below(5) {
                    0 => put("k", v, call, None),
                    1 | 2 => put("k", v, call, Some(ret)),
                    3 => get("k", None, call, ret),
                    _ => get("k", Some(v), call, ret),
                }
            })
            .collect();
        let want = exhaustive(&ops);
        assert_eq!(linearizable(&ops), want, "{ops:#?}");
        if want {
            yes += 1;
        } else {
            no += 1;
        }
    }
    // Both verdicts were exercised, many times.
    assert!(yes > 500 && no > 500, "{yes} linearizable, {no} not");
}

/// A history of a real register: `clients` clients each perform `per_client` operations one
/// after another (the workload of the cluster tests), each taking effect atomically at a random
/// instant inside its interval; some puts lose their answer. Linearizable by construction.
fn simulated(clients: u64, per_client: usize, keys: u64, rng: &mut Rng) -> Vec<Operation> {
    let mut planned = Vec::new();
    for c in 0..clients {
        let mut w = Workload::new(c, keys);
        let mut t = rng.below(100);
        for _ in 0..per_client {
            let (key, value) = w.next_op();
            let call = t;
            let point = call + 1 + rng.below(50);
            let ret = point + 1 + rng.below(50);
            t = ret + 1 + rng.below(20);
            planned.push((point, c, key, value, call, ret));
        }
    }
    planned.sort_by_key(|p| p.0);
    let mut map = std::collections::BTreeMap::<String, String>::new();
    let mut ops = Vec::new();
    for (_, client, key, value, call, ret) in planned {
        let kind = match value {
            Some(v) => {
                map.insert(key.clone(), v.clone());
                Kind::Put(Some(v))
            }
            None => Kind::Get(map.get(&key).cloned()),
        };
        let unknown = matches!(kind, Kind::Put(_)) && rng.below(20) == 0;
        ops.push(Operation {
            client,
            key,
            kind,
            call,
            ret: (!unknown).then_some(ret),
        });
    }
    ops
}

#[test]
fn a_long_concurrent_history_is_decided_within_the_budget() {
    let mut rng = Rng::new(7);
    let ops = simulated(8, 400, 4, &mut rng);
    let done = check(&ops, BUDGET).expect("a register's own history");
    assert_eq!(done.ops, 3200);
    assert!(done.unknown > 0);
    eprintln!("{done:?}");

    // Each corruption of one read is found: a value never written, and an overwritten one.
    let reads: Vec<usize> = (0..ops.len())
        .filter(|&i| matches!(&ops[i].kind, Kind::Get(Some(_))))
        .collect();
    let mut bad = ops.clone();
    bad[reads[reads.len() / 2]].kind = Kind::Get(Some("never".into()));
    assert!(!linearizable(&bad));
    // A read late in the history that returns the key's first value, long overwritten.
    let late = *reads.last().unwrap();
    let key = ops[late].key.clone();
    let first = ops
        .iter()
        .filter(|o| o.key == key && o.ret.is_some())
        .find_map(|o| match &o.kind {
            Kind::Put(v) => v.clone(),
            Kind::Get(_) => None,
        })
        .unwrap();
    let mut stale = ops.clone();
    stale[late].kind = Kind::Get(Some(first));
    assert!(!linearizable(&stale));
}

#[test]
fn many_unread_puts_of_unknown_outcome_do_not_blow_up_the_search() {
    // A client retrying against a dead leader: 200 puts with no answer, none of them seen,
    // between an acknowledged put and the reads of it. Each could be linearized anywhere
    // after its invocation; none can explain a read, and none prevents one.
    let mut h = vec![put("k", "a", 0, Some(10))];
    for i in 0..200u64 {
        h.push(put("k", &format!("x{i}"), 20 + 2 * i, None));
        h.push(get("k", Some("a"), 21 + 2 * i, 22 + 2 * i));
    }
    let done = check(&h, 100_000).expect("linearizable within a small budget");
    assert_eq!(done.unknown, 200);
    // One of them seen, after an acknowledged overwrite, is still checked: "b" was the last
    // acknowledged put before the read, but x7 may be linearized after it.
    h.push(put("k", "b", 500, Some(510)));
    h.push(get("k", Some("x7"), 520, 530));
    assert!(linearizable(&h));
    // ... but not if the read began before x7 was invoked.
    h.push(get("k", Some("x150"), 0, 5));
    assert!(!linearizable(&h));
}

#[test]
fn a_bounded_read_may_see_the_state_no_earlier_than_its_bound_before_it_began() {
    // "a" acknowledged at 10, overwritten by "b" acknowledged at 100 ms.
    let ms = 1_000_000u64;
    let h = History::new();
    h.record(put("k", "a", 0, Some(10)));
    h.record(put("k", "b", 20, Some(100 * ms)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let read = |bound_ms: u64| {
        let h = &h;
        async move {
            h.perform_bounded_read(7, "k", Duration::from_millis(bound_ms), async {
                Outcome::Read(Some("a".into()))
            })
            .await
        }
    };
    rt.block_on(async {
        // Begun after 150 ms: a bound of 100 ms reaches back to 50 ms, before "b" was
        // acknowledged, so "a" is allowed; a bound of 10 ms does not reach it.
        while h.now() < 150 * ms {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let begun = h.now();
        assert_eq!(read(begun / ms - 50).await, Outcome::Read(Some("a".into())));
    });
    let ops = h.operations();
    assert!(ops[2].call <= 50 * ms + ms, "{:?}", ops[2]);
    assert!(linearizable(&ops));
    rt.block_on(async {
        read(10).await;
    });
    let ops = h.operations();
    assert!(
        !linearizable(&ops),
        "a read of a value overwritten past its bound"
    );
    // A refused read is not recorded.
    rt.block_on(async {
        let h = &h;
        let o = h
            .perform_bounded_read(7, "k", Duration::from_millis(10), async {
                Outcome::Unknown
            })
            .await;
        assert_eq!(o, Outcome::Unknown);
    });
    assert_eq!(h.operations().len(), ops.len());
}
