//! The reader against environments written by real LMDB (py-lmdb or Debian's python3-lmdb,
//! through tests/gen_lmdb.py; MDB_REVERSEDUP through Debian's liblmdb and
//! tests/gen_reversedup.c), compared pair by pair with what LMDB's own cursors read, and
//! against hostile files: truncated, bytes flipped in every page, crafted cycles,
//! out-of-range page numbers and the corruptions of py-lmdb's CVE tests, each of which must
//! give an error (never a panic or a hang).

use cairn_lmdb::{format, Error, LmdbEnv};
use std::fmt::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "support/oracle.rs"]
mod oracle;
use oracle::gen;

fn need_python() -> Option<PathBuf> {
    oracle::need_python("real-LMDB tests")
}

fn hex(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        write!(s, "{x:02x}").unwrap();
    }
    s
}

/// What the reader reads, in gen_lmdb.py's expected.txt format.
fn ours(env: &LmdbEnv) -> String {
    let mut s = String::from("db\n");
    let mut p = env.main_pairs();
    while let Some((k, v)) = p.next().unwrap() {
        writeln!(s, "{} {}", hex(k), hex(v)).unwrap();
    }
    for d in env.named_dbs().unwrap() {
        writeln!(s, "db {}", d.name_lossy()).unwrap();
        let mut p = env.pairs(&d.record);
        while let Some((k, v)) = p.next().unwrap() {
            writeln!(s, "{} {}", hex(k), hex(v)).unwrap();
        }
    }
    s
}

fn compare(dir: &Path, env_path: &Path, no_subdir: Option<bool>) {
    let env = LmdbEnv::open(env_path, no_subdir).unwrap();
    let want = std::fs::read_to_string(dir.join("expected.txt")).unwrap();
    let got = ours(&env);
    if got != want {
        let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
        let i = g
            .iter()
            .zip(&w)
            .position(|(a, b)| a != b)
            .unwrap_or(g.len().min(w.len()));
        panic!(
            "reader and LMDB differ at line {i} ({} vs {} lines): ours {:?}, LMDB's {:?}",
            g.len(),
            w.len(),
            g.get(i),
            w.get(i)
        );
    }
}

#[test]
fn every_flag_combination_reads_as_lmdb_reads_it() {
    let Some(py) = need_python() else { return };
    for seed in 1..=3 {
        let d = gen(&py, "flags", seed);
        compare(d.path(), &d.path().join("env"), None);
        let env = LmdbEnv::open(&d.path().join("env"), None).unwrap();
        let flags: Vec<u16> = env
            .named_dbs()
            .unwrap()
            .iter()
            .map(|d| d.record.db_flags())
            .collect();
        assert!(flags.contains(&(format::DUPSORT | format::DUPFIXED | format::INTEGERDUP)));
        assert!(flags.contains(&format::REVERSEKEY));
        // Big values went to overflow pages, many duplicates to sub-trees.
        let total_ov: u64 = env
            .named_dbs()
            .unwrap()
            .iter()
            .map(|d| d.record.overflow_pages)
            .sum();
        assert!(total_ov > 0, "no overflow pages generated");
    }
}

#[test]
fn a_key_with_100000_values_reads_whole() {
    let Some(py) = need_python() else { return };
    let d = gen(&py, "bigdup", 5);
    compare(d.path(), &d.path().join("env"), None);
    let env = LmdbEnv::open(&d.path().join("env"), None).unwrap();
    let db = env.named_db(b"d").unwrap().unwrap();
    assert_eq!(db.record.entries, 100_002);
}

#[test]
fn nosubdir_layout() {
    let Some(py) = need_python() else { return };
    let d = gen(&py, "nosubdir", 9);
    let p = d.path().join("env.mdb");
    compare(d.path(), &p, None);
    compare(d.path(), &p, Some(true));
    assert_eq!(cairn_lmdb::files(&p, None).1, d.path().join("env.mdb-lock"));
}

