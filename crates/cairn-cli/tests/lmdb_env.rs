//! `cairn dump/stat/check` on environments written by real LMDB, against Debian's `mdb_dump`
//! byte for byte, and `cairn migrate`: contents compared pair by pair after the swap, killed at
//! every named point and at random moments (the directory then holds either the untouched
//! LMDB environment or the complete Cairn one), refused while an LMDB process holds the
//! environment. Environments come from crates/cairn-lmdb/tests/gen_lmdb.py.

use cairn::{Env, FileNames};
use cairn_lmdb::LmdbEnv;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");

#[path = "../../cairn-lmdb/tests/support/oracle.rs"]
mod oracle;
use oracle::gen;

fn python() -> Option<PathBuf> {
    oracle::need_python("LMDB-environment tests")
}

/// `cairn SUB ARGS PATH` and LMDB's `mdb_SUB ARGS PATH`, run.
fn ours_and_lmdbs(
    sub: &str,
    args: &[&str],
    p: &Path,
) -> (std::process::Output, std::process::Output) {
    let ours = run(&[&[sub][..], args].concat(), p);
    let theirs = Command::new(format!("mdb_{sub}"))
        .args(args)
        .arg(p)
        .output()
        .unwrap();
    (ours, theirs)
}

/// `cairn check [-n] PATH` exits 0.
fn check_passes(p: &Path, no_subdir: bool, kind: &str) {
    let args: &[&str] = if no_subdir {
        &["check", "-n"]
    } else {
        &["check"]
    };
    let ck = run(args, p);
    assert!(
        ck.status.success(),
        "{kind}: check: {}",
        String::from_utf8_lossy(&ck.stderr)
    );
}

fn run(args: &[&str], path: &Path) -> std::process::Output {
    Command::new(CAIRN).args(args).arg(path).output().unwrap()
}

/// Every database's pairs, by the LMDB reader (main database without the names' records).
type Contents = Vec<(Option<String>, u32, Vec<(Vec<u8>, Vec<u8>)>)>;

fn lmdb_contents(path: &Path, no_subdir: Option<bool>) -> Contents {
    let env = LmdbEnv::open(path, no_subdir).unwrap();
    let named = env.named_dbs().unwrap();
    let names: Vec<&[u8]> = named.iter().map(|d| d.name.as_slice()).collect();
    let mut out = Vec::new();
    let mut all = |name: Option<String>, flags: u16, mut p: cairn_lmdb::Pairs<'_>| {
        let mut v = Vec::new();
        while let Some((k, val)) = p.next().unwrap() {
            if name.is_none() && names.contains(&k) {
                continue;
            }
            v.push((k.to_vec(), val.to_vec()));
        }
        out.push((name, u32::from(flags), v));
    };
    all(None, env.main_db().db_flags(), env.main_pairs());
    for d in &named {
        all(
            Some(d.name_lossy()),
            d.record.db_flags(),
            env.pairs(&d.record),
        );
    }
    out
}

/// The same, read from the migrated environment through the engine, as the LMDB faces open it.
fn cairn_contents(path: &Path, no_subdir: bool) -> Contents {
    let env = Env::options()
        .file_names(FileNames::Lmdb)
        .no_subdir(no_subdir)
        .read_only(true)
        .open(path)
        .unwrap();
    let r = env.read_txn().unwrap();
    let names = r.db_names().unwrap();
    let mut out = Vec::new();
    for name in std::iter::once(None).chain(names.iter().cloned().map(Some)) {
        let db = r.open_db(name.as_deref()).unwrap();
        let flags = r.db_flags(db).unwrap().persistent().bits();
        let mut v = Vec::new();
        for item in r.iter(db).unwrap() {
            let (k, val) = item.unwrap();
            if name.is_none() && names.iter().any(|n| n.as_bytes() == k) {
                continue;
            }
            v.push((k.to_vec(), val.to_vec()));
        }
        out.push((name, flags, v));
    }
    out
}

fn mdb_dump_here() -> bool {
    let ok = Command::new("mdb_dump").arg("-V").output().is_ok();
    if !ok {
        eprintln!("WARNING: mdb_dump is missing (make lmdb-utils): byte-identity checks skipped");
    }
    ok
}

