//! LMDB's lock file (`lock.mdb`, or `PATH-lock`): its reader table, read without taking
//! anything, and the test of whether any LMDB process has the environment open.
//!
//! Layout on Linux x86-64 and aarch64 (glibc, robust process-shared mutexes; docs/lmdb-format.md):
//! a 64-byte line with the magic (u32 at 0), the lock format (u32 at 4), the reader mutex
//! (40 bytes at 8), the last committed txnid (u64 at 48) and the number of reader slots ever
//! used (u32 at 56); a 64-byte line holding the writer mutex (its first word is the owner's
//! thread id while held, 0 when free); then 64-byte reader slots from offset 128: the txnid
//! read (u64 at 0, all ones when idle), the pid (u32 at 8), the thread (u64 at 16).
//!
//! Whether LMDB processes use the environment: every LMDB process that has it open holds a
//! shared `fcntl` lock on byte 0 of the lock file for as long as it is open (the first opener
//! holds it exclusively while it initialises the file), and every process with a live reader
//! holds a lock on the byte at its pid. [`EnvLock::try_acquire`] takes a write lock on the whole
//! file without waiting: it succeeds only when no LMDB process has the environment open, and
//! while it is held an LMDB process that opens the environment waits in its open.

use crate::error::{Error, Result};
use crate::format::MAGIC;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Size of the header (two cache lines) before the reader slots.
pub const READERS_AT: u64 = 128;
/// Size of one reader slot.
pub const SLOT: u64 = 64;
/// LMDB's default reader table size.
pub const DEFAULT_READERS: u32 = 126;
/// Offset of the writer mutex's lock word.
pub const WRITER_WORD: u64 = 64;
/// Most slots read from a lock file (LMDB's own limit is far below).
const MAX_SLOTS: u64 = 1 << 20;

/// The reader table size LMDB computes from a lock file's size (the default when the file is
/// missing or smaller than the default table).
pub fn max_readers(lock: &Path) -> u32 {
    let default_len = READERS_AT + u64::from(DEFAULT_READERS - 1) * SLOT + SLOT;
    match std::fs::metadata(lock) {
        Ok(m) if m.len() >= default_len => {
            (((m.len() - READERS_AT - SLOT) / SLOT + 1).min(u64::from(u32::MAX))) as u32
        }
        _ => DEFAULT_READERS,
    }
}

/// One reader slot in use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderSlot {
    /// The slot's index.
    pub slot: u32,
    /// The process that claimed it.
    pub pid: u32,
    /// The thread.
    pub thread: u64,
    /// The snapshot it reads, or None when idle.
    pub txnid: Option<u64>,
    /// Whether the process is alive now.
    pub alive: bool,
}

/// What the lock file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockInfo {
    /// Whether the header carries LMDB's magic (a file left by a crashed initialiser may not).
    pub initialised: bool,
    /// The lock format word.
    pub format: u32,
    /// Last committed txnid, as published in the lock file.
    pub txnid: u64,
    /// Reader slots ever used (LMDB's "Number of readers used").
    pub slots_used: u32,
    /// Slots with a process id.
    pub readers: Vec<ReaderSlot>,
    /// The thread id in the writer mutex's lock word, if it is held.
    pub writer_thread: Option<u32>,
}

fn alive(pid: u32) -> bool {
    pid != 0 && Path::new("/proc").join(pid.to_string()).exists()
}

/// Reads the lock file at `lock`; None when there is none.
pub fn read(lock: &Path) -> Result<Option<LockInfo>> {
    let f = match File::open(lock) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(Error::Io {
                what: format!("opening {}", lock.display()),
                source,
            })
        }
    };
    let io = |source| Error::Io {
        what: format!("reading {}", lock.display()),
        source,
    };
    let len = f.metadata().map_err(io)?.len();
    if len < READERS_AT {
        return Ok(Some(LockInfo {
            initialised: false,
            format: 0,
            txnid: 0,
            slots_used: 0,
            readers: Vec::new(),
            writer_thread: None,
        }));
    }
    let mut head = [0u8; READERS_AT as usize];
    f.read_exact_at(&mut head, 0).map_err(io)?;
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8"));
    let initialised = u32_at(&head, 0) == MAGIC;
    let used = u64::from(u32_at(&head, 56));
    let slots = used.min((len - READERS_AT) / SLOT).min(MAX_SLOTS);
    let mut readers = Vec::new();
    let mut slot = [0u8; SLOT as usize];
    for i in 0..slots {
        f.read_exact_at(&mut slot, READERS_AT + i * SLOT)
            .map_err(io)?;
        let pid = u32_at(&slot, 8);
        if pid == 0 {
            continue;
        }
        let txn = u64_at(&slot, 0);
        readers.push(ReaderSlot {
            slot: i as u32,
            pid,
            thread: u64_at(&slot, 16),
            txnid: (txn != u64::MAX).then_some(txn),
            alive: alive(pid),
        });
    }
    let w = u32_at(&head, WRITER_WORD as usize) & 0x3fff_ffff;
    Ok(Some(LockInfo {
        initialised,
        format: u32_at(&head, 4),
        txnid: u64_at(&head, 48),
        slots_used: used as u32,
        readers,
        writer_thread: (w != 0).then_some(w),
    }))
}

/// A write lock on the whole of LMDB's lock file, held until dropped: while held, no LMDB
/// process has the environment open, and any that tries waits.
#[derive(Debug)]
pub struct EnvLock {
    _file: File,
}

/// Why [`EnvLock::try_acquire`] did not get the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busy {
    /// Live processes in the reader table (possibly none: a process may have the environment
    /// open without reading).
    pub pids: Vec<u32>,
}

impl EnvLock {
    /// Takes the lock without waiting, creating an empty lock file when there is none (so
    /// that an LMDB process starting meanwhile finds it and waits). Beware: closing any other
    /// descriptor of the lock file in this process releases it (POSIX record locks).
    pub fn try_acquire(lock: &Path) -> Result<std::result::Result<EnvLock, Busy>> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(lock)
            .map_err(|source| Error::Io {
                what: format!("opening {}", lock.display()),
                source,
            })?;
        match rustix::fs::fcntl_lock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Ok(EnvLock { _file: f })),
            Err(e) if e == rustix::io::Errno::AGAIN || e == rustix::io::Errno::ACCESS => {
                let pids = read(lock)?
                    .map(|i| {
                        let mut p: Vec<u32> = i
                            .readers
                            .iter()
                            .filter(|r| r.alive)
                            .map(|r| r.pid)
                            .collect();
                        p.sort_unstable();
                        p.dedup();
                        p
                    })
                    .unwrap_or_default();
                Ok(Err(Busy { pids }))
            }
            Err(e) => Err(Error::Io {
                what: format!("locking {}", lock.display()),
                source: e.into(),
            }),
        }
    }
}
