//! Hostile files: real databases built through the public API, then damaged on disk in every
//! way a disk, a crash or an attacker can: truncated, zeroed, random bytes, one flipped bit in
//! each kind of page (meta, branch, leaf, overflow, commit list, free tree), files of
//! other formats, absurd page sizes and versions, and the 2019 LMDB CVEs and py-lmdb 2.1
//! hardening cases recreated as Cairn files (with valid checksums, so the bounds checks are
//! what is tested). Every case is opened, read every way (support::read_everything), written
//! to, and must give a typed error or, when the damage hit only what the last commit wrote, a
//! clean fallback to the commit before: never a panic, a hang, a read outside the map, or
//! wrong data. `CAIRN_HOSTILE_CASES` sets the number of random damage cases (default 300).

mod support;

use cairn::format::{self, DbRecord, Meta, MetaSlot, Page, WrittenRun, SECTOR};
use cairn::{DbFlags, Env, Error, PutFlags};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use support::{Rng, Tables};

const PS: usize = 4096;

// Page header fields (docs/design.md, "Page header").
const H_TXNID: usize = 16;
const H_KIND: usize = 24;
const H_FLAGS: usize = 25;
const H_NKEYS: usize = 26;
const H_UPPER: usize = 28;
const H_PLEN: usize = 32;
// Meta slot fields (docs/design.md, "Meta slot").
const M_VERSION: usize = 8;
const M_PAGE_SIZE: usize = 12;
const M_MAIN: usize = 56;
/// Version 2's catalog record, reserved (zero) since version 3.
const M_RESERVED: usize = 104;

/// A database built through the API and what every commit left in it.
struct Built {
    image: Vec<u8>,
    /// Contents after each commit, oldest first.
    history: Vec<Tables>,
}

fn value(i: u32, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 31 + j * 7) as u8).collect()
}

fn snapshot(env: &Env) -> Tables {
    support::read_everything(env).expect("pristine database reads")
}

/// Four commits: bulk load with overflow values in two named databases; deletes (free pages);
/// more keys; scattered updates, so the last commit writes many runs (a commit-list page).
fn build() -> Built {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(8).open(dir.path()).unwrap();
    let main = env.main_db();
    let mut history = Vec::new();

    let mut w = env.write_txn().unwrap();
    let alpha = w.create_db(Some("alpha"), DbFlags::CREATE).unwrap();
    let beta = w
        .create_db(Some("beta"), DbFlags::CREATE | DbFlags::REVERSE_KEY)
        .unwrap();
    for i in 0..3000u32 {
        let len = if i % 300 == 7 {
            5000 + i as usize * 3
        } else {
            100
        };
        w.put(
            main,
            format!("key{i:06}").as_bytes(),
            &value(i, len),
            PutFlags::empty(),
        )
        .unwrap();
    }
    for i in 0..600u32 {
        let len = if i % 200 == 3 {
            9000
        } else {
            20 + (i as usize % 180)
        };
        w.put(
            alpha,
            format!("a/{i:05}").as_bytes(),
            &value(i, len),
            PutFlags::empty(),
        )
        .unwrap();
        w.put(beta, &i.to_le_bytes(), &value(i, 12), PutFlags::empty())
            .unwrap();
    }
    w.commit().unwrap();
    history.push(snapshot(&env));

    let mut w = env.write_txn().unwrap();
    for i in (0..3000u32).step_by(3) {
        w.delete(main, format!("key{i:06}").as_bytes()).unwrap();
    }
    for i in (0..600u32).step_by(5) {
        w.put(
            alpha,
            format!("a/{i:05}").as_bytes(),
            b"updated",
            PutFlags::empty(),
        )
        .unwrap();
    }
    w.commit().unwrap();
    history.push(snapshot(&env));

    let mut w = env.write_txn().unwrap();
    for i in 3000..4000u32 {
        w.put(
            main,
            format!("key{i:06}").as_bytes(),
            &value(i, 100),
            PutFlags::empty(),
        )
        .unwrap();
    }
    // Touch every other leaf so that single free pages lie scattered through the file.
    for i in (1..3000u32).step_by(60) {
        w.put(
            main,
            format!("key{i:06}").as_bytes(),
            b"x",
            PutFlags::empty(),
        )
        .unwrap();
    }
    w.commit().unwrap();
    history.push(snapshot(&env));

    let mut w = env.write_txn().unwrap();
    for i in (2..4000u32).step_by(37) {
        w.put(
            main,
            format!("key{i:06}").as_bytes(),
            &value(i + 1, 90),
            PutFlags::empty(),
        )
        .unwrap();
    }
    w.put(main, b"key999999", &value(9, 12_000), PutFlags::empty())
        .unwrap();
    w.put(alpha, b"a/late", b"late", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    history.push(snapshot(&env));
    drop(env);
    let image = std::fs::read(dir.path().join("data.cairn")).unwrap();
    Built { image, history }
}

/// What a page of the newest snapshot is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    Branch,
    Leaf,
    Overflow,
    CommitList,
    FreeTree,
}

/// The live pages of the newest commit with their role and whether that commit wrote them.
struct Layout {
    newest_slot: usize,
    oldest_slot: usize,
    meta: Meta,
    pages: Vec<(u64, u64, Role)>,
    written: BTreeSet<u64>,
}

fn metas(img: &[u8]) -> Vec<(usize, Meta)> {
    (0..format::META_SLOTS)
        .filter_map(|i| match Meta::decode(&img[i * SECTOR..(i + 1) * SECTOR]) {
            MetaSlot::Valid(m) => Some((i, m)),
            _ => None,
        })
        .collect()
}

fn page_of(img: &[u8], pg: u64) -> &[u8] {
    &img[pg as usize * PS..(pg as usize + 1) * PS]
}

fn walk(
    img: &[u8],
    root: u64,
    role: Option<Role>,
    out: &mut Vec<(u64, u64, Role)>,
) -> Vec<Vec<u8>> {
    let mut values = Vec::new();
    if root == 0 {
        return values;
    }
    let p = Page::new(page_of(img, root), root).unwrap();
    let r = role.unwrap_or(if p.is_leaf() {
        Role::Leaf
    } else {
        Role::Branch
    });
    out.push((root, 1, r));
    for i in 0..p.nkeys() {
        let n = p.node(i).unwrap();
        if !p.is_leaf() {
            values.extend(walk(img, p.child(i).unwrap(), role, out));
        } else if n.is_big() {
            let opg = format::decode_u64(n.val).unwrap();
            let span = format::overflow_pages(PS, n.vlen as usize);
            out.push((opg, span, Role::Overflow));
        } else if n.is_db() {
            values.push(n.val.to_vec());
        }
    }
    values
}

