//! Interoperation with LMDB's own tools (Debian's lmdb-utils: mdb_dump, mdb_load, mdb_stat,
//! mdb_copy): dumps made by `mdb_dump` load into Cairn, dumps made by `cairn dump` load into
//! LMDB with `mdb_load`, with every key, value and flag intact, `cairn stat` agrees with
//! `mdb_stat`, and `cairn copy` refuses what `mdb_copy` refuses.
//!
//! `make test-cli` installs lmdb-utils. Without them these tests fail, unless apt is impossible
//! on this machine (no apt-get) and this is not CI: then they say loudly that they skipped.

mod common;

use cairn_cli::dumpfmt::{self, Format, Header, Reader};
use common::*;
use proptest::prelude::*;
use std::path::{Path, PathBuf};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// Whether LMDB's tools can be run (see the module docs for when their absence is an error).
fn lmdb_tools() -> bool {
    let have = ["mdb_dump", "mdb_load", "mdb_stat", "mdb_copy"]
        .iter()
        .all(|t| {
            std::process::Command::new(t)
                .arg("-V")
                .output()
                .is_ok_and(|o| o.status.success())
        });
    if have {
        return true;
    }
    let apt = std::process::Command::new("apt-get")
        .arg("--version")
        .output()
        .is_ok();
    if apt || std::env::var_os("CI").is_some() {
        panic!("LMDB's tools (mdb_dump, mdb_load, mdb_stat, mdb_copy) are missing: run `make test-cli`, which installs Debian's lmdb-utils");
    }
    eprintln!("SKIPPED: LMDB interop test: no lmdb-utils and no apt-get to install them");
    false
}