#[test]
fn reversedup_through_lmdbs_c_api() {
    let Some(py) = need_python() else { return };
    let d = tempfile::tempdir().unwrap();
    let exe = d.path().join("gen_reversedup");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gen_reversedup.c");
    let built = Command::new("cc")
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-llmdb")
        .output();
    if !built.is_ok_and(|o| o.status.success()) {
        eprintln!("WARNING: cannot build tests/gen_reversedup.c against liblmdb (apt-get install liblmdb-dev): REVERSEDUP test skipped");
        return;
    }
    std::fs::create_dir(d.path().join("env")).unwrap();
    assert!(Command::new(&exe)
        .arg(d.path().join("env"))
        .arg("11")
        .status()
        .unwrap()
        .success());
    let o = Command::new(&py)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/gen_lmdb.py"))
        .arg(d.path())
        .arg("0")
        .arg("expect")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    compare(d.path(), &d.path().join("env"), None);
}

/// Opens and reads everything: the free, main and every named database.
fn read_all(path: &Path) -> Result<u64, Error> {
    let env = LmdbEnv::open(path, None)?;
    let mut n = 0;
    for rec in [env.free_db()] {
        let mut p = env.pairs(&rec);
        while p.next()?.is_some() {
            n += 1;
        }
    }
    let mut p = env.main_pairs();
    while p.next()?.is_some() {
        n += 1;
    }
    for d in env.named_dbs()? {
        let mut p = env.pairs(&d.record);
        while p.next()?.is_some() {
            n += 1;
        }
    }
    Ok(n)
}

struct Fixture {
    _dir: tempfile::TempDir,
    env: PathBuf,
    bytes: Vec<u8>,
    psize: usize,
    /// Pages some tree of the snapshot uses (free pages keep stale contents that no walk
    /// reads, so damage there is harmless).
    live: Vec<bool>,
}

fn fixture(py: &Path, kind: &str, seed: u64) -> Fixture {
    let dir = gen(py, kind, seed);
    let env = dir.path().join("env");
    let bytes = std::fs::read(env.join("data.mdb")).unwrap();
    let psize = u32::from_le_bytes(bytes[40..44].try_into().unwrap()) as usize;
    let e = LmdbEnv::open(&env, None).unwrap();
    let mut live = vec![false; bytes.len() / psize];
    let mut mark = |p: &cairn_lmdb::Pairs<'_>| {
        for (i, l) in live.iter_mut().enumerate() {
            *l |= p.seen().contains(i as u64);
        }
    };
    let mut recs = vec![e.main_db()];
    recs.extend(e.named_dbs().unwrap().into_iter().map(|d| d.record));
    for (i, r) in recs.iter().enumerate() {
        let mut p = if i == 0 { e.main_pairs() } else { e.pairs(r) };
        while p.next().unwrap().is_some() {}
        mark(&p);
    }
    drop(e);
    Fixture {
        _dir: dir,
        env,
        bytes,
        psize,
        live,
    }
}

impl Fixture {
    /// Writes `bytes` as the data file and reads everything.
    fn with(&self, bytes: &[u8]) -> Result<u64, Error> {
        std::fs::write(self.env.join("data.mdb"), bytes).unwrap();
        read_all(&self.env)
    }

    fn pages(&self) -> usize {
        self.bytes.len() / self.psize
    }

    fn flags(&self, p: usize) -> u16 {
        u16::from_le_bytes(
            self.bytes[p * self.psize + 10..p * self.psize + 12]
                .try_into()
                .unwrap(),
        )
    }

    /// Pages of the snapshot that hold `flag`.
    fn pages_with(&self, flag: u16) -> Vec<usize> {
        (2..self.pages())
            .filter(|&p| self.live[p])
            .filter(|&p| {
                // Pages inside an overflow run have no header: their "flags" are data, and
                // the first page of each run is marked live with them. Exact kinds only.
                self.flags(p) & !format::P_DIRTY == flag
            })
            .collect()
    }