fn layout(img: &[u8]) -> Layout {
    let mut ms = metas(img);
    ms.sort_by_key(|(_, m)| m.txnid);
    let (newest_slot, meta) = ms.last().cloned().unwrap();
    let oldest_slot = ms[0].0;
    let mut pages = Vec::new();
    // The main tree, with its named databases' records (NF_DB nodes) and their trees.
    let named = walk(img, meta.main.root, None, &mut pages);
    walk(img, meta.free.root, Some(Role::FreeTree), &mut pages);
    for rec in named {
        let rec = DbRecord::decode(&rec).unwrap();
        walk(img, rec.root, None, &mut pages);
    }
    let mut runs: Vec<WrittenRun> = meta.inline_runs.clone();
    let mut written = BTreeSet::new();
    let mut lp = meta.list_head;
    while lp != 0 {
        pages.push((lp, 1, Role::CommitList));
        written.insert(lp);
        let (r, next) = format::read_list_page(page_of(img, lp)).unwrap();
        runs.extend(r);
        lp = next;
    }
    for r in runs {
        written.extend(r.start..r.start + u64::from(r.len));
    }
    Layout {
        newest_slot,
        oldest_slot,
        meta,
        pages,
        written,
    }
}

/// Runs `f` on its own thread: a panic or a hang (20 s) fails the test with `label`.
fn guarded<T: Send + 'static>(label: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let out = f();
        let _ = tx.send(());
        out
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(()) => {}
        Err(mpsc::RecvTimeoutError::Disconnected) => {}
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{label}: hangs"),
    }
    h.join()
        .unwrap_or_else(|_| panic!("{label}: panicked (see the message above)"))
}

/// Writes `img` as a data file, opens it through the file system (the real map), reads
/// everything, and tries a write. Returns the first read's outcome.
fn open_file(label: &str, img: Vec<u8>, write: bool) -> Result<Tables, Error> {
    let label = label.to_string();
    guarded(&label.clone(), move || {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("data.cairn"), &img).unwrap();
        let env = match Env::options().max_dbs(8).open(dir.path()) {
            Ok(e) => e,
            Err(e) => {
                assert!(support::is_file_error(&e), "{label}: open gave {e:?}");
                return Err(e);
            }
        };
        let first = support::read_everything(&env);
        if write {
            let sound = first.is_ok();
            match support::write_some(&env) {
                Ok(()) if sound => {
                    support::read_everything(&env)
                        .unwrap_or_else(|e| panic!("{label}: write broke a sound file: {e}"));
                }
                Ok(()) => {}
                Err(e) => assert!(
                    support::is_file_error(&e) || matches!(e, Error::Io { .. }),
                    "{label}: write gave {e:?}"
                ),
            }
        }
        first
    })
}

fn expect_err(label: &str, r: Result<Tables, Error>) -> Error {
    match r {
        Ok(_) => panic!("{label}: damage went unnoticed"),
        Err(e) => {
            assert!(support::is_file_error(&e), "{label}: {e:?}");
            e
        }
    }
}

fn expect_state(label: &str, r: Result<Tables, Error>, want: &Tables) {
    match r {
        Ok(t) => assert!(&t == want, "{label}: opened at the wrong state"),
        Err(e) => panic!("{label}: expected a clean fallback, got {e}"),
    }
}

/// The outcome of random damage: an error, or exactly one of the committed states.
fn judge(label: &str, r: Result<Tables, Error>, b: &Built) {
    match r {
        Ok(t) => assert!(
            b.history.contains(&t),
            "{label}: read data that no commit wrote"
        ),
        Err(e) => assert!(support::is_file_error(&e), "{label}: {e:?}"),
    }
}

fn built() -> &'static Built {
    static B: std::sync::OnceLock<Built> = std::sync::OnceLock::new();
    B.get_or_init(build)
}

fn flip(img: &mut [u8], at: usize, bit: u32) {
    img[at] ^= 1 << (bit % 8);
}

#[test]
fn the_pristine_file_reads_back() {
    let b = built();
    let l = layout(&b.image);
    assert_ne!(
        l.meta.list_head, 0,
        "the last commit should need a commit-list page"
    );
    let roles: BTreeSet<Role> = l.pages.iter().map(|p| p.2).collect();
    assert_eq!(roles.len(), 5, "every kind of page is present: {roles:?}");
    let r = open_file("pristine", b.image.clone(), true);
    expect_state("pristine", r, b.history.last().unwrap());
}

/// One flipped bit at several places of several pages of each kind: a page the last commit
/// wrote makes recovery fall back to the commit before; any other live page is an error when
/// read. Never data that differs from a commit.
#[test]
fn a_flipped_bit_in_each_kind_of_page() {
    let b = built();
    let l = layout(&b.image);
    let last = b.history.last().unwrap();
    let prev = &b.history[b.history.len() - 2];
    let offsets = [0usize, 9, 17, 24, 26, 29, 45, 80, PS / 2, PS - 1];
    let mut by_role: std::collections::BTreeMap<(Role, bool), Vec<(u64, u64)>> = Default::default();
    for &(pg, span, role) in &l.pages {
        by_role
            .entry((role, l.written.contains(&pg)))
            .or_default()
            .push((pg, span));
    }
    let mut cases = 0;
    for ((role, written), pages) in &by_role {
        // First, middle and last page of each group.
        let picks: BTreeSet<usize> = [0, pages.len() / 2, pages.len() - 1].into();
        for &i in &picks {
            let (pg, span) = pages[i];
            for (j, &off) in offsets.iter().enumerate() {
                let run_len = span as usize * PS;
                let at = pg as usize * PS + (off * span as usize).min(run_len - 1);
                let mut img = b.image.clone();
                flip(&mut img, at, j as u32);
                let label = format!("{role:?} page {pg} (written last: {written}) byte {at}");
                let r = open_file(&label, img, j % 3 == 0);
                if *written {
                    expect_state(&label, r, prev);
                } else {
                    expect_err(&label, r);
                }
                cases += 1;
            }
        }
    }
    // Meta slots: the newest one falls back, the oldest one is not needed, the rest of page 0
    // is not read at all.
    for at in [0usize, 8, 12, 20, 33, 60, 130, 200, 503, 505] {
        let mut img = b.image.clone();
        flip(&mut img, l.newest_slot * SECTOR + at, at as u32);
        expect_state(
            &format!("newest meta byte {at}"),
            open_file("meta", img, false),
            prev,
        );
        let mut img = b.image.clone();
        flip(&mut img, l.oldest_slot * SECTOR + at, at as u32);
        expect_state(
            &format!("oldest meta byte {at}"),
            open_file("meta", img, false),
            last,
        );
    }
    let mut img = b.image.clone();
    flip(&mut img, 3 * SECTOR + 100, 3);
    expect_state(
        "page 0 past the slots",
        open_file("page0", img, false),
        last,
    );
    assert!(cases > 60, "{cases} page cases");
}

/// Every meta slot damaged at once: no commit to open.
#[test]
fn all_metas_damaged() {
    let b = built();
    let mut img = b.image.clone();
    for s in 0..3 {
        flip(&mut img, s * SECTOR + 40, 1);
    }
    let e = expect_err("all metas", open_file("all metas", img, false));
    assert!(matches!(e, Error::Corrupted { .. }), "{e:?}");
}