/// Runs an LMDB tool; asserts success; returns stdout.
fn lmdb(tool: &str, args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let o = run(tool, args, stdin);
    assert!(
        o.status.success(),
        "{tool} {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// A dump's blocks: database name, flags and records.
fn parse_dump(text: &[u8]) -> Vec<(Option<String>, Db)> {
    let mut r = Reader::new(text);
    let mut out = Vec::new();
    while let Some(h) = r.next_header().expect("header") {
        let mut recs = Vec::new();
        while let Some(p) = r.next_pair(h.format).expect("pair") {
            recs.push(p);
        }
        out.push((h.database, (h.flags, recs)));
    }
    out
}

/// Dump text for `c`, in `format`. An empty, flagless main-database block comes first: some LMDB
/// 0.9 releases' mdb_load drop the first block's flags, and this keeps every real block's.
fn dump_text(c: &Contents, format: Format) -> Vec<u8> {
    let mut out = Vec::new();
    let mut blocks: Vec<(Option<String>, &Db)> = Vec::new();
    let empty: Db = (0, Vec::new());
    if c.get(&None).is_none_or(|(f, _)| *f != 0) {
        blocks.push((None, &empty));
    }
    blocks.extend(c.iter().map(|(n, d)| (n.clone(), d)));
    for (name, (flags, recs)) in blocks {
        let mut h = Header::new(format, name, *flags);
        h.mapsize = Some(256 << 20);
        dumpfmt::write_header(&mut out, &h).unwrap();
        for (k, v) in recs {
            dumpfmt::write_item(&mut out, format, k).unwrap();
            dumpfmt::write_item(&mut out, format, v).unwrap();
        }
        dumpfmt::write_end(&mut out).unwrap();
    }
    out
}

fn named_strategy() -> impl Strategy<Value = Contents> {
    proptest::collection::btree_map(
        "[a-z][a-z0-9_.-]{0,12}",
        prop_oneof![db_strategy(1), dup_strategy()],
        1..4,
    )
    .prop_map(|named| {
        named
            .into_iter()
            .map(|(k, (f, recs))| (Some(k), (f, normalize(f, &recs))))
            .collect()
    })
}

fn main_strategy() -> impl Strategy<Value = Contents> {
    proptest::collection::vec(
        (
            proptest::collection::vec(any::<u8>(), 1..64),
            proptest::collection::vec(any::<u8>(), 0..300),
        ),
        1..200,
    )
    .prop_map(|recs| [(None, (0, normalize(0, &recs)))].into_iter().collect())
}

/// Loads `c` into a new LMDB environment with LMDB's own mdb_load.
fn lmdb_env(dir: &Path, c: &Contents) -> PathBuf {
    lmdb_load(&dir.join("lmdb"), &[], &dump_text(c, Format::Bytevalue))
}

/// Runs LMDB's mdb_load with `args` into a new environment at `p` (a directory it creates).
fn lmdb_load(p: &Path, args: &[&str], text: &[u8]) -> PathBuf {
    std::fs::create_dir_all(p).unwrap();
    let mut a = args.to_vec();
    a.push(s(p));
    lmdb("mdb_load", &a, text);
    p.to_path_buf()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    /// mdb_dump -a (named databases with flags) -> cairn load.
    #[test]
    fn lmdb_named_databases_load_into_cairn(c in named_strategy(), print in any::<bool>()) {
        if !lmdb_tools() {
            return Ok(());
        }
        let dir = tempfile::tempdir().unwrap();
        let l = lmdb_env(dir.path(), &c);
        // mdb_dump -p leaves a backslash unescaped, so print form only for data without one.
        let print = print && !c.values().flat_map(|d| &d.1).any(|(k, v)| k.contains(&b'\\') || v.contains(&b'\\'));
        let args: Vec<&str> = if print { vec!["-a", "-p", s(&l)] } else { vec!["-a", s(&l)] };
        let text = lmdb("mdb_dump", &args, b"");
        let cairn_env = dir.path().join("cairn");
        ok(&["load", s(&cairn_env)], &text);
        prop_assert_eq!(read(&cairn_env), c);
    }

    /// mdb_dump of a main database -> cairn load.
    #[test]
    fn lmdb_main_database_loads_into_cairn(c in main_strategy()) {
        if !lmdb_tools() {
            return Ok(());
        }
        let dir = tempfile::tempdir().unwrap();
        let l = lmdb_env(dir.path(), &c);
        let text = lmdb("mdb_dump", &[s(&l)], b"");
        let cairn_env = dir.path().join("cairn");
        ok(&["load", s(&cairn_env)], &text);
        prop_assert_eq!(read(&cairn_env), c);
    }

    /// cairn dump -a -> mdb_load, then LMDB's mdb_dump shows every record and flag.
    #[test]
    fn cairn_dump_loads_into_lmdb(named in named_strategy(), mut main in main_strategy(), print in any::<bool>()) {
        if !lmdb_tools() {
            return Ok(());
        }
        // Database names are keys of the main database, in LMDB and in Cairn (a clash is
        // MDB_INCOMPATIBLE in both).
        for (_, recs) in main.values_mut() {
            recs.retain(|(k, _)| !named.contains_key(&Some(String::from_utf8_lossy(k).into_owned())));
        }
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("cairn");
        let mut c = named.clone();
        c.extend(main.clone());
        build(&src, &c);
        let mut args = vec!["dump", "-a"];
        if print {
            args.push("-p");
        }
        args.push(s(&src));
        let text = ok(&args, b"");
        let l = lmdb_load(&dir.path().join("lmdb"), &[], &text);
        // Named databases, flags included.
        let got: Contents = parse_dump(&lmdb("mdb_dump", &["-a", s(&l)], b"")).into_iter().collect();
        prop_assert_eq!(&got, &named);
        // LMDB's main database holds Cairn's main records plus one record per named database.
        let lmain = parse_dump(&lmdb("mdb_dump", &[s(&l)], b"")).remove(0).1 .1;
        let plain: Vec<_> = lmain
            .iter()
            .filter(|(k, _)| !named.contains_key(&Some(String::from_utf8_lossy(k).into_owned())))
            .cloned()
            .collect();
        prop_assert_eq!(&plain, &main[&None].1);
        prop_assert_eq!(lmain.len(), plain.len() + named.len());
    }
}

/// The named databases of the sample, in a Cairn environment and, through `cairn dump -a` and
/// `mdb_load`, in an LMDB one.
fn sample_in_both(dir: &Path) -> (Contents, PathBuf, PathBuf) {
    let src = dir.join("cairn");
    let mut c = sample();
    c.remove(&None);
    build(&src, &c);
    let text = ok(&["dump", "-a", s(&src)], b"");
    let l = lmdb_load(&dir.join("lmdb"), &[], &text);
    (c, src, l)
}

/// Both ways, byte for byte: Cairn -> LMDB -> Cairn gives the same dump text.
#[test]
fn round_trip_through_lmdb_is_identical() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, src, l) = sample_in_both(dir.path());
    let back = lmdb("mdb_dump", &["-a", s(&l)], b"");
    let dst = dir.path().join("dst");
    ok(&["load", s(&dst)], &back);
    assert_eq!(read(&dst), read(&src));
    // mapsize, maxreaders and db_pagesize differ between the two engines; the rest is equal.
    let strip = |t: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(t)
            .lines()
            .filter(|l| !l.starts_with("mapsize=") && !l.starts_with("maxreaders="))
            .filter(|l| !l.starts_with("db_pagesize="))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(strip(&ok(&["dump", "-a", s(&dst)], b"")), strip(&back));
}

