//! Page sizes other than this machine's 4 KiB (LMDB takes the OS page size for new files and
//! reads any size an existing file records: 16 KiB and 64 KiB files come from aarch64 and
//! POWER machines). Files made by tests/support/build.rs, read back by the reader and, when
//! Debian's mdb_dump is installed, checked against LMDB's own reading of them.

#[path = "support/build.rs"]
mod build;

use cairn_lmdb::LmdbEnv;
use std::process::Command;

fn pairs(n: usize, psize: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut seed = 0x1234_5678_9abc_def0u64 ^ psize as u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    (0..n)
        .map(|i| {
            let len = if i % 97 == 5 {
                psize * 2 + (rnd() % 5000) as usize
            } else {
                (rnd() % 200) as usize
            };
            let v: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
            (format!("key{i:07}").into_bytes(), v)
        })
        .collect()
}

#[test]
fn every_page_size_reads_whole() {
    for psize in [4096usize, 8192, 16384, 32768, 65536] {
        let want = pairs(if psize == 4096 { 1500 } else { 4000 }, psize);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("data.mdb"), build::lmdb_file(psize, &want)).unwrap();
        let env = LmdbEnv::open(dir.path(), None).unwrap();
        assert_eq!(env.page_size(), psize);
        let mut got = Vec::new();
        let mut p = env.main_pairs();
        while let Some((k, v)) = p.next().unwrap() {
            got.push((k.to_vec(), v.to_vec()));
        }
        assert!(got == want, "page size {psize}: pairs differ");
        assert!(env.main_db().overflow_pages > 0 && env.main_db().depth == 2);
        // LMDB itself reads the same file the same way.
        if let Ok(o) = Command::new("mdb_dump").arg(dir.path()).output() {
            assert!(
                o.status.success(),
                "mdb_dump, page size {psize}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let text = String::from_utf8(o.stdout).unwrap();
            let lines: Vec<&str> = text
                .lines()
                .skip_while(|l| *l != "HEADER=END")
                .skip(1)
                .take_while(|l| *l != "DATA=END")
                .collect();
            assert_eq!(lines.len(), want.len() * 2, "page size {psize}");
            let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
            for (i, (k, v)) in want.iter().enumerate() {
                assert_eq!(lines[2 * i], format!(" {}", hex(k)));
                assert_eq!(lines[2 * i + 1], format!(" {}", hex(v)));
            }
            assert!(text.contains(&format!("db_pagesize={psize}\n")));
        } else {
            eprintln!("WARNING: mdb_dump missing (make lmdb-utils): page sizes checked against the input only");
        }
    }
}
