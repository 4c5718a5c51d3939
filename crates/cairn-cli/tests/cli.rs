//! The `cairn` binary end to end: stat, check, copy, readers, drop, and the option letters and
//! exit codes of LMDB's tools.

mod common;

use cairn::{Env, PutFlags};
use common::*;
use std::path::Path;

fn sample(path: &Path) {
    build(path, &common::sample());
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn stat_text_matches_mdb_stat_labels() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = String::from_utf8(ok(&["stat", "-e", "-f", "-a", s(dir.path())], b"")).unwrap();
    for label in [
        "Environment Info\n",
        "  Page size: 4096\n",
        "  Number of pages used: ",
        "  Last transaction ID: 1\n",
        "  Max readers: 126\n",
        "Freelist Status\n",
        "  Free pages: ",
        "Status of Main DB\n  Tree depth: 2\n",
        // 500 keys and the names of the two named databases.
        "  Entries: 502\n",
        "Status of ints\n",
        "  Entries: 100\n",
        "Status of rev\n",
    ] {
        assert!(out.contains(label), "{label:?} missing from\n{out}");
    }
    // -s: only that database.
    let one = String::from_utf8(ok(&["stat", "-s", "ints", s(dir.path())], b"")).unwrap();
    assert_eq!(
        one,
        "Status of ints\n  Tree depth: 1\n  Branch pages: 0\n  Leaf pages: 1\n  Overflow pages: 0\n  Entries: 100\n"
    );
    // -r alone prints only the reader table, as mdb_stat does.
    let r = String::from_utf8(ok(&["stat", "-rr", s(dir.path())], b"")).unwrap();
    assert_eq!(
        r,
        "Reader Table Status\n(no active readers)\n  0 stale readers cleared.\n(no active readers)\n"
    );
}

#[test]
fn stat_json_for_machines() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = ok(&["stat", "--json", "-e", "-ff", "-a", s(dir.path())], b"");
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["environment"]["page_size"], 4096);
    assert_eq!(v["environment"]["last_txnid"], 1);
    let dbs = v["databases"].as_array().unwrap();
    assert_eq!(dbs.len(), 3);
    assert_eq!(dbs[0]["name"], serde_json::Value::Null);
    assert_eq!(dbs[0]["entries"], 502);
    assert_eq!(dbs[1]["name"], "ints");
    assert_eq!(dbs[1]["flags"], serde_json::json!(["integerkey"]));
    assert_eq!(dbs[2]["flags"], serde_json::json!(["reversekey"]));
    assert!(v["freelist"]["runs"].is_array());
}