/// The first database of a dump keeps its flags in Cairn, whatever LMDB 0.9's mdb_load does.
#[test]
fn first_block_flags_survive_cairn_load() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = b"VERSION=3\nformat=bytevalue\ndatabase=ints\ntype=btree\nintegerkey=1\nHEADER=END\n 0200000000000000\n 62\n 0100000000000000\n 61\nDATA=END\n";
    ok(&["load", s(&dir.path().join("cairn"))], text);
    let out = String::from_utf8(ok(
        &["dump", "-s", "ints", s(&dir.path().join("cairn"))],
        b"",
    ))
    .unwrap();
    assert!(out.contains("integerkey=1\n"), "{out}");
    assert!(
        out.contains(" 0100000000000000\n 61\n 0200000000000000\n 62\n"),
        "{out}"
    );
    // What LMDB's loader does with the same input is reported, not relied upon.
    let l = lmdb_load(&dir.path().join("lmdb"), &[], text);
    let lout = String::from_utf8(lmdb("mdb_dump", &["-s", "ints", s(&l)], b"")).unwrap();
    eprintln!(
        "LMDB's mdb_load {} the first block's integerkey flag",
        if lout.contains("integerkey=1") {
            "kept"
        } else {
            "dropped"
        }
    );
}

/// `cairn stat` and `mdb_stat` agree on entries per database and use the same labels.
#[test]
fn stat_agrees_with_mdb_stat() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (c, src, l) = sample_in_both(dir.path());
    let entries = |t: &[u8]| -> Vec<(String, String)> {
        let t = String::from_utf8_lossy(t).into_owned();
        let mut out = Vec::new();
        let mut cur = String::new();
        for line in t.lines() {
            if let Some(n) = line.strip_prefix("Status of ") {
                cur = n.to_string();
            } else if let Some(e) = line.strip_prefix("  Entries: ") {
                out.push((cur.clone(), e.to_string()));
            }
        }
        out
    };
    let ours = entries(&ok(&["stat", "-a", s(&src)], b""));
    let theirs = entries(&lmdb("mdb_stat", &["-a", s(&l)], b""));
    // Both main databases count the named databases' records (their names are its keys).
    assert_eq!(theirs[0], ("Main DB".to_string(), c.len().to_string()));
    assert_eq!(ours, theirs);
}

