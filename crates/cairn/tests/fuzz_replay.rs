//! The fuzz targets' logic (fuzz/fuzz_targets/*) as ordinary tests, so CI runs a short version:
//! every saved input under fuzz/regressions/<target>/ (seeds kept from the fuzzers' corpora, and
//! any crash fuzzing finds, kept as a regression test), then random inputs. `CAIRN_FUZZ_CASES` scales the random part
//! (default 2,000 per target; ops sequences take a tenth of that).

mod support;

use std::path::Path;
use support::Rng;

fn cases() -> u64 {
    std::env::var("CAIRN_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2000)
}

fn regressions(target: &str, run: fn(&[u8])) -> usize {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions")
        .join(target);
    let mut n = 0;
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for e in entries {
            let path = e.unwrap().path();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            let data = std::fs::read(&path).unwrap();
            eprintln!("replaying {}", path.display());
            run(&data);
            n += 1;
        }
    }
    n
}

fn random_bytes(rng: &mut Rng, max: u64) -> Vec<u8> {
    let len = rng.below(max + 1) as usize;
    (0..len).map(|_| rng.next() as u8).collect()
}

#[test]
fn open_walk() {
    regressions("open_walk", support::open_walk);
    support::open_walk(support::base_image());
    support::open_walk(b"");
    let mut rng = Rng(1);
    for c in 0..cases() / 4 {
        // Edit scripts: a handful of 5-byte edits, sealed or not.
        let mut d = random_bytes(&mut rng, 40);
        if let Some(b) = d.first_mut() {
            *b = c as u8;
        }
        support::open_walk(&d);
    }
}

#[test]
fn replay_log() {
    regressions("replay_log", support::replay_log);
    support::replay_log(b"");
    // The undamaged base replays whole: the six logged commits are there, the aborted level
    // is not (the edits below damage something that works).
    let (flushed, log) = support::base_log();
    let d = std::sync::Arc::new(cairn::storage::SimStorage::from_image(flushed, 64 << 20).unwrap());
    let l = std::sync::Arc::new(cairn::storage::SimStorage::from_image(log, 1 << 20).unwrap());
    let env = cairn::Env::with_storages(d, l, cairn::Env::options().max_dbs(8)).unwrap();
    let r = env.read_txn().unwrap();
    let side = r.open_db(Some("side")).unwrap();
    assert_eq!(r.stat(side).unwrap().entries, 48);
    assert_eq!(r.get(env.main_db(), b"aborted").unwrap(), None);
    drop(r);
    let mut rng = Rng(6);
    let len = support::base_log().1.len() as u64;
    for c in 0..cases() / 4 {
        // A few edits, most of them inside the records (the log's first kilobytes).
        let mut d = vec![c as u8];
        for _ in 0..1 + rng.below(6) {
            let at = if rng.below(4) == 0 {
                rng.below(len)
            } else {
                rng.below(2048)
            };
            d.extend_from_slice(&(at as u32).to_le_bytes());
            d.push(rng.next() as u8);
        }
        support::replay_log(&d);
    }
}

#[test]
fn decode_pages() {
    regressions("decode_pages", support::decode_pages);
    let mut rng = Rng(2);
    let base = support::base_image();
    for c in 0..cases() * 4 {
        let d = if c % 2 == 0 {
            random_bytes(&mut rng, 5000)
        } else {
            // A real page with a few bytes changed.
            let pages = (base.len() / 4096) as u64;
            let pg = rng.below(pages) as usize;
            let mut p = base[pg * 4096..(pg + 1) * 4096].to_vec();
            for _ in 0..1 + rng.below(4) {
                let at = rng.below(4096) as usize;
                p[at] = rng.next() as u8;
            }
            p
        };
        support::decode_pages(&d);
    }
}

#[test]
fn ops_model() {
    regressions("ops_model", support::ops_model);
    let mut rng = Rng(3);
    for _ in 0..cases() / 10 {
        let d = random_bytes(&mut rng, 400);
        support::ops_model(&d);
    }
}