#[test]
fn dump_of_an_lmdb_environment_is_mdb_dumps() {
    let Some(py) = python() else { return };
    if !mdb_dump_here() {
        return;
    }
    for (kind, seed, rel, n) in [
        ("flags", 3, "env", false),
        ("bigdup", 1, "env", false),
        ("nosubdir", 2, "env.mdb", true),
    ] {
        let d = gen(&py, kind, seed);
        let p = d.path().join(rel);
        let mut sets: Vec<Vec<&str>> =
            vec![vec![], vec!["-p"], vec!["-a"], vec!["-a", "-p"], vec!["-l"]];
        if kind == "flags" {
            sets.extend([
                vec!["-s", "ikey8"],
                vec!["-s", "idup", "-p"],
                vec!["-s", "rkey"],
            ]);
        }
        for mut args in sets {
            if n {
                args.push("-n");
            }
            let (ours, theirs) = ours_and_lmdbs("dump", &args, &p);
            assert!(
                ours.status.success(),
                "{kind} {args:?}: {}",
                String::from_utf8_lossy(&ours.stderr)
            );
            assert!(
                ours.stdout == theirs.stdout,
                "{kind} {args:?}: cairn dump and mdb_dump differ"
            );
        }
        for mut args in [
            vec!["-a"],
            vec!["-e", "-f", "-a"],
            vec!["-ff"],
            vec!["-fff", "-s", "dup"],
        ] {
            if kind != "flags" && args.contains(&"dup") {
                continue;
            }
            if n {
                args.push("-n");
            }
            let (ours, theirs) = ours_and_lmdbs("stat", &args, &p);
            assert_eq!(
                String::from_utf8_lossy(&ours.stdout),
                String::from_utf8_lossy(&theirs.stdout),
                "{kind}: stat {args:?}"
            );
        }
        check_passes(&p, n, kind);
    }
}