#[test]
fn truncated_files() {
    let b = built();
    let n = b.image.len();
    for len in [
        1,
        7,
        100,
        511,
        512,
        1535,
        1536,
        4095,
        PS,
        PS + 1,
        n / 3,
        n / 2,
        n - PS,
        n - 1,
    ] {
        let img = b.image[..len].to_vec();
        let label = format!("truncated to {len} of {n}");
        let r = open_file(&label, img, true);
        if len < 3 * SECTOR {
            // Too short to hold the magic, or holding it but not the three slots.
            let e = expect_err(&label, r);
            let want_not_cairn = len < 8;
            assert!(
                matches!(e, Error::NotCairn { .. }) == want_not_cairn,
                "{label}: {e:?}"
            );
        } else {
            judge(&label, r, b);
        }
    }
}

/// Files that are not Cairn databases, or not any more.
#[test]
fn foreign_and_blank_files() {
    let b = built();
    let n = b.image.len();
    let not_cairn = |label: &str, img: Vec<u8>| {
        let e = expect_err(label, open_file(label, img, false));
        assert!(matches!(e, Error::NotCairn { .. }), "{label}: {e:?}");
    };
    not_cairn("all zeros", vec![0u8; n]);
    let mut rng = Rng(7);
    not_cairn("random bytes", (0..n).map(|_| rng.next() as u8).collect());
    not_cairn(
        "text",
        b"hello, world\nthis is not a database\n".repeat(300),
    );
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    not_cairn(
        "LMDB data.mdb",
        std::fs::read(fixtures.join("lmdb-data.mdb")).unwrap(),
    );
    not_cairn("SQLite", std::fs::read(fixtures.join("sqlite.db")).unwrap());
    // Random bytes behind valid commit records: every page is garbage.
    let mut img: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
    img[..PS].copy_from_slice(&b.image[..PS]);
    expect_err("random pages", open_file("random pages", img, true));
    // An empty file is a new database when opened for writing, an error read-only.
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join("empty.cairn");
    std::fs::write(&path, b"").unwrap();
    let ro = Env::options().read_only(true).no_subdir(true).open(&path);
    assert!(
        matches!(ro, Err(Error::Invalid(_)) | Err(Error::Io { .. })),
        "{:?}",
        ro.err()
    );
    let env = Env::options().no_subdir(true).open(&path).unwrap();
    assert!(support::read_everything(&env).unwrap()[""].is_empty());
}

fn reseal_meta(img: &mut [u8], slot: usize, edit: impl Fn(&mut [u8])) {
    let s = &mut img[slot * SECTOR..(slot + 1) * SECTOR];
    edit(s);
    format::seal_meta(s);
}

/// Absurd page sizes and foreign versions, each in a record with a valid checksum.
#[test]
fn absurd_page_sizes_and_versions() {
    let b = built();
    let l = layout(&b.image);
    let prev = &b.history[b.history.len() - 2];
    for ps in [0u32, 1, 512, 3000, 4097, 8192, 1 << 17, 1 << 31, u32::MAX] {
        let label = format!("page size {ps} in every slot");
        let mut img = b.image.clone();
        for s in 0..3 {
            reseal_meta(&mut img, s, |m| {
                m[M_PAGE_SIZE..M_PAGE_SIZE + 4].copy_from_slice(&ps.to_le_bytes())
            });
        }
        let e = expect_err(&label, open_file(&label, img, false));
        assert!(matches!(e, Error::Corrupted { .. }), "{label}: {e:?}");
        // In the newest slot only: an invalid size makes that record unreadable, and a valid
        // size that is not the file's (8192) makes its pages fail verification; either way
        // recovery falls back to the commit before (each record is verified on its own size).
        let label = format!("page size {ps} in the newest slot");
        let mut img = b.image.clone();
        reseal_meta(&mut img, l.newest_slot, |m| {
            m[M_PAGE_SIZE..M_PAGE_SIZE + 4].copy_from_slice(&ps.to_le_bytes())
        });
        let r = open_file(&label, img, false);
        expect_state(&label, r, prev);
    }
    // 1: files from before packed DUPFIXED leaves; 2: from before named databases became
    // keys of the main database (docs/design.md, "Version history").
    for v in [0u32, 1, 2, 5, 7, u32::MAX] {
        let mut img = b.image.clone();
        for s in 0..3 {
            reseal_meta(&mut img, s, |m| {
                m[M_VERSION..M_VERSION + 4].copy_from_slice(&v.to_le_bytes())
            });
        }
        let label = format!("version {v}");
        let e = expect_err(&label, open_file(&label, img, false));
        assert!(
            matches!(e, Error::VersionMismatch { found, .. } if found == v),
            "{label}: {e:?}"
        );
    }
}

