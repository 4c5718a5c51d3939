//! Measures how long opening takes as the file grows (issue 22): a clean `Env::open` plus the
//! first read transaction, and the first open after a writer process was SIGKILLed in the
//! middle of its commits (recovery), in lazy, durable and logged mode. Not a benchmark of the
//! harness; the figures of docs/design.md "Opening: what it costs".
//!
//!   cargo run --release -p cairn --example open_time -- build DIR N
//!   cargo run --release -p cairn --example open_time -- measure DIR [opens] [kills]
//!
//! `build` writes N pairs (16-byte keys, 100-byte values, in a random order, 100,000 to a
//! write transaction, lazy mode) into DIR once: the random order leaves a free tree and the
//! tree shape of a file that was written, not loaded. `measure` times on that file:
//! - `clean`: after a commit of 100,000 puts and a flush (the state a load leaves), `opens`
//!   times open + read_txn in lazy and in durable mode (median, max);
//! - `killed`: `kills` times a child process (this program, `writer DIR MODE`) that commits
//!   small random transactions in a loop is SIGKILLed after a random delay, mostly inside a
//!   commit; then the open + read_txn that recovers is timed (median, max);
//! - `logged`: the same in logged mode, where the open also replays the log's records past
//!   the last flushed commit: that part is bounded by the log's size (`log_size`), not the
//!   data file's, and is reported apart.
//!
//! Every child writes with a new key stream, so the file changes a little with each kill.

use cairn::{Durability, Env, PutFlags};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Pairs per write transaction while building.
const BUILD_BATCH: u64 = 100_000;
/// The value every pair gets.
const VALUE: [u8; 100] = [0x5a; 100];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| args.get(i).map(String::as_str);
    match (arg(0), arg(1)) {
        (Some("build"), Some(dir)) => {
            let n = arg(2).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
            build(Path::new(dir), n)
        }
        (Some("measure"), Some(dir)) => {
            let opens = arg(2).and_then(|a| a.parse().ok()).unwrap_or(21);
            let kills = arg(3).and_then(|a| a.parse().ok()).unwrap_or(9);
            measure(Path::new(dir), opens, kills)
        }
        (Some("writer"), Some(dir)) => writer(Path::new(dir), mode(arg(2).unwrap_or("lazy"))?),
        _ => Err("usage: open_time build DIR N | measure DIR [opens] [kills]".into()),
    }
}

fn mode(name: &str) -> Result<Durability, Box<dyn std::error::Error>> {
    Ok(match name {
        "lazy" => Durability::Lazy,
        "durable" => Durability::Durable,
        "logged" => Durability::Logged,
        other => return Err(format!("unknown mode {other}").into()),
    })
}

/// A bijective mix of `i` (splitmix64's finalizer): the keys' random order.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Key `i`: 8 random-looking bytes (the order), then `i` (uniqueness).
fn key(i: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&mix(i).to_be_bytes());
    k[8..].copy_from_slice(&i.to_be_bytes());
    k
}

fn build(dir: &Path, n: u64) -> Result<(), Box<dyn std::error::Error>> {
    if dir.join("data.cairn").exists() {
        println!("{} exists: not rebuilt", dir.display());
        return Ok(());
    }
    let t = Instant::now();
    let env = Env::options().durability(Durability::Lazy).open(dir)?;
    let db = env.main_db();
    let mut i = 0;
    while i < n {
        let mut w = env.write_txn()?;
        for j in i..(i + BUILD_BATCH).min(n) {
            w.put(db, &key(j), &VALUE, PutFlags::empty())?;
        }
        w.commit()?;
        i += BUILD_BATCH;
    }
    env.sync()?;
    let r = env.read_txn()?;
    let entries = r.stat(db)?.entries;
    let free = r.free_runs()?.len();
    drop(r);
    drop(env);
    let bytes = std::fs::metadata(dir.join("data.cairn"))?.len();
    println!(
        "built {entries} pairs in {:.1} s: {} MB, {free} free runs",
        t.elapsed().as_secs_f64(),
        bytes / 1_000_000
    );
    Ok(())
}

