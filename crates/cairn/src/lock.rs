//! The lock file beside the data file: shared memory holding the published commits and the
//! reader table (layout in format/lockfile.rs, protocols in shared.rs), plus byte-range locks on it:
//!
//! - byte `LB_ALIVE`: every handle holds it shared while open; the first handle to open the
//!   environment takes it exclusive, resets the file, then downgrades. A handle that gets it
//!   exclusive knows no other handle is alive, so stale state (from crashed processes or a
//!   reboot) is discarded.
//! - byte `LB_WRITER`: the writer lock, held exclusive for a write transaction's life.
//! - byte `LB_TABLE`: held while claiming or reaping reader slots.
//! - one byte per reader slot, held by its owner while the owner lives.
//!
//! They are open-file-description locks: the kernel drops them when the holder dies (a
//! crashed writer never blocks the others), and two handles in one process do not share them
//! (closing one never drops another's locks).

use crate::error::{Error, Result};
use crate::format as f;
use crate::os::{self, LockKind, Map};
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::atomic::Ordering;

/// An open lock file, or none (an environment over simulated storage, private to a process).
pub(crate) struct LockFile {
    file: Option<File>,
    name: String,
}

/// A lock file opened and mapped.
pub(crate) struct Opened {
    pub lock: LockFile,
    pub map: Map,
    /// This handle initialised the file: no other handle was alive.
    pub first: bool,
    /// (First handle only.) The last session's header was whole when this handle took the
    /// file: its `current` word and published cells, which only `Shared::init` clears, may be
    /// read for recovery (`recover::published_whole`).
    pub previous: bool,
    /// Reader slots in the table.
    pub max_readers: usize,
}

impl LockFile {
    /// No file: locks always succeed (one process, serialised by in-process mutexes).
    pub fn none() -> LockFile {
        LockFile {
            file: None,
            name: String::new(),
        }
    }

    /// Whether there is a real file (other processes may share the environment).
    pub fn has_file(&self) -> bool {
        self.file.is_some()
    }

    /// Takes, changes or releases the lock on `byte`; false if `wait` is off and it conflicts.
    pub fn lock(&self, kind: LockKind, byte: u64, wait: bool) -> Result<bool> {
        match &self.file {
            None => Ok(true),
            Some(file) => os::ofd_lock(file, kind, byte, wait)
                .map_err(|e| Error::io(format!("locking byte {byte} of {}", self.name), e)),
        }
    }

    /// Whether another handle holds a lock on `byte`.
    pub fn locked_by_other(&self, byte: u64) -> Result<bool> {
        match &self.file {
            None => Ok(false),
            Some(file) => os::ofd_locked_by_other(file, byte)
                .map_err(|e| Error::io(format!("probing byte {byte} of {}", self.name), e)),
        }
    }

    /// Opens (creating it if allowed) and maps the lock file. Returns whether this handle is
    /// the first one alive; the caller then initialises the shared state and calls
    /// [`LockFile::joined`]. `max_readers` sizes a new table; an existing one keeps its size.
    pub fn open(path: &Path, max_readers: usize) -> Result<Opened> {
        let name = path.display().to_string();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io(format!("opening lock file {name}"), e))?;
        let lock = LockFile {
            file: Some(file),
            name,
        };
        // A handle that initialises and dies leaves a half-written file; the next one to get
        // the exclusive lock starts over, so a few rounds always suffice.
        for _ in 0..100 {
            if lock.lock(LockKind::Exclusive, f::LB_ALIVE, false)? {
                let len = f::lock_file_len(max_readers);
                let file = lock.file.as_ref().expect("real file");
                let (map, previous) = reset(file, &lock.name, len)?;
                return Ok(Opened {
                    lock,
                    map,
                    first: true,
                    previous,
                    max_readers,
                });
            }
            lock.lock(LockKind::Shared, f::LB_ALIVE, true)?;
            let file = lock.file.as_ref().expect("real file");
            let flen = file
                .metadata()
                .map_err(|e| Error::io(format!("reading the size of {}", lock.name), e))?
                .len() as usize;
            if flen >= f::LOCK_HEADER {
                let head = Map::shared_rw(file, f::LOCK_HEADER)?;
                if let Ok(max) = validate_header(&head) {
                    let len = f::lock_file_len(max);
                    if flen >= len {
                        drop(head);
                        let map = Map::shared_rw(file, len)?;
                        return Ok(Opened {
                            lock,
                            map,
                            first: false,
                            previous: false,
                            max_readers: max,
                        });
                    }
                }
            }
            // Not initialised: its initialiser died. Let go and try to become first.
            lock.lock(LockKind::Unlock, f::LB_ALIVE, false)?;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        Err(Error::LockFile(format!(
            "lock file {} stays uninitialised while other handles hold it",
            lock.name
        )))
    }