/// Random damage anywhere in the file: unsealed flips must be caught or harmless; resealed
/// garbage in a live page (a crafted file) must give errors, never a panic.
#[test]
fn random_damage() {
    let b = built();
    let l = layout(&b.image);
    let cases: u64 = std::env::var("CAIRN_HOSTILE_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let mut rng = Rng(0xDA3A6E);
    for c in 0..cases {
        let mut img = b.image.clone();
        let label;
        if c % 2 == 0 {
            let at = rng.below(img.len() as u64) as usize;
            flip(&mut img, at, rng.below(8) as u32);
            label = format!("case {c}: bit flip at byte {at}");
        } else {
            // Overwrite a few bytes of a live tree page and seal it again.
            let (pg, span, role) = l.pages[rng.below(l.pages.len() as u64) as usize];
            let base = pg as usize * PS;
            let len = span as usize * PS;
            let txnid =
                u64::from_le_bytes(img[base + H_TXNID..base + H_TXNID + 8].try_into().unwrap());
            for _ in 0..1 + rng.below(6) {
                let at = base + 24 + rng.below((len - 24) as u64) as usize;
                img[at] = rng.next() as u8;
            }
            format::seal_page(&mut img[base..base + len], pg, txnid);
            label = format!("case {c}: resealed garbage in {role:?} page {pg}");
        }
        let r = open_file(&label, img, c % 4 < 2);
        if c % 2 == 0 {
            judge(&label, r, b);
        } else if let Err(e) = r {
            assert!(support::is_file_error(&e), "{label}: {e:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The 2019 LMDB CVEs and py-lmdb 2.1's hardening patches, recreated in Cairn's format. Each
// crafts a small file with valid checksums and asserts an error where LMDB crashed.

/// Which database the last commit of a small file changes: the crafted pages must lie
/// elsewhere, so that recovery accepts the commit and the damage is met by a read.
#[derive(Clone, Copy, PartialEq)]
enum Touch {
    Main,
    Other,
}

/// A small database: `n` keys in the main database (one leaf, or a branch over leaves) and in
/// a named one, `big` overflow values; then a commit that changes only `touch`. The two older
/// commit records are erased, so a crafted file has no commit to fall back to.
fn small(n: u32, big: u32, touch: Touch) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let main = env.main_db();
    let named = w.create_db(Some("named"), DbFlags::CREATE).unwrap();
    let other = w.create_db(Some("other"), DbFlags::CREATE).unwrap();
    for i in 0..n {
        w.put(
            main,
            format!("k{i:05}").as_bytes(),
            &value(i, 40),
            PutFlags::empty(),
        )
        .unwrap();
        w.put(
            named,
            format!("n{i:05}").as_bytes(),
            b"v",
            PutFlags::empty(),
        )
        .unwrap();
    }
    for i in 0..big {
        w.put(
            main,
            format!("big{i}").as_bytes(),
            &value(i, 9000),
            PutFlags::empty(),
        )
        .unwrap();
    }
    w.put(other, b"o", b"1", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    match touch {
        Touch::Main => w.put(main, b"zzz", b"2", PutFlags::empty()).unwrap(),
        Touch::Other => w.put(other, b"o", b"2", PutFlags::empty()).unwrap(),
    }
    w.commit().unwrap();
    drop(env);
    newest_only(dir.path())
}

/// The data file in `dir` with every commit record but the newest erased: a crafted file has
/// no commit to fall back to.
fn newest_only(dir: &Path) -> Vec<u8> {
    let mut img = std::fs::read(dir.join("data.cairn")).unwrap();
    let (slot, _) = newest(&img);
    for s in (0..3).filter(|&s| s != slot) {
        img[s * SECTOR..(s + 1) * SECTOR].fill(0);
    }
    img
}

/// Edits a page of the newest commit, sealing it again. A page the last commit wrote verifies
/// as well once sealed (recovery checks its number, writer and checksum), and the older
/// commit records are erased ([`newest_only`]), so the damage is met by a read either way.
/// (The last commit of [`small`] writes the main tree's leaf that holds the named databases'
/// records, whichever database it changes.)
fn craft(img: &mut [u8], pg: u64, edit: impl FnOnce(&mut [u8])) {
    edit_page(img, pg, edit);
}

fn newest(img: &[u8]) -> (usize, Meta) {
    metas(img).into_iter().max_by_key(|(_, m)| m.txnid).unwrap()
}

/// Edits page `pg` and seals it again with its own number and writer.
fn edit_page(img: &mut [u8], pg: u64, edit: impl FnOnce(&mut [u8])) {
    let b = &mut img[pg as usize * PS..(pg as usize + 1) * PS];
    let txnid = u64::from_le_bytes(b[H_TXNID..H_TXNID + 8].try_into().unwrap());
    edit(b);
    format::seal_page(b, pg, txnid);
}

/// Edits the database record at `at` of every meta slot, sealing each again.
fn edit_record(img: &mut [u8], at: usize, edit: impl Fn(&mut DbRecord)) {
    for s in 0..3 {
        reseal_meta(img, s, |m| {
            if let Ok(mut r) = DbRecord::decode(&m[at..at + format::DB_RECORD]) {
                edit(&mut r);
                r.encode(&mut m[at..at + format::DB_RECORD]);
            }
        });
    }
}

/// The first leaf of the main database (its root when it is a leaf).
fn first_leaf(img: &[u8]) -> u64 {
    let (_, m) = newest(img);
    let mut pg = m.main.root;
    loop {
        let p = Page::new(page_of(img, pg), pg).unwrap();
        if p.is_leaf() {
            return pg;
        }
        pg = p.child(0).unwrap();
    }
}

fn node_at(b: &[u8], i: usize) -> usize {
    let s = format::SLOTS_AT + i * format::SLOT;
    u16::from_le_bytes([b[s], b[s + 1]]) as usize
}

/// A crafting step on a page image.
type PageEdit = fn(&mut [u8]);
/// A crafting step on a database record.
type RecordEdit = fn(&mut DbRecord, &Meta);

fn must_fail(label: &str, img: Vec<u8>) {
    expect_err(label, open_file(label, img, true));
}

/// Each write operation alone must fail cleanly on the crafted file.
fn writes_fail(label: &str, img: &[u8], op: fn(&mut cairn::RwTxn<'_>) -> Result<(), Error>) {
    let img = img.to_vec();
    let label = label.to_string();
    guarded(&label.clone(), move || {
        let (env, _sim) = support::open_image(&img).unwrap();
        let mut w = env.write_txn().unwrap();
        let r = op(&mut w);
        assert!(
            matches!(r, Err(Error::Corrupted { .. })),
            "{label}: write gave {r:?}"
        );
    });
}

/// CVE-2019-16224: a database record with flags no build knows.
#[test]
fn cve_2019_16224_unknown_db_flags() {
    let img0 = small(10, 0, Touch::Main);
    let mut img = img0.clone();
    edit_record(&mut img, M_MAIN, |r| r.flags = 0x8000);
    must_fail("main record flags 0x8000", img);
    // In the main tree: the named database's record.
    let mut img = img0.clone();
    let (pg, i) = named_node(&img, b"named");
    craft(&mut img, pg, |b| {
        let off = node_at(b, i);
        let klen = u16::from_le_bytes([b[off + 1], b[off + 2]]) as usize;
        let rec = off + format::NODE_HDR + klen;
        b[rec + 42] = 0x00;
        b[rec + 43] = 0x80;
    });
    must_fail("named database record flags 0x8000", img);
}

/// The leaf of the main tree and the slot that hold named database `name`'s node.
fn named_node(img: &[u8], name: &[u8]) -> (u64, usize) {
    let (_, m) = newest(img);
    let (pg, i) = find_node(img, m.main.root, name);
    let p = Page::new(page_of(img, pg), pg).unwrap();
    assert!(
        p.node(i).unwrap().is_db(),
        "{name:?} is not a named database's node"
    );
    (pg, i)
}

/// The record of named database `name`, as the main tree holds it.
fn named_record(img: &[u8], name: &[u8]) -> DbRecord {
    let (pg, i) = named_node(img, name);
    let p = Page::new(page_of(img, pg), pg).unwrap();
    DbRecord::decode(p.node(i).unwrap().val).unwrap()
}

/// The leaf and slot of `key` in the tree under `root`.
fn find_node(img: &[u8], root: u64, key: &[u8]) -> (u64, usize) {
    let mut stack = vec![root];
    while let Some(pg) = stack.pop() {
        let p = Page::new(page_of(img, pg), pg).unwrap();
        for i in 0..p.nkeys() {
            if !p.is_leaf() {
                stack.push(p.child(i).unwrap());
            } else if p.node(i).unwrap().key == key {
                return (pg, i);
            }
        }
    }
    panic!("no node {key:?} under page {root}")
}

/// A file whose databases hold values a named database's node could be made of: a 48-byte
/// value that decodes as an empty database record (all zeros) in the main database, in a
/// named one and in a DUP_SORT one, and a 47-byte value in the main database.
fn records_file(dupsort_main: bool) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let main = if dupsort_main {
        w.create_db(None, DbFlags::CREATE | DbFlags::DUP_SORT)
            .unwrap()
    } else {
        env.main_db()
    };
    for i in 0..20u32 {
        w.put(main, format!("k{i:03}").as_bytes(), b"v", PutFlags::empty())
            .unwrap();
    }
    w.put(main, b"rec", &[0u8; 48], PutFlags::empty()).unwrap();
    w.put(main, b"short", &[0u8; 47], PutFlags::empty())
        .unwrap();
    if !dupsort_main {
        let named = w.create_db(Some("named"), DbFlags::CREATE).unwrap();
        let dups = w
            .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
            .unwrap();
        for i in 0..20u32 {
            w.put(
                named,
                format!("n{i:03}").as_bytes(),
                b"v",
                PutFlags::empty(),
            )
            .unwrap();
        }
        w.put(named, b"rec", &[0u8; 48], PutFlags::empty()).unwrap();
        w.put(dups, b"rec", &[0u8; 48], PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    drop(env);
    newest_only(dir.path())
}

/// Sets the flags of node `i` of a page image.
fn set_node_flags(b: &mut [u8], i: usize, flags: u8) {
    let off = node_at(b, i);
    b[off] = flags;
}

/// Named databases' nodes (NF_DB) where they do not belong: in a named database, in a
/// DUP_SORT database, in a DUP_SORT main database; with a value that is not a record's size;
/// combined with NF_BIG. Each is an error when read (or checked), and a write that meets one
/// outside the main database reports damage, not a refused operation.
#[test]
fn named_database_nodes_out_of_place() {
    let img0 = records_file(false);
    let (_, m) = newest(&img0);
    // The pristine file reads.
    open_file("records file", img0.clone(), true).unwrap();
    let named = named_record(&img0, b"named");
    let dups = named_record(&img0, b"dups");
    // In a named database: a 48-byte value flagged as a record.
    let mut img = img0.clone();
    let (pg, i) = find_node(&img, named.root, b"rec");
    craft(&mut img, pg, |b| set_node_flags(b, i, format::NF_DB));
    must_fail("NF_DB node in a named database", img.clone());
    writes_fail("NF_DB node in a named database", &img, |w| {
        let db = w.open_db(Some("named"))?;
        w.put(db, b"rec", b"x", PutFlags::empty())
    });
    writes_fail("NF_DB node in a named database", &img, |w| {
        let db = w.open_db(Some("named"))?;
        w.delete(db, b"rec").map(|_| ())
    });
    // In a DUP_SORT database.
    let mut img = img0.clone();
    let (pg, i) = find_node(&img, dups.root, b"rec");
    craft(&mut img, pg, |b| set_node_flags(b, i, format::NF_DB));
    must_fail("NF_DB node in a DUP_SORT database", img.clone());
    writes_fail("NF_DB node in a DUP_SORT database", &img, |w| {
        let db = w.open_db(Some("dups"))?;
        w.put(db, b"rec", b"x", PutFlags::empty())
    });
    // In the main tree, over a value that is not a record's size.
    let mut img = img0.clone();
    let (pg, i) = find_node(&img, m.main.root, b"short");
    craft(&mut img, pg, |b| set_node_flags(b, i, format::NF_DB));
    must_fail("NF_DB node of 47 bytes", img);
    // Combined with another flag: a named database's node marked as an overflow value too.
    for other in [format::NF_BIG, format::NF_DUPS, format::NF_SUBTREE] {
        let mut img = img0.clone();
        let (pg, i) = named_node(&img, b"named");
        craft(&mut img, pg, |b| {
            set_node_flags(b, i, format::NF_DB | other)
        });
        must_fail(&format!("NF_DB | {other:#x}"), img);
    }
    // A DUP_SORT main database holds no named database.
    let img0 = records_file(true);
    let (_, m) = newest(&img0);
    open_file("DUP_SORT main", img0.clone(), true).unwrap();
    let mut img = img0.clone();
    let (pg, i) = find_node(&img, m.main.root, b"rec");
    craft(&mut img, pg, |b| set_node_flags(b, i, format::NF_DB));
    must_fail("NF_DB node in a DUP_SORT main database", img);
}

/// CVE-2019-16225: a page that claims to belong to a transaction that has not happened (in
/// LMDB a P_DIRTY flag on disk made the writer modify the map in place).
#[test]
fn cve_2019_16225_page_from_the_future() {
    // Enough keys that the main tree's first leaf is not the one holding the named
    // databases' records, which the last commit rewrites: recovery checks the writer of
    // every page that commit wrote.
    let img0 = small(200, 0, Touch::Other);
    let (_, m) = newest(&img0);
    let leaf = first_leaf(&img0);
    let mut img = img0.clone();
    let b = &mut img[leaf as usize * PS..(leaf as usize + 1) * PS];
    format::seal_page(b, leaf, m.txnid + 1);
    let e = expect_err("future page", open_file("future page", img.clone(), true));
    assert!(
        e.to_string().contains("after the snapshot") || e.to_string().contains("transaction"),
        "{e}"
    );
    writes_fail("future page, put", &img, |w| {
        let db = w.open_db(None)?;
        w.put(db, b"k00001", b"new", PutFlags::empty())
    });
}

/// CVE-2019-16226: a node whose value length runs far past its page (LMDB's delete then
/// moved memory out of bounds).
#[test]
fn cve_2019_16226_huge_value_length() {
    let img0 = small(10, 0, Touch::Other);
    let leaf = first_leaf(&img0);
    let mut img = img0.clone();
    craft(&mut img, leaf, |b| {
        let off = node_at(b, 3);
        b[off + 3..off + 7].copy_from_slice(&0xFFFF_0040u32.to_le_bytes());
    });
    must_fail("huge vlen", img.clone());
    writes_fail("huge vlen, delete", &img, |w| {
        let db = w.open_db(None)?;
        w.delete(db, b"k00003").map(|_| ())
    });
}

/// CVE-2019-16227: a node flagged as holding sorted duplicates in a database without them
/// (LMDB dereferenced a missing sub-cursor).
#[test]
fn cve_2019_16227_duplicate_flag_without_dupsort() {
    for flag in [format::NF_DUPS, format::NF_SUBTREE, 0x80] {
        let img0 = small(10, 0, Touch::Other);
        let leaf = first_leaf(&img0);
        let mut img = img0.clone();
        craft(&mut img, leaf, |b| {
            let off = node_at(b, 2);
            b[off] = flag;
        });
        must_fail(&format!("node flag {flag:#x}"), img);
    }
}

/// CVE-2019-16228: page size zero (LMDB divided by it).
#[test]
fn cve_2019_16228_page_size_zero() {
    let mut img = small(10, 0, Touch::Other);
    for s in 0..3 {
        reseal_meta(&mut img, s, |m| m[M_PAGE_SIZE..M_PAGE_SIZE + 4].fill(0));
    }
    must_fail("page size 0", img);
}

/// validate-page-bounds: the start of the node area (LMDB's upper) past the page, or the slot
/// array (LMDB's lower) past it.
#[test]
fn hardening_page_bounds() {
    let img0 = small(10, 0, Touch::Other);
    let leaf = first_leaf(&img0);
    for (label, at, v) in [
        ("upper past the page", H_UPPER, 70_000u32),
        ("upper inside the slots", H_UPPER, 80),
    ] {
        let mut img = img0.clone();
        craft(&mut img, leaf, |b| {
            b[at..at + 4].copy_from_slice(&v.to_le_bytes())
        });
        must_fail(label, img);
    }
    let mut img = img0.clone();
    craft(&mut img, leaf, |b| {
        b[H_NKEYS..H_NKEYS + 2].copy_from_slice(&2000u16.to_le_bytes())
    });
    must_fail("slot count past the page", img);
}

/// validate-node-read-size: a key running past the page, a node offset past it or into the
/// header.
#[test]
fn hardening_node_read_size() {
    let img0 = small(10, 0, Touch::Other);
    let leaf = first_leaf(&img0);
    let cases: [(&str, PageEdit); 4] = [
        ("key length past the page", |b| {
            let off = node_at(b, 1);
            b[off + 1..off + 3].copy_from_slice(&0xFFF0u16.to_le_bytes());
        }),
        ("node offset past the page", |b| {
            let s = format::SLOTS_AT + 4;
            b[s..s + 2].copy_from_slice(&(PS as u16 - 3).to_le_bytes());
        }),
        ("node offset in the header", |b| {
            let s = format::SLOTS_AT + 4;
            b[s..s + 2].copy_from_slice(&10u16.to_le_bytes());
        }),
        ("node offset in the free gap", |b| {
            let s = format::SLOTS_AT + 4;
            b[s..s + 2].copy_from_slice(&((format::SLOTS_AT + 200) as u16).to_le_bytes());
        }),
    ];
    for (label, f) in cases {
        let mut img = img0.clone();
        craft(&mut img, leaf, f);
        must_fail(label, img);
    }
}

/// validate-subpage-bounds and validate-xcursor-nodedsz: LMDB's sub-pages of duplicates;
/// Cairn reserves the sub-tree flag, and a sub-tree node in a plain database, whatever its
/// size, is an error.
#[test]
fn hardening_subpage_and_subtree_size() {
    let img0 = small(10, 0, Touch::Other);
    let leaf = first_leaf(&img0);
    for vlen in [0u32, 48, 4000] {
        let mut img = img0.clone();
        craft(&mut img, leaf, |b| {
            let off = node_at(b, 0);
            b[off] = format::NF_SUBTREE;
            b[off + 3..off + 7].copy_from_slice(&vlen.to_le_bytes());
        });
        must_fail(&format!("sub-tree node of {vlen} bytes"), img);
    }
}

/// validate-leaf2-keysize: LMDB's fixed-size keys; Cairn's analogue is the page prefix, whose
/// length is bounded and which every key must carry.
#[test]
fn hardening_prefix_length() {
    let img0 = small(300, 0, Touch::Other);
    let leaf = first_leaf(&img0);
    let mut img = img0.clone();
    craft(&mut img, leaf, |b| {
        b[H_PLEN..H_PLEN + 2].copy_from_slice(&33u16.to_le_bytes())
    });
    must_fail("prefix of 33 bytes", img);
    let mut img = img0.clone();
    craft(&mut img, leaf, |b| {
        // A prefix the keys do not carry.
        b[H_PLEN..H_PLEN + 2].copy_from_slice(&4u16.to_le_bytes());
        b[40..44].copy_from_slice(b"zzzz");
    });
    must_fail("prefix the keys lack", img);
}

/// guard-xcursor-null-d3d4: cursor operations reaching a node of the wrong shape; here a
/// branch node flagged as an overflow value.
#[test]
fn hardening_branch_node_flags() {
    let img0 = small(300, 0, Touch::Other);
    let (_, m) = newest(&img0);
    let mut img = img0.clone();
    craft(&mut img, m.main.root, |b| {
        assert_eq!(b[H_KIND], format::KIND_BRANCH, "root is a branch");
        let off = node_at(b, 1);
        b[off] = format::NF_BIG;
    });
    must_fail("flagged branch node", img);
}

/// validate-nodedsz-page-split, validate-node-shrink-delta, validate-nodedsz-cursor-put: a
/// node with a bad size on a page that a write then splits, shrinks in place or rewrites
/// through a cursor.
#[test]
fn hardening_writes_over_bad_nodes() {
    let img0 = small(60, 0, Touch::Other);
    let leaf = first_leaf(&img0);
    let mut img = img0.clone();
    craft(&mut img, leaf, |b| {
        let off = node_at(b, 5);
        b[off + 3..off + 7].copy_from_slice(&(PS as u32).to_le_bytes());
    });
    writes_fail("split over a bad node", &img, |w| {
        let db = w.open_db(None)?;
        for i in 0..200u32 {
            w.put(
                db,
                format!("k{i:05}x").as_bytes(),
                &[1; 200],
                PutFlags::empty(),
            )?;
        }
        Ok(())
    });
    writes_fail("shrink a bad node", &img, |w| {
        let db = w.open_db(None)?;
        w.put(db, b"k00005", b"", PutFlags::empty())
    });
    writes_fail("cursor put over a bad node", &img, |w| {
        let db = w.open_db(None)?;
        let mut c = w.cursor_mut(db)?;
        c.set_range(b"k00004")?;
        c.next()?;
        c.put_current(b"x")
    });
}

/// validate-overflow-pages: an overflow reference past the file, to page 0, to a tree page, or
/// a run whose header disagrees with the value's length.
#[test]
fn hardening_overflow_pages() {
    let img0 = small(5, 2, Touch::Other);
    let (_, m) = newest(&img0);
    let mut pages = Vec::new();
    walk(&img0, m.main.root, None, &mut pages);
    let (opg, _, _) = *pages.iter().find(|p| p.2 == Role::Overflow).unwrap();
    let leaf = first_leaf(&img0);
    let big_slot = |b: &[u8]| {
        let p = Page::new(b, leaf).unwrap();
        (0..p.nkeys())
            .find(|&i| p.node(i).unwrap().is_big())
            .unwrap()
    };
    for target in [0u64, 1 << 40, m.npages, leaf] {
        let mut img = img0.clone();
        craft(&mut img, leaf, |b| {
            let i = big_slot(b);
            let off = node_at(b, i);
            let klen = u16::from_le_bytes([b[off + 1], b[off + 2]]) as usize;
            let at = off + format::NODE_HDR + klen;
            b[at..at + 8].copy_from_slice(&target.to_le_bytes());
        });
        must_fail(&format!("overflow reference to {target}"), img);
    }
    // The run's header says 1 page where the value needs 3.
    let mut img = img0.clone();
    let base = opg as usize * PS;
    let span = u32::from_le_bytes(img[base + H_UPPER..base + H_UPPER + 4].try_into().unwrap());
    img[base + H_UPPER..base + H_UPPER + 4].copy_from_slice(&1u32.to_le_bytes());
    let txnid = u64::from_le_bytes(img[base + H_TXNID..base + H_TXNID + 8].try_into().unwrap());
    format::seal_page(&mut img[base..base + PS], opg, txnid);
    assert!(span > 1);
    must_fail("overflow header shorter than its value", img);
    // A value length longer than its run.
    let mut img = img0.clone();
    craft(&mut img, leaf, |b| {
        let i = big_slot(b);
        let off = node_at(b, i);
        b[off + 3..off + 7].copy_from_slice(&0x7fff_0000u32.to_le_bytes());
    });
    must_fail("overflow value longer than its run", img);
}

/// validate-md-depth and validate-md-root: database records whose depth or root make no sense.
#[test]
fn hardening_record_depth_and_root() {
    let img0 = small(300, 0, Touch::Other);
    let (_, m) = newest(&img0);
    let cases: [(&str, RecordEdit); 7] = [
        ("depth 200", |r, _| r.depth = 200),
        ("depth 0 with a root", |r, _| r.depth = 0),
        ("depth too small", |r, _| r.depth = 1),
        ("root on page 0", |r, _| r.root = 0),
        ("root past the snapshot", |r, m| r.root = m.npages),
        ("root far past the file", |r, _| r.root = u64::MAX / 2),
        ("root at the free tree", |r, m| r.root = m.free.root),
    ];
    for (label, f) in cases {
        let mut img = img0.clone();
        edit_record(&mut img, M_MAIN, |r| f(r, &m));
        must_fail(label, img);
    }
}

/// validate-md-pad: the record's reserved half-word must be zero and its order bits known;
/// fix-overflow-page-size-mul: an overflow page count whose byte size overflows 32 bits.
#[test]
fn hardening_record_padding_and_huge_counts() {
    let img0 = small(10, 0, Touch::Other);
    let mut img = img0.clone();
    for s in 0..3 {
        reseal_meta(&mut img, s, |m| m[M_MAIN + 46] = 1);
    }
    must_fail("record padding", img);
    let mut img = img0.clone();
    for s in 0..3 {
        reseal_meta(&mut img, s, |m| m[M_MAIN + 44] = 4);
    }
    must_fail("unknown order bit", img);
    // The main database of `small` has no DUPSORT: a value order is a contradiction.
    let mut img = img0.clone();
    for s in 0..3 {
        reseal_meta(&mut img, s, |m| m[M_MAIN + 44] = 2);
    }
    must_fail("value order without DUPSORT", img);
    let mut img = img0.clone();
    edit_record(&mut img, M_MAIN, |r| r.overflow_pages = 1 << 40);
    must_fail("overflow page count 2^40", img);
    // Version 2's catalog record: reserved since version 3, and zero.
    let mut img = img0.clone();
    for s in 0..3 {
        reseal_meta(&mut img, s, |m| m[M_RESERVED + 8] = 1);
    }
    must_fail("reserved meta bytes", img);
}

/// cursor-next-prev-uninitialized: stepping a cursor that was never positioned, or that ran
/// off either end, must not read stale state.
#[test]
fn hardening_unpositioned_cursor() {
    let img = small(50, 1, Touch::Other);
    let (env, _sim) = support::open_image(&img).unwrap();
    let r = env.read_txn().unwrap();
    let db = env.main_db();
    let mut c = r.cursor(db).unwrap();
    assert_eq!(c.current().unwrap(), None);
    let first = c.next().unwrap().unwrap().0.to_vec();
    let mut c = r.cursor(db).unwrap();
    let last = c.prev().unwrap().unwrap().0.to_vec();
    assert!(first < last);
    while c.next().unwrap().is_some() {}
    assert_eq!(c.next().unwrap().map(|e| e.0.to_vec()), Some(first.clone()));
    let mut c = r.cursor(db).unwrap();
    c.first().unwrap();
    assert_eq!(c.prev().unwrap(), None);
    assert_eq!(c.prev().unwrap().map(|e| e.0.to_vec()), Some(last));
}

/// A commit-list page with more entries than fit, and one pointing to itself.
#[test]
fn hostile_commit_list() {
    let b = built();
    let l = layout(&b.image);
    let prev = &b.history[b.history.len() - 2];
    let lp = l.meta.list_head;
    let mut img = b.image.clone();
    edit_page(&mut img, lp, |p| {
        p[H_NKEYS..H_NKEYS + 2].copy_from_slice(&u16::MAX.to_le_bytes())
    });
    expect_state("list count", open_file("list count", img, false), prev);
    let mut img = b.image.clone();
    edit_page(&mut img, lp, |p| {
        p[32..40].copy_from_slice(&lp.to_le_bytes())
    });
    expect_state("list cycle", open_file("list cycle", img, false), prev);
    let mut img = b.image.clone();
    edit_page(&mut img, lp, |p| p[H_KIND] = format::KIND_LEAF);
    expect_state("list kind", open_file("list kind", img, false), prev);
    let _ = H_FLAGS;
}

/// A branch whose two children are one page: a write through both reaches that page twice
/// and frees it twice. The commit must refuse (a page in the free set twice would later be
/// handed out twice) and leave the file as it was.
#[test]
fn a_page_referenced_twice_is_not_freed_twice() {
    let img0 = small(300, 0, Touch::Other);
    let (_, m) = newest(&img0);
    let mut img = img0.clone();
    let mut second = Vec::new();
    craft(&mut img, m.main.root, |b| {
        assert_eq!(b[H_KIND], format::KIND_BRANCH, "root is a branch");
        let child = |b: &[u8], i: usize| {
            let off = node_at(b, i);
            let klen = u16::from_le_bytes([b[off + 1], b[off + 2]]) as usize;
            off + format::NODE_HDR + klen
        };
        let (c0, c1) = (child(b, 0), child(b, 1));
        let first: [u8; 8] = b[c0..c0 + 8].try_into().unwrap();
        b[c1..c1 + 8].copy_from_slice(&first);
        // The second child's first key: a put with it descends into child 1.
        let off = node_at(b, 1);
        let klen = u16::from_le_bytes([b[off + 1], b[off + 2]]) as usize;
        second = b[off + format::NODE_HDR..off + format::NODE_HDR + klen].to_vec();
    });
    guarded("page referenced twice", move || {
        let (env, _sim) = support::open_image(&img).unwrap();
        let main = env.main_db();
        let before = env
            .read_txn()
            .unwrap()
            .get(main, b"k00000")
            .unwrap()
            .map(<[u8]>::to_vec);
        let mut w = env.write_txn().unwrap();
        w.put(main, b"k00000", b"x", PutFlags::empty()).unwrap();
        w.put(main, &second, b"y", PutFlags::empty()).unwrap();
        let r = w.commit();
        assert!(
            matches!(r, Err(Error::Corrupted { .. })),
            "commit gave {r:?}"
        );
        let r = env.read_txn().unwrap();
        assert_eq!(r.get(main, b"k00000").unwrap().map(<[u8]>::to_vec), before);
    });
}

/// A DUP_SORT | DUP_FIXED database "fixed" whose key "k" holds 2,000 8-byte values (a sub-tree
/// of packed leaves under a branch), then a commit that changes only another database; the
/// older commit records are erased (see [`small`]). Returns the image and its packed leaves.
fn packed_file() -> (Vec<u8>, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_dbs(4).open(dir.path()).unwrap();
    let mut w = env.write_txn().unwrap();
    let fixed = w
        .create_db(
            Some("fixed"),
            DbFlags::CREATE | DbFlags::DUP_SORT | DbFlags::DUP_FIXED,
        )
        .unwrap();
    let other = w.create_db(Some("other"), DbFlags::CREATE).unwrap();
    for i in 0..2000u64 {
        w.put(fixed, b"k", &(i * 3).to_be_bytes(), PutFlags::empty())
            .unwrap();
    }
    w.put(fixed, b"j", &1u64.to_be_bytes(), PutFlags::empty())
        .unwrap();
    w.put(other, b"o", b"1", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    let mut w = env.write_txn().unwrap();
    w.put(other, b"o", b"2", PutFlags::empty()).unwrap();
    w.commit().unwrap();
    drop(env);
    let img = newest_only(dir.path());
    let (_, m) = newest(&img);
    let leaves: Vec<u64> = (1..m.npages)
        .filter(|&pg| page_of(&img, pg)[H_KIND] == format::KIND_LEAF_FIXED)
        .collect();
    assert!(leaves.len() >= 4, "{} packed leaves", leaves.len());
    (img, leaves)
}

/// Opens `img` through the file system, reads database "fixed" every way (bounded: a hostile
/// tree may loop), then runs the checker; the first error, if any.
fn read_fixed(label: &str, img: Vec<u8>) -> Result<(), Error> {
    guarded(label, move || {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("data.cairn"), &img).unwrap();
        let env = Env::options().max_dbs(8).open(dir.path())?;
        let r = env.read_txn()?;
        let db = r.open_db(Some("fixed"))?;
        let bound = r.stat(db)?.entries as usize + 1;
        let mut first: Option<Error> = None;
        let mut note = |res: Result<(), Error>| {
            if let Err(e) = res {
                first.get_or_insert(e);
            }
        };
        note(
            r.iter(db)
                .and_then(|it| it.take(bound).try_for_each(|e| e.map(|_| ()))),
        );
        note(
            r.iter(db)
                .and_then(|it| it.rev().take(bound).try_for_each(|e| e.map(|_| ()))),
        );
        for k in [&b"j"[..], b"k"] {
            note(r.count(db, k).map(|_| ()));
            note(
                r.iter_dup(db, k)
                    .and_then(|it| it.take(bound).try_for_each(|e| e.map(|_| ()))),
            );
            note(
                r.iter_dup(db, k)
                    .and_then(|it| it.rev().take(bound).try_for_each(|e| e.map(|_| ()))),
            );
            note((|| {
                let mut c = r.cursor(db)?;
                c.set(k)?;
                c.get_multiple()?;
                for _ in 0..bound {
                    if c.next_multiple()?.is_none() {
                        break;
                    }
                }
                for v in [0u64, 3, 1500, 5997, 6000] {
                    c.get_both(k, &v.to_be_bytes())?;
                    c.get_both_range(k, &v.to_be_bytes())?;
                }
                Ok(())
            })());
        }
        let rep = r.check()?;
        if !rep.is_ok() {
            return Err(Error::Corrupted {
                what: rep.problems.join("; "),
            });
        }
        first.map_or(Ok(()), Err)
    })
}

fn fixed_must_fail(label: &str, img: Vec<u8>) {
    match read_fixed(label, img) {
        Ok(()) => panic!("{label}: damage went unnoticed"),
        Err(e) => assert!(support::is_file_error(&e), "{label}: {e:?}"),
    }
}

/// Packed leaves (kind 5) that lie: a value size that is not the sub-tree record's (or zero),
/// a count whose values overflow the page or that leaves the leaf empty, values out of order,
/// nonzero flags; a packed leaf where a node leaf belongs. Reads give `Corrupted` (or data the
/// checker then rejects), never a panic; with a bad header, each write into the sub-tree fails
/// cleanly.
#[test]
fn hostile_packed_leaves() {
    let (img0, leaves) = packed_file();
    read_fixed("pristine packed", img0.clone()).expect("the pristine file reads");
    // (label, edit, whether the header itself lies: every access to the leaf fails)
    let cases: [(&str, PageEdit, bool); 7] = [
        (
            "value size 4 under a record of 8",
            |b| b[H_UPPER..H_UPPER + 4].copy_from_slice(&4u32.to_le_bytes()),
            true,
        ),
        ("value size 0", |b| b[H_UPPER..H_UPPER + 4].fill(0), true),
        (
            "value size 2^32 - 1",
            |b| b[H_UPPER..H_UPPER + 4].fill(0xff),
            true,
        ),
        (
            "count past the page",
            |b| b[H_NKEYS..H_NKEYS + 2].copy_from_slice(&600u16.to_le_bytes()),
            true,
        ),
        ("count 0", |b| b[H_NKEYS..H_NKEYS + 2].fill(0), false),
        (
            "values out of order",
            |b| {
                let (a, c) = (format::PACKED_AT, format::PACKED_AT + 8);
                let first: [u8; 8] = b[a..a + 8].try_into().unwrap();
                b.copy_within(c..c + 8, a);
                b[c..c + 8].copy_from_slice(&first);
            },
            false,
        ),
        ("page flags", |b| b[H_FLAGS] = 1, true),
    ];
    for (label, edit, header) in cases {
        let mut img = img0.clone();
        for &pg in &leaves {
            craft(&mut img, pg, edit);
        }
        fixed_must_fail(label, img.clone());
        if header {
            writes_fail(label, &img, |w| {
                let db = w.open_db(Some("fixed"))?;
                w.put(db, b"k", &5u64.to_be_bytes(), PutFlags::empty())
            });
            writes_fail(label, &img, |w| {
                let db = w.open_db(Some("fixed"))?;
                w.delete_pair(db, b"k", &6u64.to_be_bytes()).map(|_| ())
            });
            writes_fail(label, &img, |w| {
                let db = w.open_db(Some("fixed"))?;
                w.delete(db, b"k").map(|_| ())
            });
        }
    }
    // A packed leaf where a node leaf belongs: the database's own (main-tree) leaf.
    let mut img = img0.clone();
    let rec = named_record(&img, b"fixed");
    assert_eq!(rec.depth, 1);
    craft(&mut img, rec.root, |b| {
        b[H_KIND] = format::KIND_LEAF_FIXED;
        b[H_FLAGS] = 0;
        b[H_UPPER..H_UPPER + 4].copy_from_slice(&8u32.to_le_bytes());
        b[H_NKEYS..H_NKEYS + 2].copy_from_slice(&1u16.to_le_bytes());
        b[H_PLEN..H_PLEN + 8].fill(0);
    });
    fixed_must_fail("packed leaf in the main tree", img);
}