/// mdb_load's -T plain text is read the same way by `cairn load -T`.
#[test]
fn plain_text_mode_matches_mdb_load() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let text = b"alpha\none\\0atwo\nb\\\\eta\n\ngamma\n\\00\\ff\n";
    let l = lmdb_load(&dir.path().join("lmdb"), &["-T", "-s", "t"], text);
    let c = dir.path().join("cairn");
    ok(&["load", "-T", "-s", "t", s(&c)], text);
    let ld = parse_dump(&lmdb("mdb_dump", &["-s", "t", s(&l)], b""));
    let got = read(&c);
    assert_eq!(got[&Some("t".to_string())].1, ld[0].1 .1);
    assert_eq!(ld[0].1 .1.len(), 3);
}

/// Sorted duplicates both ways. Runs once the engine implements DUP_SORT.
#[test]
fn dupsort_round_trip_both_ways() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut text = b"VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\nDATA=END\n".to_vec();
    text.extend(b"VERSION=3\nformat=bytevalue\ndatabase=d\ntype=btree\nduplicates=1\ndupsort=1\nHEADER=END\n");
    for k in 0..50u8 {
        for v in [3u8, 1, 2] {
            text.extend(format!(" {k:02x}{k:02x}\n {v:02x}{k:02x}\n").bytes());
        }
    }
    text.extend(b"DATA=END\n");
    let l = lmdb_load(&dir.path().join("lmdb"), &[], &text);
    let ldump = lmdb("mdb_dump", &["-a", s(&l)], b"");
    assert!(String::from_utf8_lossy(&ldump).contains("dupsort=1"));
    let c = dir.path().join("cairn");
    ok(&["load", s(&c)], &ldump);
    let cdump = ok(&["dump", "-a", s(&c)], b"");
    assert_eq!(parse_dump(&cdump), parse_dump(&ldump));
    assert_eq!(parse_dump(&cdump)[0].1 .1.len(), 150);
    let l2 = lmdb_load(&dir.path().join("lmdb2"), &[], &cdump);
    assert_eq!(
        parse_dump(&lmdb("mdb_dump", &["-a", s(&l2)], b"")),
        parse_dump(&ldump)
    );
}

/// `cairn stat -efrra` prints `mdb_stat -efrra`'s sections and labels in the same order.
#[test]
fn stat_layout_matches_mdb_stat() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, src, l) = sample_in_both(dir.path());
    let layout = |t: &[u8]| -> Vec<String> {
        String::from_utf8_lossy(t)
            .lines()
            .map(|line| match line.split_once(": ") {
                Some((label, _)) => format!("{label}: N"),
                None => line.to_string(),
            })
            .collect()
    };
    let ours = layout(&ok(&["stat", "-efrra", s(&src)], b""));
    let theirs = layout(&lmdb("mdb_stat", &["-efrra", s(&l)], b""));
    assert_eq!(ours, theirs);
}

/// `stat -e`'s map size means what `mdb_stat -e`'s does: what the data file may grow to (in
/// LMDB the map size recorded by its writer, here mdb_load's `mapsize=`), past the file's
/// size; `Max pages` is it in pages, and the pages used are among them.
#[test]
fn stat_map_size_means_what_mdb_stat_means() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, src, l) = sample_in_both(dir.path());
    let theirs = String::from_utf8(lmdb("mdb_stat", &["-e", s(&l)], b"")).unwrap();
    let ours = String::from_utf8(ok(&["stat", "-e", s(&src)], b"")).unwrap();
    for (out, data) in [
        (&theirs, l.join("data.mdb")),
        (&ours, src.join("data.cairn")),
    ] {
        let file = std::fs::metadata(&data).unwrap().len();
        let (map, page) = (figure(out, "Map size"), figure(out, "Page size"));
        assert!(map > file, "map size {map}, {file}-byte file:\n{out}");
        assert_eq!(figure(out, "Max pages"), map / page, "{out}");
        assert!(figure(out, "Number of pages used") * page <= map, "{out}");
    }
    // LMDB's is the limit its writer recorded: mdb_load took it from `cairn dump`'s mapsize=.
    let header = String::from_utf8(ok(&["dump", "-s", "ints", s(&src)], b"")).unwrap();
    let mapsize: u64 = header
        .lines()
        .find_map(|l| l.strip_prefix("mapsize="))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(figure(&theirs, "Map size"), mapsize);
}

