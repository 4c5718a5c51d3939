//! `cairn dump` / `cairn load` through the built binary: random binary round trips in both text
//! forms with every supported flag, one database or all, plain text, -N, append mode, and
//! malformed input that must name its line and change nothing.

mod common;

use common::*;
use proptest::prelude::*;
use std::path::Path;

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn contents_strategy() -> impl Strategy<Value = Contents> {
    (
        db_strategy(0),
        proptest::collection::btree_map(
            "[a-z][a-z0-9 _.=-]{0,12}",
            prop_oneof![db_strategy(0), dup_strategy()],
            0..4,
        ),
    )
        .prop_map(|(mut main, named)| {
            // Named databases are keys of the main database: one that is INTEGER_KEY holds
            // none (LMDB's rule), and no plain key of it may be a name.
            if !named.is_empty() {
                main.0 &= !0x08;
                main.1
                    .retain(|(k, _)| !named.contains_key(&*String::from_utf8_lossy(k)));
            }
            let mut c = Contents::new();
            c.insert(None, main);
            for (k, v) in named {
                c.insert(Some(k), v);
            }
            c
        })
}

/// What an environment built from `c` holds, in the engine's order.
fn expected(c: &Contents) -> Contents {
    c.iter()
        .filter(|(name, (flags, recs))| name.is_some() || *flags != 0 || !recs.is_empty())
        .map(|(n, (f, recs))| (n.clone(), (*f, normalize(*f, recs))))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_every_database(c in contents_strategy(), print in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        build(&src, &c);
        let want = expected(&c);
        prop_assert_eq!(&read(&src), &want);
        let mut args = vec!["dump", "-a"];
        if print {
            args.push("-p");
        }
        args.push(s(&src));
        let text = ok(&args, b"");
        let dst = dir.path().join("dst");
        ok(&["load", s(&dst)], &text);
        prop_assert_eq!(&read(&dst), &want);
        // The reloaded environment dumps to the same text.
        args.pop();
        args.push(s(&dst));
        prop_assert_eq!(ok(&args, b""), text);
    }
}

#[test]
fn header_is_mdb_dumps() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), &sample());
    let text = String::from_utf8(ok(&["dump", "-s", "ints", s(dir.path())], b"")).unwrap();
    let header: Vec<&str> = text.lines().take_while(|l| *l != "HEADER=END").collect();
    assert_eq!(
        header[..4],
        [
            "VERSION=3",
            "format=bytevalue",
            "database=ints",
            "type=btree"
        ]
    );
    assert!(header[4].starts_with("mapsize="));
    assert_eq!(
        header[5..],
        ["maxreaders=126", "integerkey=1", "db_pagesize=4096"]
    );
    assert!(text.ends_with("DATA=END\n"));
    assert!(text.contains("HEADER=END\n 0000000000000000\n 76\n 0100000000000000\n 76\n"));
    // -l lists names; -f writes a file.
    let names = ok(&["dump", "-l", s(dir.path())], b"");
    assert_eq!(names, b"ints\nrev\n");
    // As with mdb_dump, listing an environment without named databases fails.
    let plain = dir.path().join("plain");
    ok(&["load", "-T", s(&plain)], b"k\nv\n");
    assert!(fails(&["dump", "-l", s(&plain)], b"").contains("does not contain named databases"));
    let f = dir.path().join("out.txt");
    assert!(ok(&["dump", "-s", "ints", "-f", s(&f), s(dir.path())], b"").is_empty());
    assert_eq!(std::fs::read_to_string(&f).unwrap(), text);
}

#[test]
fn first_database_keeps_its_flags() {
    // Some LMDB 0.9 releases' mdb_load create the first database of a dump without its flags.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    build(&src, &sample());
    let text = ok(&["dump", "-s", "ints", s(&src)], b"");
    let dst = dir.path().join("dst");
    ok(&["load", s(&dst)], &text);
    let got = read(&dst);
    assert_eq!(got[&Some("ints".to_string())].0, 0x08);
    assert_eq!(
        got[&Some("ints".to_string())],
        read(&src)[&Some("ints".to_string())]
    );
}

