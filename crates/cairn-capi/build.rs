//! Gives the shared library LMDB's soname, so a program linked against Debian's liblmdb.so.0
//! loads this one when it comes first on LD_LIBRARY_PATH.
//!
//! On glibc 2.36 and later (whose libc.so.6 defines GLIBC_ABI_DT_RELR), the library's relative
//! relocations are packed (`-z pack-relative-relocs`, DT_RELR): 27 KB less of loaded image
//! (docs/capi.md, "Build profile"). The linker then records the GLIBC_ABI_DT_RELR dependency, so
//! an older loader refuses the library by name instead of mis-relocating it; an older glibc at
//! build time keeps the plain relocations.
use std::process::Command;

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liblmdb.so.0");
    if libc_has_relr() {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,pack-relative-relocs");
    }
    println!("cargo:rerun-if-changed=build.rs");
}

/// Whether the libc.so.6 the library links against (a native glibc build only) supports DT_RELR.
fn libc_has_relr() -> bool {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("TARGET") != var("HOST")
        || var("CARGO_CFG_TARGET_OS") != "linux"
        || var("CARGO_CFG_TARGET_ENV") != "gnu"
    {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let Ok(out) = Command::new(cc).arg("-print-file-name=libc.so.6").output() else {
        return false;
    };
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    std::fs::read(&path).is_ok_and(|b| b.windows(17).any(|w| w == b"GLIBC_ABI_DT_RELR"))
}