#[test]
fn free_runs_are_listed() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    {
        let env = Env::open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        let db = env.main_db();
        w.clear_db(db).unwrap();
        w.commit().unwrap();
    }
    let out = String::from_utf8(ok(&["stat", "-fff", s(dir.path())], b"")).unwrap();
    let free: u64 = out
        .lines()
        .find_map(|l| l.strip_prefix("  Free pages: "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(free > 30, "{out}");
    assert!(out.contains("    Run at page "), "{out}");
    let listed: u64 = out
        .lines()
        .filter_map(|l| l.strip_prefix("    Run at page "))
        .map(|l| {
            l.split(", ")
                .nth(1)
                .unwrap()
                .trim_end_matches(" pages")
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(listed, free);
}

#[test]
fn lmdb_exit_codes_and_usage() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    // Unknown option, missing path, missing database, missing environment: all exit 1.
    fails(&["stat", "-z", s(dir.path())], b"");
    assert!(fails(&["stat"], b"").contains("path is missing"));
    assert!(fails(&["stat", "-s", "nope", s(dir.path())], b"").contains("\"nope\" not found"));
    let missing = dir.path().join("none");
    assert!(fails(&["dump", s(&missing)], b"").contains("no Cairn environment"));
    fails(&["stat", "-a", "-s", "ints", s(dir.path())], b"");
    // -V prints the version and succeeds, with or without a path.
    for sub in ["stat", "dump", "load", "copy", "check", "readers", "drop"] {
        let v = String::from_utf8(ok(&[sub, "-V"], b"")).unwrap();
        assert!(v.starts_with("cairn "), "{v}");
    }
    assert!(String::from_utf8(ok(&["-V"], b""))
        .unwrap()
        .starts_with("cairn "));
    ok(&["--help"], b"");
}

#[test]
fn lmdb_directory_gets_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.mdb"), b"x").unwrap();
    let e = fails(&["stat", s(dir.path())], b"");
    assert!(e.contains("LMDB environment"), "{e}");
}

#[test]
fn check_passes_sound_and_fails_damaged() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = String::from_utf8(ok(&["check", s(dir.path())], b"")).unwrap();
    assert!(out.contains("no problems"), "{out}");
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["check", "--json", s(dir.path())], b"")).unwrap();
    assert_eq!(v["ok"], true);

    // A later small commit leaves most pages of the first one untouched; damage one of those.
    {
        let env = Env::open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        w.put(env.main_db(), b"zzz", b"last", PutFlags::empty())
            .unwrap();
        w.commit().unwrap();
    }
    let data = dir.path().join("data.cairn");
    let mut bytes = std::fs::read(&data).unwrap();
    let page = 5;
    bytes[page * 4096 + 2000] ^= 0x55;
    std::fs::write(&data, &bytes).unwrap();
    let o = cairn(&["check", s(dir.path())], b"");
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("problem: "), "{err}");
    assert!(err.contains("page"), "{err}");
    let o = cairn(&["check", "--json", s(dir.path())], b"");
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(!v["problems"].as_array().unwrap().is_empty());
}

/// A file whose databases a program keeps in its own orders (mdb_set_compare /
/// mdb_set_dupsort; here Env::set_key_order / set_dup_order): `cairn check` cannot know those
/// orders, checks the rest, notes what it left out and calls the file sound; writing it
/// (`load`) and compacting it are refused with a message, and nothing is changed.
#[test]
fn check_accepts_a_file_in_user_supplied_orders() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        let db = w
            .create_db(
                Some("custom"),
                cairn::DbFlags::CREATE | cairn::DbFlags::DUP_SORT,
            )
            .unwrap();
        env.set_key_order(db, Some(std::sync::Arc::new(|a: &[u8], b: &[u8]| b.cmp(a))))
            .unwrap();
        env.set_dup_order(
            db,
            Some(std::sync::Arc::new(|a: &[u8], b: &[u8]| {
                a.len().cmp(&b.len()).then(b.cmp(a))
            })),
        )
        .unwrap();
        for i in 0..3000u32 {
            let k = format!("k{}", i % 17);
            w.put(
                db,
                k.as_bytes(),
                format!("{i}").as_bytes(),
                PutFlags::empty(),
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    let o = cairn(&["check", s(dir.path())], b"");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out} {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("no problems"), "{out}");
    assert!(
        out.contains("note: custom: its keys are in a user-supplied order"),
        "{out}"
    );
    assert!(
        out.contains("note: custom: its values are in a user-supplied order"),
        "{out}"
    );
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["check", "--json", s(dir.path())], b"")).unwrap();
    assert_eq!(v["ok"], true);
    assert_eq!(v["notes"].as_array().unwrap().len(), 2);
    let before = read(dir.path());
    let e = fails(
        &["copy", "-c", s(dir.path()), s(&dir.path().join("c"))],
        b"",
    );
    assert!(e.contains("user-supplied order"), "{e}");
    let e = fails(
        &["load", "-s", "custom", s(dir.path())],
        b"VERSION=3\nformat=print\ntype=btree\ndupsort=1\nHEADER=END\n k1\n zzz\nDATA=END\n",
    );
    assert!(e.contains("user-supplied order"), "{e}");
    assert_eq!(read(dir.path()), before);
}

#[test]
fn check_reports_a_file_that_does_not_open() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.cairn"), vec![0xa5u8; 3 * 4096]).unwrap();
    let e = fails(&["check", s(dir.path())], b"");
    assert!(e.contains("problem: opening"), "{e}");
}