#[test]
fn s_names_the_target_when_the_input_names_none() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    build(&src, &sample());
    let main = ok(&["dump", s(&src)], b"");
    let dst = dir.path().join("dst");
    ok(&["load", "-s", "copy", s(&dst)], &main);
    let got = read(&dst);
    // The main database's dump holds the named databases' records too, as mdb_dump's does:
    // in "copy" they are plain keys.
    let (flags, mut recs) = got[&Some("copy".to_string())].clone();
    recs.retain(|(k, _)| k != b"ints" && k != b"rev");
    assert_eq!((flags, recs), read(&src)[&None]);
    assert!(!got.contains_key(&None));
}

#[test]
fn plain_text_input() {
    let dir = tempfile::tempdir().unwrap();
    ok(
        &["load", "-T", "-s", "t", s(dir.path())],
        b"k\\\\1\nv\\0a1\nk2\n\n",
    );
    let got = read(dir.path());
    assert_eq!(
        got[&Some("t".to_string())].1,
        vec![
            (b"k2".to_vec(), vec![]),
            (b"k\\1".to_vec(), b"v\n1".to_vec())
        ]
    );
}

#[test]
fn no_overwrite_keeps_existing_values() {
    let dir = tempfile::tempdir().unwrap();
    let first = b"VERSION=3\nformat=print\ntype=btree\nHEADER=END\n a\n 1\n b\n 2\nDATA=END\n";
    let second = b"VERSION=3\nformat=print\ntype=btree\nHEADER=END\n b\n X\n c\n 3\nDATA=END\n";
    ok(&["load", s(dir.path())], first);
    ok(&["load", "-N", s(dir.path())], second);
    let recs = |c: &Contents| c[&None].1.clone();
    let pairs = |v: &[(&str, &str)]| -> Vec<(Vec<u8>, Vec<u8>)> {
        v.iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    };
    assert_eq!(
        recs(&read(dir.path())),
        pairs(&[("a", "1"), ("b", "2"), ("c", "3")])
    );
    ok(&["load", s(dir.path())], second);
    assert_eq!(
        recs(&read(dir.path())),
        pairs(&[("a", "1"), ("b", "X"), ("c", "3")])
    );
}

fn records_text(keys: impl Iterator<Item = u32>) -> Vec<u8> {
    let mut t = b"VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n".to_vec();
    for k in keys {
        t.extend(format!(" {:08x}\n {}\n", k, "ab".repeat(40)).bytes());
    }
    t.extend(b"DATA=END\n");
    t
}

fn leaf_pages(path: &Path) -> u64 {
    let v: serde_json::Value =
        serde_json::from_slice(&ok(&["stat", "--json", s(path)], b"")).unwrap();
    v["databases"][0]["leaf_pages"].as_u64().unwrap()
}

#[test]
fn sorted_input_is_appended() {
    let n = 20_000u32;
    let dir = tempfile::tempdir().unwrap();
    let sorted = dir.path().join("sorted");
    ok(&["load", s(&sorted)], &records_text(0..n));
    // The same records in a scrambled order: ordinary inserts split pages half full.
    let scrambled = dir.path().join("scrambled");
    ok(
        &["load", s(&scrambled)],
        &records_text((0..n).map(|i| i.wrapping_mul(7919) % n)),
    );
    assert_eq!(read(&sorted), read(&scrambled));
    let (a, b) = (leaf_pages(&sorted), leaf_pages(&scrambled));
    assert!(
        a * 100 < b * 80,
        "appended load has {a} leaves, inserted {b}"
    );
    // -a with sorted input works; with unsorted input it names the first key out of order.
    ok(
        &["load", "-a", s(&dir.path().join("a"))],
        &records_text(0..100),
    );
    let unsorted = records_text([1, 2, 3, 2, 5].into_iter());
    let e = fails(&["load", "-a", s(&dir.path().join("b"))], &unsorted);
    assert!(
        e.contains("line 11:") && e.contains("-a needs sorted input"),
        "{e}"
    );
    assert!(!dir.path().join("b").exists());
}

