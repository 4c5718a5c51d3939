//! Build script of the harness.
//!
//! 1. Links RocksDB's C API from the system library when the `rocksdb` feature is on. Building
//!    RocksDB's C++ from source takes the better part of an hour on a small machine, so the
//!    harness binds the C API itself (`src/engines/rocksdb.rs`) and links the distribution's
//!    shared library (Debian/Ubuntu: `apt-get install librocksdb-dev`). `ROCKSDB_LIB_DIR` adds a
//!    search directory; `ROCKSDB_INCLUDE_DIR` says where `rocksdb/version.h` is.
//! 2. Exports the versions of the Rust-side engines (from the workspace's Cargo.lock) and of the
//!    system RocksDB (from its version.h) so the report can name them.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    println!("cargo:rerun-if-env-changed=ROCKSDB_INCLUDE_DIR");

    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let lock = manifest.join("../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let lock = std::fs::read_to_string(&lock).unwrap_or_default();
    for (krate, var) in [
        ("redb", "BENCH_REDB_VERSION"),
        ("cairn", "BENCH_CAIRN_VERSION"),
        ("lmdb-master-sys", "BENCH_LMDB_SYS_VERSION"),
        ("mdbx-sys", "BENCH_MDBX_SYS_VERSION"),
        ("rusqlite", "BENCH_RUSQLITE_VERSION"),
    ] {
        let version = locked_version(&lock, krate).unwrap_or_else(|| "unknown".into());
        println!("cargo:rustc-env={var}={version}");
    }

    if std::env::var_os("CARGO_FEATURE_ROCKSDB").is_some() {
        if let Some(dir) = std::env::var_os("ROCKSDB_LIB_DIR") {
            println!("cargo:rustc-link-search=native={}", dir.to_string_lossy());
        }
        println!("cargo:rustc-link-lib=dylib=rocksdb");
        let include = std::env::var_os("ROCKSDB_INCLUDE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/usr/include"));
        let version = rocksdb_version(&include).unwrap_or_else(|| "unknown".into());
        println!("cargo:rustc-env=BENCH_ROCKSDB_HEADER_VERSION={version}");
    }
}

/// The version of `krate` in a Cargo.lock, read line by line.
fn locked_version(lock: &str, krate: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == format!("name = \"{krate}\"") {
            let next = lines.next()?.trim();
            let version = next.strip_prefix("version = \"")?.strip_suffix('"')?;
            return Some(version.to_string());
        }
    }
    None
}

/// `major.minor.patch` from `rocksdb/version.h`.
fn rocksdb_version(include: &Path) -> Option<String> {
    let header = std::fs::read_to_string(include.join("rocksdb/version.h")).ok()?;
    let find = |name: &str| {
        header.lines().find_map(|l| {
            let rest = l.trim().strip_prefix("#define")?.trim();
            let value = rest.strip_prefix(name)?.trim();
            value.parse::<u32>().ok()
        })
    };
    Some(format!(
        "{}.{}.{}",
        find("ROCKSDB_MAJOR")?,
        find("ROCKSDB_MINOR")?,
        find("ROCKSDB_PATCH")?
    ))
}