/// Open + first read transaction, timed; checks the snapshot is readable (one key).
fn timed_open(dir: &Path, d: Durability) -> Result<Duration, Box<dyn std::error::Error>> {
    let t = Instant::now();
    let env = Env::options().durability(d).open(dir)?;
    let r = env.read_txn()?;
    let took = t.elapsed();
    if r.get(env.main_db(), &key(0))? != Some(&VALUE[..]) {
        return Err("key 0 is missing after open".into());
    }
    Ok(took)
}

fn summary(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "{name:<14} n={:<3} median {:>8.3} ms  min {:>8.3} ms  max {:>8.3} ms",
        v.len(),
        ms(v[v.len() / 2]),
        ms(v[0]),
        ms(v[v.len() - 1])
    );
}

fn measure(dir: &Path, opens: usize, kills: usize) -> Result<(), Box<dyn std::error::Error>> {
    let bytes = std::fs::metadata(dir.join("data.cairn"))?.len();
    println!("file: {} MB", bytes / 1_000_000);
    // Warm: the first open after the build may find the file's pages out of the cache.
    timed_open(dir, Durability::Lazy)?;
    // The last commit before the clean opens is a large one, as after a load: a lazy handle's
    // 100,000 puts and its flush (a steady commit listing every page written since the
    // previous flush).
    {
        let env = Env::options().durability(Durability::Lazy).open(dir)?;
        let seed = u64::from(std::process::id()) << 32 | 1 << 63;
        let mut w = env.write_txn()?;
        for i in 0..BUILD_BATCH {
            w.put(env.main_db(), &key(seed | i), &VALUE, PutFlags::empty())?;
        }
        w.commit()?;
        env.sync()?;
    }
    for (name, d) in [
        ("clean lazy", Durability::Lazy),
        ("clean durable", Durability::Durable),
    ] {
        let v = (0..opens)
            .map(|_| timed_open(dir, d))
            .collect::<Result<Vec<_>, _>>()?;
        summary(name, v);
    }
    for (name, m, d) in [
        ("killed lazy", "lazy", Durability::Lazy),
        ("killed durable", "durable", Durability::Durable),
        ("killed logged", "logged", Durability::Logged),
    ] {
        let mut v = Vec::new();
        let mut log_bytes = 0;
        for round in 0..kills {
            kill_writer(dir, m, round as u64)?;
            if d == Durability::Logged {
                log_bytes = std::fs::metadata(dir.join("data.cairn-log")).map_or(0, |m| m.len());
            }
            v.push(timed_open(dir, d)?);
        }
        summary(name, v);
        if d == Durability::Logged {
            println!(
                "  (log file {} MB; replay is bounded by it)",
                log_bytes >> 20
            );
        }
    }
    Ok(())
}

/// Starts a writer child, lets it commit for a while, and SIGKILLs it.
fn kill_writer(dir: &Path, mode: &str, round: u64) -> Result<(), Box<dyn std::error::Error>> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["writer", &dir.display().to_string(), mode])
        .stdout(Stdio::piped())
        .spawn()?;
    // The child prints a line once its first commit is done: past its own open.
    let mut out = std::io::BufReader::new(child.stdout.take().ok_or("no child stdout")?);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line)?;
    if line.trim() != "writing" {
        let _ = child.kill();
        return Err(format!("writer child said {line:?}").into());
    }
    std::thread::sleep(Duration::from_millis(150 + mix(round) % 200));
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// The child: commits transactions of 200 random puts until killed.
fn writer(dir: &Path, d: Durability) -> Result<(), Box<dyn std::error::Error>> {
    let env = Env::options().durability(d).open(dir)?;
    let db = env.main_db();
    let seed = u64::from(std::process::id()) << 32;
    let mut i = 0u64;
    loop {
        let mut w = env.write_txn()?;
        for _ in 0..200 {
            w.put(db, &key(seed | i), &VALUE, PutFlags::empty())?;
            i += 1;
        }
        w.commit()?;
        if i == 200 {
            println!("writing");
        }
    }
}