/// Malformed inputs, the line each must be reported at, and a word of the message.
fn malformed() -> Vec<(&'static str, String, u64, &'static str)> {
    let h = "VERSION=3\nformat=bytevalue\ntype=btree\nHEADER=END\n";
    let good = format!("{h} 61\n 31\nDATA=END\n");
    vec![
        (
            "odd hex",
            format!("{h} 61\n 313\nDATA=END\n"),
            6,
            "odd number",
        ),
        (
            "bad hex",
            format!("{h} 61\n 3z\nDATA=END\n"),
            6,
            "hex digit",
        ),
        ("no DATA=END", format!("{h} 61\n 31\n"), 7, "DATA=END"),
        (
            "key without value",
            format!("{h} 61\nDATA=END\n"),
            6,
            "no value",
        ),
        (
            "no leading space",
            format!("{h} 61\n31\nDATA=END\n"),
            6,
            "one space",
        ),
        (
            "version",
            "VERSION=9\nHEADER=END\nDATA=END\n".into(),
            1,
            "VERSION",
        ),
        (
            "format",
            "VERSION=3\nformat=xml\nHEADER=END\n".into(),
            2,
            "format",
        ),
        (
            "type",
            "VERSION=3\ntype=hash\nHEADER=END\n".into(),
            2,
            "type",
        ),
        (
            "garbage header",
            "VERSION=3\nhello\n".into(),
            2,
            "keyword=value",
        ),
        (
            "second block",
            format!("{good}{h} 62\n 3\nDATA=END\n"),
            13,
            "odd number",
        ),
        (
            "print escape",
            "VERSION=3\nformat=print\nHEADER=END\n a\\q\n b\nDATA=END\n".to_string(),
            4,
            "escape",
        ),
        (
            "integer key width",
            "VERSION=3\ndatabase=i\nintegerkey=1\nHEADER=END\n 010000\n 00\nDATA=END\n".into(),
            5,
            "integer key",
        ),
        (
            "key too long",
            format!("{h} {}\n 00\nDATA=END\n", "ab".repeat(3000)),
            5,
            "too long",
        ),
        (
            "dup flag without dupsort",
            "VERSION=3\ndatabase=f\ndupfixed=1\nHEADER=END\nDATA=END\n".into(),
            4,
            "need DUP_SORT",
        ),
        (
            "flags differ from the existing database",
            "VERSION=3\ndatabase=rev\nHEADER=END\n 00\n 00\nDATA=END\n".into(),
            3,
            "exists with flags [reversekey]",
        ),
    ]
}

#[test]
fn malformed_input_names_its_line_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    build(&db, &sample());
    let before = ok(&["dump", "-a", s(&db)], b"");
    for (what, text, line, word) in malformed() {
        let e = fails(&["load", s(&db)], text.as_bytes());
        assert!(e.contains(&format!("line {line}:")), "{what}: {e}");
        assert!(e.contains(word), "{what}: {e}");
        assert_eq!(
            ok(&["dump", "-a", s(&db)], b""),
            before,
            "{what} changed the database"
        );
        // A load that would have created the environment leaves nothing behind.
        if what == "flags differ from the existing database" {
            continue;
        }
        let fresh = dir.path().join("fresh");
        let e = fails(&["load", s(&fresh)], text.as_bytes());
        assert!(e.contains(&format!("line {line}:")), "{what}: {e}");
        assert!(!fresh.exists(), "{what} left {} behind", fresh.display());
    }
    ok(&["check", s(&db)], b"");
    // The same with -f, and for a data file (-n).
    let f = dir.path().join("bad.txt");
    std::fs::write(&f, malformed()[0].1.as_bytes()).unwrap();
    let e = fails(&["load", "-f", s(&f), s(&db)], b"");
    assert!(e.contains("line 6:"), "{e}");
    let file = dir.path().join("file.cairn");
    fails(&["load", "-n", "-f", s(&f), s(&file)], b"");
    assert!(!file.exists() && !dir.path().join("file.cairn-lock").exists());
}

#[test]
fn unknown_header_keywords_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let text =
        b"VERSION=3\nformat=print\ngeometry=l0,u1\ntype=btree\nHEADER=END\n a\n b\nDATA=END\n";
    let o = cairn(&["load", s(dir.path())], text);
    assert!(o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("line 3: unrecognized keyword ignored: geometry"),
        "{e}"
    );
}

