//! Real LMDB as the tests' oracle: a Python with the `lmdb` module and tests/gen_lmdb.py,
//! which writes an environment of a named kind from a seed. Shared by this crate's tests and
//! crates/cairn-cli/tests/lmdb_env.rs (included by path).

use std::path::{Path, PathBuf};
use std::process::Command;

/// This crate's directory (where gen_lmdb.py lives), whoever includes the file.
const CRATE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../cairn-lmdb");

/// A Python with the `lmdb` module: $CAIRN_LMDB_PYTHON, the repository's .venv (`make
/// py-venv`), or the system's (Debian's python3-lmdb); a warning naming `skipped` when none.
pub fn need_python(skipped: &str) -> Option<PathBuf> {
    let root = Path::new(CRATE_DIR).join("../..");
    let mut c: Vec<PathBuf> = std::env::var_os("CAIRN_LMDB_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    c.push(root.join(".venv/bin/python"));
    c.push(PathBuf::from("/usr/bin/python3"));
    let p = c.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import lmdb"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if p.is_none() {
        eprintln!(
            "WARNING: no Python with the lmdb module (make py-venv, or apt-get install \
             python3-lmdb): {skipped} skipped"
        );
    }
    p
}

/// A new environment of `kind` written by real LMDB from `seed` (tests/gen_lmdb.py).
pub fn gen(py: &Path, kind: &str, seed: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let script = Path::new(CRATE_DIR).join("tests/gen_lmdb.py");
    let o = Command::new(py)
        .arg(&script)
        .arg(dir.path())
        .arg(seed.to_string())
        .arg(kind)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "gen_lmdb.py {kind}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    dir
}