#[test]
fn copy_raw_compact_file_and_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    sample(&src);
    let want = read(&src);
    let raw = dir.path().join("raw");
    ok(&["copy", s(&src), s(&raw)], b"");
    assert_eq!(read(&raw), want);
    let compact = dir.path().join("compact");
    ok(&["copy", "-c", s(&src), s(&compact)], b"");
    assert_eq!(read(&compact), want);
    ok(&["check", s(&compact)], b"");
    // -n: the source and the destination are data files.
    let file = dir.path().join("copy.cairn");
    ok(&["copy", "-n", s(&src.join("data.cairn")), s(&file)], b"");
    assert_eq!(read(&file), want);
    // No destination: the copy goes to stdout.
    let bytes = ok(&["copy", "--compact", s(&src)], b"");
    let piped = dir.path().join("piped.cairn");
    std::fs::write(&piped, &bytes).unwrap();
    assert_eq!(read(&piped), want);
    // A destination that already holds a database is refused and left alone.
    let before = std::fs::read(raw.join("data.cairn")).unwrap();
    assert!(fails(&["copy", s(&src), s(&raw)], b"").contains("exists"));
    assert_eq!(std::fs::read(raw.join("data.cairn")).unwrap(), before);
}

#[test]
fn hot_copy_while_a_writer_commits() {
    // The copy is one snapshot: every commit keeps "count" equal to the number of other keys.
    let dir = tempfile::tempdir().unwrap();
    let env = Env::open(dir.path().join("src")).unwrap();
    let db = env.main_db();
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut w = env.write_txn().unwrap();
                for _ in 0..50 {
                    w.put(
                        db,
                        format!("k{n:08}").as_bytes(),
                        &[1u8; 200],
                        PutFlags::empty(),
                    )
                    .unwrap();
                    n += 1;
                }
                w.put(db, b"count", &n.to_le_bytes(), PutFlags::empty())
                    .unwrap();
                w.commit().unwrap();
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        for (i, compact) in [false, true, false, true].into_iter().enumerate() {
            let target = dir.path().join(format!("copy{i}"));
            cairn_cli::copy::copy_with_progress(&env, &target, compact, false).unwrap();
            let c = Env::options().read_only(true).open(&target).unwrap();
            let r = c.read_txn().unwrap();
            assert!(r.check().unwrap().is_ok());
            let count = r
                .get(c.main_db(), b"count")
                .unwrap()
                .map(|v| u64::from_le_bytes(v.try_into().unwrap()));
            let keys = r.stat(c.main_db()).unwrap().entries;
            if let Some(count) = count {
                assert_eq!(count + 1, keys, "copy {i} mixes commits");
            }
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
}

#[test]
fn readers_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let out = String::from_utf8(ok(&["readers", s(dir.path())], b"")).unwrap();
    assert_eq!(out, "(no active readers)\n");
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["readers", "--check", "--json", s(dir.path())], b"")).unwrap();
    assert_eq!(v["stale_cleared"], 0);
    assert_eq!(v["slots"], serde_json::json!([]));

    // Empty a named database: it stays, with its flags.
    ok(&["drop", "-s", "ints", s(dir.path())], b"");
    let c = read(dir.path());
    assert_eq!(c[&Some("ints".to_string())], (0x08, vec![]));
    // Delete it.
    ok(&["drop", "-d", "-s", "ints", s(dir.path())], b"");
    assert!(!read(dir.path()).contains_key(&Some("ints".to_string())));
    assert!(fails(&["drop", "-s", "ints", s(dir.path())], b"").contains("not found"));
    // The main database can be emptied, not deleted.
    assert!(fails(&["drop", "-d", s(dir.path())], b"").contains("cannot be deleted"));
    ok(&["drop", s(dir.path())], b"");
    let c = read(dir.path());
    assert!(!c.contains_key(&None));
    assert!(c.contains_key(&Some("rev".to_string())));
}