    fn patched(&self, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut b = self.bytes.clone();
        f(&mut b);
        b
    }
}

/// A named corruption.
type Patch<T> = Box<dyn Fn(&mut T)>;

fn put16(b: &mut [u8], off: usize, v: u16) {
    b[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// Both metas patched the same way (with one intact the reader rightly uses it).
fn both_metas(b: &mut [u8], psize: usize, f: impl Fn(&mut [u8])) {
    f(&mut b[..psize]);
    f(&mut b[psize..2 * psize]);
}

#[track_caller]
fn must_fail(fx: &Fixture, what: &str, bytes: &[u8]) -> Error {
    match fx.with(bytes) {
        Ok(n) => panic!("{what}: read {n} pairs without an error"),
        Err(e) => {
            let s = e.to_string();
            assert!(!s.is_empty());
            e
        }
    }
}

#[test]
fn hostile_files_give_errors() {
    let Some(py) = need_python() else { return };
    let fx = fixture(&py, "flags", 21);
    let ps = fx.psize;
    assert!(fx.with(&fx.bytes).is_ok());

    // Truncated anywhere below the last page: an error at open.
    for len in [
        0,
        10,
        100,
        ps - 1,
        ps,
        ps + 100,
        2 * ps,
        3 * ps,
        fx.bytes.len() / 2,
        fx.bytes.len() - ps,
    ] {
        let e = must_fail(&fx, &format!("truncated to {len}"), &fx.bytes[..len]);
        assert!(
            matches!(e, Error::Corrupt { .. } | Error::NotLmdb { .. }),
            "{len}: {e}"
        );
    }

    // Metas: CVE-2019-16224 (DUPFIXED without DUPSORT in the records), page sizes 0 and not a
    // power of two, a root on a meta page, a depth of 0 or absurd, a last page past the file.
    let cases: Vec<(&str, Patch<[u8]>)> = vec![
        (
            "free flags DUPFIXED",
            Box::new(|m: &mut [u8]| put16(m, 44, 0x18)),
        ),
        (
            "main flags DUPFIXED",
            Box::new(|m: &mut [u8]| put16(m, 92, 0x10)),
        ),
        ("page size 0", Box::new(|m: &mut [u8]| put32(m, 40, 0))),
        (
            "page size 3000",
            Box::new(|m: &mut [u8]| put32(m, 40, 3000)),
        ),
        (
            "main root on meta page",
            Box::new(|m: &mut [u8]| put64(m, 128, 1)),
        ),
        (
            "main root past the end",
            Box::new(|m: &mut [u8]| put64(m, 128, 1 << 40)),
        ),
        ("main depth 0", Box::new(|m: &mut [u8]| put16(m, 94, 0))),
        (
            "main depth 60000",
            Box::new(|m: &mut [u8]| put16(m, 94, 60000)),
        ),
        (
            "last page huge",
            Box::new(|m: &mut [u8]| put64(m, 136, u64::MAX / 2)),
        ),
        ("version 2", Box::new(|m: &mut [u8]| put32(m, 20, 2))),
    ];
    for (what, f) in &cases {
        let b = fx.patched(|b| both_metas(b, ps, f));
        must_fail(&fx, what, &b);
    }

    // Tree pages: bounds of every kind, cycles, pages out of range.
    let branches = fx.pages_with(format::P_BRANCH);
    let leaves = fx.pages_with(format::P_LEAF);
    assert!(!branches.is_empty() && !leaves.is_empty());
    let node0 = |b: &[u8], p: usize| {
        u16::from_le_bytes(b[p * ps + 16..p * ps + 18].try_into().unwrap()) as usize
    };
    for &p in branches.iter().take(5) {
        let base = p * ps;
        let off = node0(&fx.bytes, p);
        let set_child = |b: &mut Vec<u8>, child: u64| {
            put16(b, base + off, child as u16);
            put16(b, base + off + 2, (child >> 16) as u16);
            put16(b, base + off + 4, (child >> 32) as u16);
        };
        let e = must_fail(
            &fx,
            &format!(
                "branch {p} (flags {:#x}, node 0 at {off}) child pointing to itself",
                fx.flags(p)
            ),
            &fx.patched(|b| set_child(b, p as u64)),
        );
        assert_eq!(e.page(), Some(p as u64), "{e}");
        let e = must_fail(
            &fx,
            "branch child out of range",
            &fx.patched(|b| set_child(b, 1 << 40)),
        );
        assert_eq!(e.page(), Some(p as u64), "{e}");
        must_fail(
            &fx,
            "branch child a meta page",
            &fx.patched(|b| set_child(b, 0)),
        );
        // A cycle through another branch: every branch's first child is the first branch.
        let first = branches[0] as u64;
        must_fail(
            &fx,
            "cycle",
            &fx.patched(|b| {
                for &q in &branches {
                    let o = node0(&fx.bytes, q);
                    put16(b, q * ps + o, first as u16);
                    put16(b, q * ps + o + 2, (first >> 16) as u16);
                    put16(b, q * ps + o + 4, (first >> 32) as u16);
                }
            }),
        );
    }
    for &p in leaves.iter().take(8) {
        let base = p * ps;
        let off = node0(&fx.bytes, p);
        let cases: Vec<(&str, Patch<Vec<u8>>)> = vec![
            (
                "lower below the header",
                Box::new(move |b| put16(b, base + 12, 2)),
            ),
            (
                "upper past the page",
                Box::new(move |b| put16(b, base + 14, (ps + 8) as u16)),
            ),
            (
                "lower above upper",
                Box::new(move |b| {
                    let up = u16::from_le_bytes(b[base + 14..base + 16].try_into().unwrap());
                    put16(b, base + 12, up + 2)
                }),
            ),
            (
                "node offset past the page",
                Box::new(move |b| put16(b, base + 16, (ps - 2) as u16)),
            ),
            (
                "node size huge (mn_hi)",
                Box::new(move |b| put16(b, base + off + 2, 0x7fff)),
            ),
            (
                "key size huge",
                Box::new(move |b| put16(b, base + off + 6, 0xffff)),
            ),
            (
                "node flags all",
                Box::new(move |b| put16(b, base + off + 4, 0x7)),
            ),
            ("page number field", Box::new(move |b| put64(b, base, 3))),
            (
                "flags branch",
                Box::new(move |b| put16(b, base + 10, format::P_BRANCH)),
            ),
            (
                "flags meta",
                Box::new(move |b| put16(b, base + 10, format::P_META)),
            ),
        ];
        for (what, f) in &cases {
            must_fail(&fx, what, &fx.patched(|b| f(b)));
        }
    }
    // Overflow runs: a run longer than the file, a page that is no overflow page.
    for &p in fx.pages_with(format::P_OVERFLOW).iter().take(4) {
        must_fail(
            &fx,
            "overflow run huge",
            &fx.patched(|b| put32(b, p * ps + 12, u32::MAX)),
        );
        must_fail(
            &fx,
            "overflow flags",
            &fx.patched(|b| put16(b, p * ps + 10, format::P_LEAF)),
        );
    }
    // Fixed-size leaves (DUPFIXED sub-trees): an item size of 0, or too big for the page
    // (py-lmdb's mp_pad cases).
    let leaf2 = fx.pages_with(format::P_LEAF | format::P_LEAF2);
    assert!(!leaf2.is_empty(), "no fixed-size leaf generated");
    for &p in leaf2.iter().take(3) {
        must_fail(&fx, "LEAF2 pad 0", &fx.patched(|b| put16(b, p * ps + 8, 0)));
        must_fail(
            &fx,
            "LEAF2 pad huge",
            &fx.patched(|b| put16(b, p * ps + 8, 0xffff)),
        );
    }
    // A named database's record in the main database with the wrong size (py-lmdb's
    // subdata node size case).
    let (base, i) = leaves
        .iter()
        .find_map(|&p| {
            let base = p * ps;
            let hdr = format::slotted(&fx.bytes[base..base + ps]).unwrap();
            (0..hdr.count)
                .find(|&i| {
                    format::node(&fx.bytes[base..base + ps], &hdr, i, false)
                        .unwrap()
                        .flags
                        == format::F_SUBDATA
                })
                .map(|i| (base, i))
        })
        .expect("a named database's record");
    let off = base
        + usize::from(u16::from_le_bytes(
            fx.bytes[base + 16 + 2 * i..base + 18 + 2 * i]
                .try_into()
                .unwrap(),
        ));
    must_fail(
        &fx,
        "named database record of 47 bytes",
        &fx.patched(|b| put16(b, off, 47)),
    );
    must_fail(
        &fx,
        "DUPDATA flag in a plain main database",
        &fx.patched(|b| put16(b, off + 4, format::F_DUPDATA)),
    );

    // Sub-pages of duplicates (py-lmdb's subpage cases): grow upper past the sub-page.
    let mut found = 0;
    for &p in &leaves {
        let base = p * ps;
        let hdr = cairn_lmdb::format::slotted(&fx.bytes[base..base + ps]).unwrap();
        for i in 0..hdr.count {
            let n = cairn_lmdb::format::node(&fx.bytes[base..base + ps], &hdr, i, false).unwrap();
            if n.flags == format::F_DUPDATA {
                let sub = base + n.data_start;
                must_fail(
                    &fx,
                    "sub-page upper",
                    &fx.patched(|b| put16(b, sub + 14, 0xfff0)),
                );
                must_fail(
                    &fx,
                    "sub-page lower",
                    &fx.patched(|b| put16(b, sub + 12, 0)),
                );
                must_fail(
                    &fx,
                    "dupdata size huge",
                    &fx.patched(|b| {
                        put16(
                            b,
                            base + usize::from(u16::from_le_bytes(
                                fx.bytes[base + 16 + 2 * i..base + 18 + 2 * i]
                                    .try_into()
                                    .unwrap(),
                            )) + 2,
                            0x7fff,
                        )
                    }),
                );
                found += 1;
                break;
            }
        }
        if found >= 3 {
            break;
        }
    }
    assert!(found > 0, "no duplicate sub-page found to corrupt");
}

#[test]
fn flipped_bytes_in_every_page_never_panic() {
    let Some(py) = need_python() else { return };
    let fx = fixture(&py, "flags", 33);
    let ps = fx.psize;
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut errors, mut oks) = (0, 0);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(fx.env.join("data.mdb"))
        .unwrap();
    // Every page a read touches (the metas and the trees' pages; damage to a free page is
    // never read): the metas and every other page near their start (headers, offsets, node
    // headers), the rest anywhere.
    let pages: Vec<usize> = (0..fx.pages()).filter(|&p| p < 2 || fx.live[p]).collect();
    for (n, &p) in pages.iter().enumerate() {
        for round in [if p < 2 { 0 } else { n % 2 }] {
            let mut b = fx.bytes[p * ps..(p + 1) * ps].to_vec();
            // Most damage is near the start of a page (headers, offsets, node headers).
            for _ in 0..1 + rnd() % 4 {
                let off = if round == 0 {
                    (rnd() % 64) as usize
                } else {
                    (rnd() % ps as u64) as usize
                };
                b[off] ^= 1 << (rnd() % 8);
            }
            f.write_all_at(&b, (p * ps) as u64).unwrap();
            match read_all(&fx.env) {
                Ok(_) => oks += 1,
                Err(_) => errors += 1,
            }
            f.write_all_at(&fx.bytes[p * ps..(p + 1) * ps], (p * ps) as u64)
                .unwrap();
        }
    }
    eprintln!(
        "{} of {} pages damaged in turn: {errors} reads refused, {oks} read (damage in unused bytes)",
        pages.len(),
        fx.pages()
    );
    assert!(errors > 0);
}