    /// For a read-only handle that cannot write the lock file: opens it read-only and holds
    /// the writer byte shared for the handle's life, so no writer can run while this handle
    /// reads without registering its snapshots (they live in private memory instead).
    pub fn open_read_only(path: &Path) -> Result<LockFile> {
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| {
            Error::io(
                format!("opening lock file {name} (read-only handles need it to exist or its directory to be writable)"),
                e,
            )
        })?;
        let lock = LockFile {
            file: Some(file),
            name,
        };
        if !lock.lock(LockKind::Shared, f::LB_WRITER, false)? {
            return Err(Error::io(
                format!(
                    "locking {}: a writer is active and this user cannot write the lock file to register as a reader",
                    lock.name
                ),
                std::io::Error::from_raw_os_error(libc::EAGAIN),
            ));
        }
        Ok(lock)
    }

    /// Downgrades the first handle's exclusive hold to a shared one, letting others in.
    pub fn joined(&self) -> Result<()> {
        self.lock(LockKind::Shared, f::LB_ALIVE, false).map(|_| ())
    }
}

/// Sizes and maps the lock file of the first handle alive, and clears its header's magic word:
/// nothing in the table is valid without a live handle. A handle that waits for `LB_ALIVE`
/// and gets it after this one died sees no valid header and starts over; `Shared::init`
/// zeroes the whole table before the magic word is set again. Returns the map and whether the
/// header was whole before (the last session's published commit is then still readable).
///
/// Not by truncating the file to zero and back (what the first handle once did): on ext4 that
/// is two journalled size changes and, at close, a flush of the file (its rule for files
/// truncated to zero), and an open waited milliseconds on them whenever the journal was busy
/// (docs/design.md, "Opening: what it costs"). Stores through the map touch no metadata but
/// the file's times.
fn reset(file: &File, name: &str, len: usize) -> Result<(Map, bool)> {
    let flen = file
        .metadata()
        .map_err(|e| Error::io(format!("reading the size of lock file {name}"), e))?
        .len();
    if flen != len as u64 {
        file.set_len(len as u64)
            .map_err(|e| Error::io(format!("sizing lock file {name}"), e))?;
    }
    let map = Map::shared_rw(file, len)?;
    let previous = validate_header(&map).is_ok();
    map.atomics()[f::LW_MAGIC].store(0, Ordering::SeqCst);
    Ok((map, previous))
}

/// Checks the header of a region initialised by another handle: magic, version, table
/// size (returned).
pub(crate) fn validate_header(map: &Map) -> Result<usize> {
    let a = map.atomics();
    if a.len() < f::LOCK_HEADER / 8 || a[f::LW_MAGIC].load(Ordering::SeqCst) != f::LOCK_MAGIC {
        return Err(Error::LockFile(
            "the lock file is not initialised (or not Cairn's)".into(),
        ));
    }
    let v = a[f::LW_VERSION].load(Ordering::Relaxed);
    if v != f::LOCK_VERSION {
        return Err(Error::LockFile(format!(
            "lock file format {v}, this build uses {}",
            f::LOCK_VERSION
        )));
    }
    let max = a[f::LW_MAX_READERS].load(Ordering::Relaxed);
    if max == 0 || max > 1 << 20 {
        return Err(Error::LockFile(format!(
            "lock file reader table of {max} slots"
        )));
    }
    Ok(max as usize)
}