/// `cairn copy` onto what is already there, next to `mdb_copy` onto the same in LMDB's
/// layout: the same exit status (1 when refused), EEXIST ("File exists") from both, the
/// destination left as it was; success for both where nothing is in the way (lock files only).
#[test]
fn copy_onto_an_environment_as_mdb_copy() {
    if !lmdb_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (_, src, l) = sample_in_both(dir.path());
    // Each case: (name, -n, how to prepare the destination, given its data file's name).
    type Prep = fn(&Path, &str);
    let cases: [(&str, bool, Prep); 6] = [
        ("an environment", false, |d, _| {
            std::fs::create_dir(d).unwrap();
        }),
        ("an empty data file", false, |d, data| {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join(data), b"").unwrap();
        }),
        ("only a lock file", false, |d, data| {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join(data.replace("data", "lock")), b"").unwrap();
        }),
        ("-n: a data file", true, |_, _| {}),
        ("-n: an empty file", true, |d, _| {
            std::fs::write(d, b"").unwrap();
        }),
        ("-n: a directory", true, |d, _| {
            std::fs::create_dir(d).unwrap();
        }),
    ];
    for compact in [false, true] {
        for (i, (what, n, prep)) in cases.iter().enumerate() {
            let mut outcome = Vec::new();
            for (who, tool, from, data) in [
                ("lmdb", "mdb_copy", &l, "data.mdb"),
                ("cairn", env!("CARGO_BIN_EXE_cairn"), &src, "data.cairn"),
            ] {
                let d = dir.path().join(format!("{who}-{compact}-{i}"));
                prep(&d, data);
                let mut args: Vec<String> = Vec::new();
                if who == "cairn" {
                    args.push("copy".into());
                }
                if compact {
                    args.push("-c".into());
                }
                let from = if *n {
                    args.push("-n".into());
                    from.join(data)
                } else {
                    from.to_path_buf()
                };
                args.extend([s(&from).to_string(), s(&d).to_string()]);
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                // "an environment" and "-n: a data file": a first copy makes it.
                if i == 0 || i == 3 {
                    let o = run(tool, &args, b"");
                    assert!(o.status.success(), "{tool} {args:?}: first copy failed");
                }
                let snapshot = |p: &Path| -> Vec<(String, Vec<u8>)> {
                    if p.is_file() {
                        return vec![(String::new(), std::fs::read(p).unwrap())];
                    }
                    let mut v: Vec<_> = std::fs::read_dir(p)
                        .unwrap()
                        .map(|e| {
                            let p = e.unwrap().path();
                            let bytes = std::fs::read(&p).unwrap_or_default();
                            (p.display().to_string(), bytes)
                        })
                        .collect();
                    v.sort();
                    v
                };
                let before = snapshot(&d);
                let o = run(tool, &args, b"");
                let err = String::from_utf8_lossy(&o.stderr).into_owned();
                if o.status.success() {
                    assert!(d.is_dir() && d.join(data).is_file(), "{who}: {what}");
                } else {
                    assert!(err.contains("File exists"), "{tool} {args:?}: {err}");
                    assert_eq!(snapshot(&d), before, "{tool} {args:?} changed {what}");
                }
                outcome.push((o.status.code(), err.contains("File exists")));
            }
            assert_eq!(
                outcome[0], outcome[1],
                "copy onto {what} (compact {compact}): mdb_copy {:?}, cairn copy {:?}",
                outcome[0], outcome[1]
            );
        }
    }
}