#[test]
fn piped_output_draws_no_progress() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let dump = dir.path().join("dump.txt");
    for args in [
        vec!["check", s(dir.path())],
        vec!["dump", "-a", s(dir.path())],
        vec!["dump", "-a", "-f", s(&dump), s(dir.path())],
        vec!["copy", s(dir.path())],
    ] {
        let o = cairn(&args, b"");
        assert!(o.status.success());
        assert!(
            o.stderr.is_empty(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let o = cairn(&["load", "-f", s(&dump), s(&dir.path().join("new"))], b"");
    assert!(o.status.success());
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// On a terminal (a pseudo-terminal from util-linux's `script`), long work draws a bar.
#[test]
fn terminal_gets_a_progress_bar() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("SKIPPED: util-linux `script` is not installed, no pseudo-terminal to test on");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::open(dir.path().join("db")).unwrap();
        let mut w = env.write_txn().unwrap();
        for i in 0..50_000u32 {
            w.put(
                env.main_db(),
                &i.to_be_bytes(),
                &[0u8; 64],
                PutFlags::empty(),
            )
            .unwrap();
        }
        w.commit().unwrap();
    }
    let dump = dir.path().join("dump.txt");
    let cmd = format!(
        "{} dump -f {} {}",
        env!("CARGO_BIN_EXE_cairn"),
        s(&dump),
        s(&dir.path().join("db"))
    );
    let on_tty = |cmd: &str| -> String {
        let o = std::process::Command::new("script")
            .args(["-qec", cmd, "/dev/null"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let text = on_tty(&cmd);
    assert!(text.contains("dumping"), "no progress bar drawn: {text:?}");
    let cmd = format!(
        "{} load -f {} {}",
        env!("CARGO_BIN_EXE_cairn"),
        s(&dump),
        s(&dir.path().join("loaded"))
    );
    let text = on_tty(&cmd);
    assert!(text.contains("loading"), "no progress bar drawn: {text:?}");
    // -q keeps the terminal quiet.
    let cmd = format!("{cmd}2 -q");
    assert_eq!(on_tty(&cmd), "");
}

#[test]
fn n_names_the_data_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("db.cairn");
    ok(&["load", "-n", "-T", "-s", "t", s(&file)], b"k\nv\n");
    assert!(file.is_file());
    let out = String::from_utf8(ok(&["stat", "-n", "-s", "t", s(&file)], b"")).unwrap();
    assert!(out.contains("  Entries: 1\n"), "{out}");
    ok(&["check", "-n", s(&file)], b"");
    let d = String::from_utf8(ok(&["dump", "-n", "-p", "-s", "t", s(&file)], b"")).unwrap();
    assert!(d.ends_with("HEADER=END\n k\n v\nDATA=END\n"), "{d}");
    ok(&["drop", "-n", "-d", "-s", "t", s(&file)], b"");
    assert!(read(&file).is_empty());
}

/// `stat -e`'s map size is, as LMDB's, what the file may grow to (no limit is set here: the
/// file, the space its file system has left, at most the address space a handle reserves),
/// not the file's size; `Max pages` is it in pages.
#[test]
fn stat_map_size_is_what_the_file_may_grow_to() {
    let dir = tempfile::tempdir().unwrap();
    sample(dir.path());
    let data = dir.path().join("data.cairn");
    let avail = || {
        let v = rustix::fs::statvfs(&data).unwrap();
        v.f_bavail * v.f_frsize
    };
    let before = avail();
    let out = String::from_utf8(ok(&["stat", "-e", s(dir.path())], b"")).unwrap();
    let after = avail();
    let file = std::fs::metadata(&data).unwrap().len();
    let map = figure(&out, "Map size");
    let page = figure(&out, "Page size");
    assert_eq!(page, 4096);
    assert!(
        map > file,
        "map size {map} is not past the file's {file} bytes:\n{out}"
    );
    assert_eq!(map % page, 0);
    assert_eq!(figure(&out, "Max pages"), map / page);
    assert!(figure(&out, "Number of pages used") <= map / page);
    // The file system's free space moves while other programs write: allow 1 GiB either way.
    let reserve = cairn_cli::stat::DEFAULT_RESERVE;
    let lo = (file + before.min(after))
        .min(reserve)
        .saturating_sub(1 << 30);
    let hi = (file + before.max(after) + (1 << 30)).min(reserve);
    assert!((lo..=hi).contains(&map), "{map} not in {lo}..={hi}");
    // --json says the same, with the file's size beside it.
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["stat", "--json", "-e", s(dir.path())], b"")).unwrap();
    let e = &v["environment"];
    assert_eq!(e["file_size"], file);
    assert_eq!(e["max_size"], serde_json::Value::Null);
    let jmap = e["map_size"].as_u64().unwrap();
    assert!((lo..=hi).contains(&jmap), "{jmap} not in {lo}..={hi}");
    assert_eq!(e["max_pages"].as_u64().unwrap(), jmap / page);
}

/// Entries of a directory, sorted (to show a refused copy left nothing behind).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// As `mdb_copy`, a copy never replaces what is at its destination's data file: an
/// environment, an empty file, a directory; raw or compacted, with or without -n. It fails
/// with EEXIST and status 1 and leaves everything as it was.
#[test]
fn copy_never_replaces_what_is_there() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    sample(&src);
    let want = read(&src);
    let refused = |args: &[&str], at: &Path, watch: &Path| {
        let before = entries(watch);
        let bytes = std::fs::symlink_metadata(at)
            .unwrap()
            .is_file()
            .then(|| std::fs::read(at).unwrap());
        let e = fails(args, b"");
        assert!(
            e.contains(&format!("copying failed: {}: File exists", at.display())),
            "{args:?}: {e}"
        );
        assert_eq!(entries(watch), before, "{args:?} left something behind");
        if let Some(b) = bytes {
            assert_eq!(
                std::fs::read(at).unwrap(),
                b,
                "{args:?} changed {}",
                at.display()
            );
        }
    };
    for compact in [false, true] {
        let c = if compact { "-c" } else { "-q" };
        let d = dir.path().join(format!("dst{compact}"));
        // A directory holding an environment: the one an earlier copy made.
        ok(&["copy", c, s(&src), s(&d)], b"");
        refused(&["copy", c, s(&src), s(&d)], &d.join("data.cairn"), &d);
        assert_eq!(read(&d), want);
        // Onto itself.
        refused(
            &["copy", c, s(&src), s(&src)],
            &src.join("data.cairn"),
            &src,
        );
        // An empty data file.
        let e = dir.path().join(format!("empty{compact}"));
        std::fs::create_dir(&e).unwrap();
        std::fs::write(e.join("data.cairn"), b"").unwrap();
        refused(&["copy", c, s(&src), s(&e)], &e.join("data.cairn"), &e);
        // LMDB's data file: the directory holds an environment.
        let l = dir.path().join(format!("lmdb{compact}"));
        std::fs::create_dir(&l).unwrap();
        std::fs::write(l.join("data.mdb"), b"not cairn").unwrap();
        refused(&["copy", c, s(&src), s(&l)], &l.join("data.mdb"), &l);
        // -n: an existing file, empty or not, and an existing directory.
        let f = dir.path().join(format!("file{compact}"));
        let srcf = src.join("data.cairn");
        ok(&["copy", "-n", c, s(&srcf), s(&f)], b"");
        refused(&["copy", "-n", c, s(&srcf), s(&f)], &f, dir.path());
        assert_eq!(read(&f), want);
        std::fs::write(&f, b"").unwrap();
        refused(&["copy", "-n", c, s(&srcf), s(&f)], &f, dir.path());
        refused(&["copy", "-n", c, s(&srcf), s(&e)], &e, dir.path());
        // Lock files do not count (mdb_copy ignores lock.mdb too).
        let k = dir.path().join(format!("locks{compact}"));
        std::fs::create_dir(&k).unwrap();
        std::fs::write(k.join("lock.cairn"), b"").unwrap();
        std::fs::write(k.join("lock.mdb"), b"").unwrap();
        ok(&["copy", c, s(&src), s(&k)], b"");
        assert_eq!(read(&k), want);
        assert_eq!(entries(&k), ["data.cairn", "lock.cairn", "lock.mdb"]);
    }
    assert_eq!(read(&src), want);
}