/// Every dup flag combination survives dump and load, every pair in the engine's order.
#[test]
fn dup_flags_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let sets = [
        0x04u32,
        0x04 | 0x10,
        0x04 | 0x20,
        0x04 | 0x40,
        0x04 | 0x10 | 0x20,
        0x04 | 0x02,
    ];
    {
        let env = cairn::Env::open(&src).unwrap();
        let mut w = env.write_txn().unwrap();
        for flags in sets {
            let name = format!("d{flags:02x}");
            let f = cairn::DbFlags::from_bits_retain(flags) | cairn::DbFlags::CREATE;
            let db = w.create_db(Some(&name), f).unwrap();
            for k in 0..40u32 {
                // Values of one size (DUPFIXED), native integers (INTEGERDUP), in a scrambled
                // order; one key with a single value.
                let n = if k == 7 { 1 } else { 1 + k % 9 };
                for j in 0..n {
                    let v = (u64::from(j).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(k))
                        .to_le_bytes();
                    w.put(
                        db,
                        format!("key{k:03}").as_bytes(),
                        &v,
                        cairn::PutFlags::empty(),
                    )
                    .unwrap();
                }
            }
        }
        w.commit().unwrap();
    }
    let want = read(&src);
    assert_eq!(want.len(), sets.len());
    for print in [false, true] {
        let mut args = vec!["dump", "-a"];
        if print {
            args.push("-p");
        }
        let text = ok(&[&args[..], &[s(&src)]].concat(), b"");
        for flags in sets {
            let t = String::from_utf8_lossy(&text).into_owned();
            let block = t.split(&format!("database=d{flags:02x}\n")).nth(1).unwrap();
            assert!(block.contains("duplicates=1\n"), "{flags:#x}");
            for name in cairn_cli::dumpfmt::flag_names(flags) {
                assert!(block
                    .split("HEADER=END")
                    .next()
                    .unwrap()
                    .contains(&format!("{name}=1\n")));
            }
        }
        let dst = dir.path().join(format!("dst{print}"));
        ok(&["load", s(&dst)], &text);
        assert_eq!(read(&dst), want);
        assert_eq!(ok(&[&args[..], &[s(&dst)]].concat(), b""), text);
        // -N twice: the second load finds every pair and skips it, duplicates included.
        let again = dir.path().join(format!("again{print}"));
        ok(&["load", "-N", s(&again)], &text);
        ok(&["load", "-N", s(&again)], &text);
        assert_eq!(read(&again), want);
    }
}

/// Dump text of a dupsort database "d": for each key, its values written in `order`.
fn dup_text(order: &[u8], print: bool) -> Vec<u8> {
    let form = if print { "print" } else { "bytevalue" };
    let mut t = format!(
        "VERSION=3\nformat={form}\ndatabase=d\ntype=btree\nduplicates=1\ndupsort=1\nHEADER=END\n"
    )
    .into_bytes();
    for k in 0..300u16 {
        for &v in order {
            let (key, val) = (k.to_be_bytes(), [v, k as u8, 0x5c]);
            dumpfmt_item(&mut t, &key, print);
            dumpfmt_item(&mut t, &val, print);
        }
    }
    t.extend(b"DATA=END\n");
    t
}

fn dumpfmt_item(out: &mut Vec<u8>, bytes: &[u8], print: bool) {
    let f = if print {
        cairn_cli::dumpfmt::Format::Print
    } else {
        cairn_cli::dumpfmt::Format::Bytevalue
    };
    cairn_cli::dumpfmt::encode_item(out, f, bytes, false);
}

/// Sorted duplicates round-trip: values come back sorted under their key, header flags kept,
/// in both forms, whether the input was sorted (appended) or not.
#[test]
fn dupsort_round_trip() {
    for print in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let sorted = dup_text(&[1, 2, 3], print);
        ok(&["load", s(&dir.path().join("a"))], &sorted);
        ok(
            &["load", s(&dir.path().join("b"))],
            &dup_text(&[3, 1, 2], print),
        );
        let mut args = vec!["dump", "-s", "d"];
        if print {
            args.push("-p");
        }
        for db in ["a", "b"] {
            let p = dir.path().join(db);
            let mut a = args.clone();
            a.push(s(&p));
            let text = ok(&a, b"");
            assert_eq!(text, as_dumped(&sorted), "{db}");
            let c = read(&p);
            assert_eq!(c[&Some("d".to_string())].0, 0x04);
            assert_eq!(c[&Some("d".to_string())].1.len(), 900);
        }
    }
}

/// `dup_text`'s input with the header lines `cairn dump` adds: mapsize, maxreaders, page size.
fn as_dumped(text: &[u8]) -> Vec<u8> {
    let t = String::from_utf8_lossy(text).into_owned();
    let (head, body) = t.split_once("HEADER=END\n").unwrap();
    let head = head.replace(
        "type=btree\n",
        "type=btree\nmapsize=67108864\nmaxreaders=126\n",
    );
    format!("{head}db_pagesize=4096\nHEADER=END\n{body}").into_bytes()
}
