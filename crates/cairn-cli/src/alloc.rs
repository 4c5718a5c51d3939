//! The `cairn` process's global allocator: mimalloc.
//!
//! Why: `cairn serve` answers a GET by id with a dozen small blocks allocated on the event loop
//! (the request's head and header map, the path's strings, the response, the reader hand-off)
//! and freed on the same thread; glibc's malloc and free were 15% of the server's CPU samples
//! at 1,000 connections (docs/bench/serve/README.md, "Server CPU per GET"). mimalloc's
//! thread-local free lists serve that pattern for less.
//!
//! Invariant: one global allocator per process, chosen by the binary: the libraries
//! (cairn-server among them) declare none, so a program embedding them keeps its own.

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