#[test]
fn migrate_keeps_every_pair() {
    let Some(py) = python() else { return };
    for (kind, seed, rel, n) in [
        ("flags", 4, "env", false),
        ("bigdup", 2, "env", false),
        ("nosubdir", 5, "env.mdb", true),
    ] {
        let d = gen(&py, kind, seed);
        let p = d.path().join(rel);
        let (data, _) = cairn_lmdb::files(&p, Some(n));
        let original = std::fs::read(&data).unwrap();
        let before = lmdb_contents(&p, Some(n));
        let args: Vec<&str> = if n {
            vec!["migrate", "-n"]
        } else {
            vec!["migrate"]
        };
        let dry = run(&[&args[..], &["--dry-run"]].concat(), &p);
        assert!(dry.status.success());
        assert_eq!(
            std::fs::read(&data).unwrap(),
            original,
            "--dry-run changed the file"
        );
        let o = run(&args, &p);
        assert!(
            o.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let mut backup = data.as_os_str().to_owned();
        backup.push(".lmdb-backup");
        assert_eq!(
            std::fs::read(&backup).unwrap(),
            original,
            "{kind}: backup differs"
        );
        assert!(!cairn_lmdb::is_lmdb_file(&data));
        assert_eq!(
            cairn_contents(&p, n),
            before,
            "{kind}: contents differ after migration"
        );
        // The command reads it now as Cairn's, and the checker agrees.
        check_passes(&p, n, kind);
        let again = run(&args, &p);
        assert!(
            again.status.success() && String::from_utf8_lossy(&again.stdout).contains("already")
        );
    }
    // --no-backup leaves no copy.
    let d = gen(&py, "nosubdir", 6);
    let p = d.path().join("env.mdb");
    assert!(run(&["migrate", "-n", "--no-backup", "-q"], &p)
        .status
        .success());
    assert!(!d.path().join("env.mdb.lmdb-backup").exists());
    assert!(!d.path().join("env.mdb-lock").exists());
}

/// Whichever state a killed migration left: the untouched LMDB file, or the whole Cairn one.
fn assert_whole(p: &Path, original: &[u8], before: &Contents, what: &str) {
    let data = p.join("data.mdb");
    if cairn_lmdb::is_lmdb_file(&data) {
        assert_eq!(
            std::fs::read(&data).unwrap(),
            original,
            "{what}: LMDB's file changed"
        );
    } else {
        assert_eq!(
            &cairn_contents(p, false),
            before,
            "{what}: Cairn's file incomplete"
        );
    }
}

#[test]
fn a_killed_migration_leaves_one_whole_environment() {
    let Some(py) = python() else { return };
    let d = gen(&py, "bigdup", 8);
    let src = d.path().join("env");
    let original = std::fs::read(src.join("data.mdb")).unwrap();
    let before = lmdb_contents(&src, None);
    let fresh = |i: usize| -> PathBuf {
        let p = d.path().join(format!("run{i}"));
        std::fs::create_dir(&p).unwrap();
        std::fs::copy(src.join("data.mdb"), p.join("data.mdb")).unwrap();
        p
    };
    // Every named point.
    let mut i = 0;
    for fp in [
        "building", "copied", "verified", "linked", "renamed", "done",
    ] {
        let p = fresh(i);
        i += 1;
        let o = Command::new(CAIRN)
            .args(["migrate", "-q"])
            .arg(&p)
            .env("CAIRN_MIGRATE_FAILPOINT", fp)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{fp}: the failpoint did not fire");
        assert_whole(&p, &original, &before, fp);
        let o = run(&["migrate", "-q"], &p);
        assert!(
            o.status.success(),
            "{fp}: rerun: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(cairn_contents(&p, false), before, "{fp}: after the rerun");
    }
    // SIGKILL at random moments of a whole run.
    let t0 = Instant::now();
    assert!(run(&["migrate", "-q"], &fresh(i)).status.success());
    let full = t0.elapsed();
    i += 1;
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..8 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let p = fresh(i);
        i += 1;
        let mut child = Command::new(CAIRN)
            .args(["migrate", "-q"])
            .arg(&p)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let at = full.mul_f64((seed % 1000) as f64 / 1000.0);
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
        assert_whole(&p, &original, &before, &format!("killed after {at:?}"));
        let o = run(&["migrate", "-q"], &p);
        assert!(
            o.status.success(),
            "rerun after a kill at {at:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(cairn_contents(&p, false), before);
    }
}

#[test]
fn migrate_refuses_while_lmdb_has_the_environment_open() {
    let Some(py) = python() else { return };
    let d = gen(&py, "nosubdir", 7);
    let dir = d.path().join("dir");
    std::fs::create_dir(&dir).unwrap();
    let code = format!(
        "import lmdb,sys,time\ne=lmdb.open({:?})\nt=e.begin()\nprint('ready',flush=True)\nsys.stdin.read()\n",
        dir.display().to_string()
    );
    let mut holder = Command::new(&py)
        .args(["-c", &code])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    let original = std::fs::read(dir.join("data.mdb")).unwrap();
    // LMDB's reader table, read from its lock file: the holder's slot.
    let pid = holder.id().to_string();
    for args in [&["readers"][..], &["stat", "-r"][..]] {
        let o = run(args, &dir);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success()
                && text
                    .lines()
                    .any(|l| l.split_whitespace().next() == Some(pid.as_str())),
            "{args:?}: {text}"
        );
    }
    let o = run(&["migrate", "--dry-run"], &dir);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains(&pid),
        "--dry-run names the live reader"
    );
    let o = run(&["migrate"], &dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("an LMDB process has the environment open"),
        "{err}"
    );
    assert!(
        err.contains(&holder.id().to_string()),
        "the reader's pid is named: {err}"
    );
    assert_eq!(std::fs::read(dir.join("data.mdb")).unwrap(), original);
    drop(holder.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    while holder.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = holder.kill();
    let o = run(&["migrate", "-q"], &dir);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn open_with_migrate_lmdb_converts_in_place() {
    let Some(py) = python() else { return };
    let d = gen(&py, "flags", 12);
    let p = d.path().join("env");
    let before = lmdb_contents(&p, None);
    // Read-only opens never migrate: LMDB's file is refused, untouched.
    let e = Env::options()
        .file_names(FileNames::Lmdb)
        .read_only(true)
        .migrate_lmdb(true)
        .open(&p)
        .err()
        .unwrap();
    assert!(matches!(e, cairn::Error::LmdbFile { .. }), "{e}");
    let env = Env::options()
        .file_names(FileNames::Lmdb)
        .migrate_lmdb(true)
        .open(&p)
        .unwrap();
    drop(env);
    assert!(p.join("data.mdb.lmdb-backup").exists());
    assert_eq!(cairn_contents(&p, false), before);
}

#[test]
fn damaged_lmdb_files_are_reported_not_crashed_on() {
    let Some(py) = python() else { return };
    let d = gen(&py, "flags", 13);
    let p = d.path().join("env");
    let data = p.join("data.mdb");
    let good = std::fs::read(&data).unwrap();
    let ps = u32::from_le_bytes(good[40..44].try_into().unwrap()) as usize;
    let root = u64::from_le_bytes(good[128..136].try_into().unwrap()) as usize;
    let newest = if u64::from_le_bytes(good[ps + 144..ps + 152].try_into().unwrap())
        > u64::from_le_bytes(good[144..152].try_into().unwrap())
    {
        ps
    } else {
        0
    };
    let root = if newest == ps {
        u64::from_le_bytes(good[ps + 128..ps + 136].try_into().unwrap()) as usize
    } else {
        root
    };
    // The main database's root page with its lower bound below the header.
    let mut bad = good.clone();
    bad[root * ps + 12..root * ps + 14].copy_from_slice(&2u16.to_le_bytes());
    std::fs::write(&data, &bad).unwrap();
    let ck = run(&["check"], &p);
    let err = String::from_utf8_lossy(&ck.stderr);
    assert_eq!(ck.status.code(), Some(1));
    assert!(err.contains(&format!("page {root}")), "{err}");
    for cmd in [&["dump", "-a"][..], &["dump"][..], &["migrate", "-q"][..]] {
        let o = run(cmd, &p);
        assert_eq!(o.status.code(), Some(1), "{cmd:?}");
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&format!("page {root}")),
            "{cmd:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // The migration refused and left LMDB's file and nothing else.
    assert_eq!(std::fs::read(&data).unwrap(), bad);
    assert!(!p.join("data.mdb.cairn-migrate").exists() && !p.join("data.mdb.lmdb-backup").exists());
    // Truncated: the last page is named.
    std::fs::write(&data, &good[..good.len() / 2]).unwrap();
    let o = run(&["dump"], &p);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("truncated"));
}

#[path = "../../cairn-lmdb/tests/support/build.rs"]
mod build;

#[test]
fn other_page_sizes_dump_as_mdb_dump_and_migrate() {
    for psize in [8192usize, 16384, 65536] {
        let pairs: Vec<(Vec<u8>, Vec<u8>)> = (0..3000u32)
            .map(|i| {
                let v = if i % 101 == 7 {
                    vec![i as u8; psize * 3]
                } else {
                    i.to_le_bytes().repeat((i % 13) as usize)
                };
                (format!("k{i:06}").into_bytes(), v)
            })
            .collect();
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("env");
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("data.mdb"), build::lmdb_file(psize, &pairs)).unwrap();
        if mdb_dump_here() {
            for args in [vec![], vec!["-p"]] {
                let ours = run(&[&["dump"][..], &args].concat(), &p);
                let theirs = Command::new("mdb_dump")
                    .args(&args)
                    .arg(&p)
                    .output()
                    .unwrap();
                assert!(
                    ours.status.success() && ours.stdout == theirs.stdout,
                    "page size {psize} {args:?}"
                );
            }
            // mdb_dump made LMDB's lock file; migrate removes it with the rest.
        }
        let o = run(&["migrate", "-q"], &p);
        assert!(
            o.status.success(),
            "page size {psize}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let env = Env::options()
            .file_names(FileNames::Lmdb)
            .read_only(true)
            .open(&p)
            .unwrap();
        assert_eq!(env.page_size(), psize, "the page size is kept");
        let r = env.read_txn().unwrap();
        let got: Vec<(Vec<u8>, Vec<u8>)> = r
            .iter(env.main_db())
            .unwrap()
            .map(|i| {
                let (k, v) = i.unwrap();
                (k.to_vec(), v.to_vec())
            })
            .collect();
        assert!(
            got == pairs,
            "page size {psize}: contents differ after migration"
        );
    }
}
