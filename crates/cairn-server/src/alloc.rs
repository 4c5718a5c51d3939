//! The process's global allocator: mimalloc (feature `mimalloc`, on by default).
//!
//! Why: a GET by id allocates a dozen small blocks on the event loop (the request's head and
//! header map, the path's strings, the response, the reader hand-off) and frees them on the
//! same thread; glibc's malloc and free were 15% of `cairn serve`'s CPU samples at 1,000
//! connections (docs/bench/serve/README.md, "Server CPU per GET"). mimalloc's thread-local
//! free lists serve that pattern for less.
//!
//! Invariant: a global allocator is one per process. Declaring it here makes it the allocator
//! of every binary that links this crate (the `cairn` CLI, the tests); a binary that needs
//! its own builds this crate with `default-features = false`.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
