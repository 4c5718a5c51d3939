//! The lock file beside the data file. For now it carries one open-file-description lock:
//! exclusive for a read-write open, shared for a read-only one, so a second process (or a
//! second open in this process) fails clearly instead of corrupting the file. The kernel drops
//! the lock when its holder dies, so a crash never leaves the database locked.
//! (The shared reader table moves into this file with multi-process support.)

use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// An open, locked lock file.
pub struct LockFile {
    _file: File,
}

impl LockFile {
    /// Opens (creating it if allowed) and locks the lock file.
    pub fn open(path: &Path, read_only: bool) -> Result<LockFile> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .or_else(|e| if read_only { File::open(path) } else { Err(e) })
            .map_err(|e| Error::io(format!("opening lock file {}", path.display()), e))?;
        let kind = if read_only {
            libc::F_RDLCK
        } else {
            libc::F_WRLCK
        };
        if !ofd_lock(&file, kind)? {
            return Err(Error::io(
                format!(
                    "locking {} (the database is open in another process or handle)",
                    path.display()
                ),
                std::io::Error::from_raw_os_error(libc::EBUSY),
            ));
        }
        Ok(LockFile { _file: file })
    }
}

/// Takes an OFD lock on byte 0 without waiting; false if another holder conflicts.
fn ofd_lock(file: &File, kind: libc::c_int) -> Result<bool> {
    // SAFETY: docs/safety.md §4: a zeroed plain C struct, filled field by field.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as libc::c_short;
    fl.l_whence = libc::SEEK_SET as libc::c_short;
    fl.l_start = 0;
    fl.l_len = 1;
    // SAFETY: docs/safety.md §4: fcntl on our own descriptor with a valid flock pointer.
    let r = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut fl) };
    if r == 0 {
        return Ok(true);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EAGAIN) | Some(libc::EACCES) => Ok(false),
        _ => Err(Error::io("locking the lock file", e)),
    }
}
