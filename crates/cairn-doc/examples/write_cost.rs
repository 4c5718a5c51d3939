//! A quick look at what indexes add to a write (not the benchmark, which is the
//! server's load test): N puts of small documents, one transaction per 100 puts, lazy mode
//! (no flush: the layer's own cost), with 0, 1 and 4 indexes; then a range query of 100
//! documents; the steps of an index built over the loaded collection. `cargo run -p cairn-doc --release --example write_cost [N [INDEXES]]`
//! (under load, count instructions: `perf stat -e instructions:u` with one INDEXES value).

use cairn::{Durability, Env};
use cairn_doc::{Collection, IndexSpec, Query};
use serde_json::json;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args().nth(1).map_or(Ok(50_000), |s| s.parse())?;
    let only: Option<usize> = std::env::args().nth(2).map(|s| s.parse()).transpose()?;
    for k in [0usize, 1, 4] {
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let dir = tempfile::tempdir()?;
        let env = Env::options()
            .durability(Durability::Lazy)
            .open(dir.path())?;
        let c = Collection::open(&env, "c")?;
        let mut w = env.write_txn()?;
        for (i, p) in ["/a", "/b", "/c", "/d"].iter().take(k).enumerate() {
            c.declare_index(&mut w, &format!("i{i}"), IndexSpec::new(p))?;
        }
        w.commit()?;
        let t = Instant::now();
        for chunk in 0..n / 100 {
            let mut w = env.write_txn()?;
            for j in 0..100 {
                let i = chunk * 100 + j;
                let doc = json!({"a": i % 1000, "b": format!("s{}", i % 777), "c": i % 2 == 0,
                                 "d": (i * 7919) % 10007, "body": "x".repeat(100)});
                c.put(
                    &mut w,
                    &format!("doc{:08}", (i * 2_654_435_761) % (1 << 32)),
                    &doc,
                )?;
            }
            w.commit()?;
        }
        let per = t.elapsed().as_secs_f64() * 1e6 / n as f64;
        let r = env.read_txn()?;
        let q = if k > 0 {
            let t = Instant::now();
            let reps = 1000;
            for i in 0..reps {
                let p = c.query(
                    &r,
                    "i0",
                    &Query::range(json!(i % 900), json!(999)).limit(100),
                )?;
                assert_eq!(p.docs.len(), 100);
            }
            format!(
                ", range query of 100 docs {:.1} us",
                t.elapsed().as_secs_f64() * 1e6 / reps as f64
            )
        } else {
            String::new()
        };
        println!("{k} indexes: {per:.2} us per put{q}");
        drop(r);
        if k == 0 {
            // An index declared on the loaded collection, built in steps of the default
            // batch: how long a writer may wait behind one step.
            let mut w = env.write_txn()?;
            c.declare_index(&mut w, "late", IndexSpec::new("/d"))?;
            w.commit()?;
            let (mut steps, mut worst, t) = (0, 0f64, Instant::now());
            loop {
                let s = Instant::now();
                let mut w = env.write_txn()?;
                let st = c.build_step(&mut w, "late", cairn_doc::DEFAULT_BUILD_BATCH)?;
                w.commit()?;
                worst = worst.max(s.elapsed().as_secs_f64() * 1e3);
                steps += 1;
                if st == cairn_doc::IndexState::Ready {
                    break;
                }
            }
            let all = t.elapsed().as_secs_f64() * 1e3;
            println!(
                "  build of {n} documents: {steps} steps, {all:.0} ms, worst step {worst:.1} ms"
            );
        }
    }
    Ok(())
}
