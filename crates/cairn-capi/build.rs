//! Gives the shared library LMDB's soname, so a program linked against Debian's liblmdb.so.0
//! loads this one when it comes first on LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,liblmdb.so.0");
    println!("cargo:rerun-if-changed=build.rs");
}
