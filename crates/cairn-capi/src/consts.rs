//! LMDB's ABI values (flags, cursor operations, error codes) and the two functions that need
//! nothing else: `mdb_version` and `mdb_strerror`.

use std::os::raw::{c_char, c_int, c_uint};

macro_rules! consts {
    ($ty:ty: $($(#[$m:meta])* $n:ident = $v:expr;)*) => {
        $($(#[$m])* pub const $n: $ty = $v;)*
    };
}

consts! { c_uint:
    /// Env: map at a fixed address (accepted, no effect in Cairn).
    MDB_FIXEDMAP = 0x01;
    /// Env: the path is the data file, not a directory.
    MDB_NOSUBDIR = 0x4000;
    /// Env: no flush at commit (Cairn: lazy durability, flushed by mdb_env_sync and close).
    MDB_NOSYNC = 0x1_0000;
    /// Env: read-only.
    MDB_RDONLY = 0x2_0000;
    /// Env: no meta flush at commit (Cairn: lazy durability with the periodic flush).
    MDB_NOMETASYNC = 0x4_0000;
    /// Env: writable map (Cairn: accepted; values are always written by the engine).
    MDB_WRITEMAP = 0x8_0000;
    /// Env: asynchronous flushes (Cairn: as MDB_NOSYNC).
    MDB_MAPASYNC = 0x10_0000;
    /// Env: read transactions not bound to threads (Cairn's never are).
    MDB_NOTLS = 0x20_0000;
    /// Env: no locking (accepted; Cairn always shares through its lock file).
    MDB_NOLOCK = 0x40_0000;
    /// Env: no read-ahead (accepted, no effect).
    MDB_NORDAHEAD = 0x80_0000;
    /// Env: do not zero malloc'd pages (accepted, no effect).
    MDB_NOMEMINIT = 0x100_0000;
    /// DB: keys compared from their end.
    MDB_REVERSEKEY = 0x02;
    /// DB: sorted duplicates.
    MDB_DUPSORT = 0x04;
    /// DB: native unsigned integer keys.
    MDB_INTEGERKEY = 0x08;
    /// DB: fixed-size duplicates.
    MDB_DUPFIXED = 0x10;
    /// DB: native unsigned integer duplicates.
    MDB_INTEGERDUP = 0x20;
    /// DB: duplicates compared from their end.
    MDB_REVERSEDUP = 0x40;
    /// DB: create if missing.
    MDB_CREATE = 0x4_0000;
    /// Put: fail if the key exists.
    MDB_NOOVERWRITE = 0x10;
    /// Put: fail if the pair exists.
    MDB_NODUPDATA = 0x20;
    /// Cursor put: replace the item at the cursor.
    MDB_CURRENT = 0x40;
    /// Put: reserve space, return it.
    MDB_RESERVE = 0x1_0000;
    /// Put: key sorts last.
    MDB_APPEND = 0x2_0000;
    /// Put: value sorts last among its key's.
    MDB_APPENDDUP = 0x4_0000;
    /// Cursor put: many fixed-size values.
    MDB_MULTIPLE = 0x8_0000;
    /// Copy: compact.
    MDB_CP_COMPACT = 0x01;
}

consts! { c_int:
    /// Success.
    MDB_SUCCESS = 0;
    /// Key/data pair already exists.
    MDB_KEYEXIST = -30799;
    /// No matching key/data pair.
    MDB_NOTFOUND = -30798;
    /// Requested page not found.
    MDB_PAGE_NOTFOUND = -30797;
    /// Database corrupted.
    MDB_CORRUPTED = -30796;
    /// Fatal environment error.
    MDB_PANIC = -30795;
    /// File version mismatch.
    MDB_VERSION_MISMATCH = -30794;
    /// Not a database file.
    MDB_INVALID = -30793;
    /// Size limit reached.
    MDB_MAP_FULL = -30792;
    /// Too many named databases.
    MDB_DBS_FULL = -30791;
    /// Reader table full.
    MDB_READERS_FULL = -30790;
    /// Thread-local storage full.
    MDB_TLS_FULL = -30789;
    /// Transaction too big.
    MDB_TXN_FULL = -30788;
    /// Cursor stack too deep.
    MDB_CURSOR_FULL = -30787;
    /// Page has no room.
    MDB_PAGE_FULL = -30786;
    /// Map resized by another process.
    MDB_MAP_RESIZED = -30785;
    /// Incompatible operation or flags.
    MDB_INCOMPATIBLE = -30784;
    /// Invalid reader slot reuse.
    MDB_BAD_RSLOT = -30783;
    /// Transaction unusable.
    MDB_BAD_TXN = -30782;
    /// Key or value of a wrong size.
    MDB_BAD_VALSIZE = -30781;
    /// Database handle changed or invalid.
    MDB_BAD_DBI = -30780;
    /// The last LMDB code.
    MDB_LAST_ERRCODE = MDB_BAD_DBI;
}

/// LMDB's cursor operations (`MDB_cursor_op`).
pub mod op {
    #![allow(missing_docs)]
    pub const FIRST: u32 = 0;
    pub const FIRST_DUP: u32 = 1;
    pub const GET_BOTH: u32 = 2;
    pub const GET_BOTH_RANGE: u32 = 3;
    pub const GET_CURRENT: u32 = 4;
    pub const GET_MULTIPLE: u32 = 5;
    pub const LAST: u32 = 6;
    pub const LAST_DUP: u32 = 7;
    pub const NEXT: u32 = 8;
    pub const NEXT_DUP: u32 = 9;
    pub const NEXT_MULTIPLE: u32 = 10;
    pub const NEXT_NODUP: u32 = 11;
    pub const PREV: u32 = 12;
    pub const PREV_DUP: u32 = 13;
    pub const PREV_NODUP: u32 = 14;
    pub const SET: u32 = 15;
    pub const SET_KEY: u32 = 16;
    pub const SET_RANGE: u32 = 17;
    pub const PREV_MULTIPLE: u32 = 18;
}

/// The LMDB API version this library implements.
pub const VERSION: (c_int, c_int, c_int) = (0, 9, 24);

static VERSION_STRING: &[u8] = b"Cairn 0.1.0 (LMDB 0.9.24 API)\0";

/// Library version: the LMDB API level in the numbers, Cairn in the string.
#[no_mangle]
pub unsafe extern "C" fn mdb_version(
    major: *mut c_int,
    minor: *mut c_int,
    patch: *mut c_int,
) -> *mut c_char {
    // SAFETY: optional out-parameters, written only when non-NULL (docs/safety.md §7).
    unsafe {
        if !major.is_null() {
            *major = VERSION.0;
        }
        if !minor.is_null() {
            *minor = VERSION.1;
        }
        if !patch.is_null() {
            *patch = VERSION.2;
        }
    }
    VERSION_STRING.as_ptr() as *mut c_char
}

/// Our own wording of each LMDB code (NUL-terminated).
fn mdb_text(err: c_int) -> Option<&'static [u8]> {
    Some(match err {
        MDB_SUCCESS => b"Success (no error)\0",
        MDB_KEYEXIST => b"MDB_KEYEXIST: the key/data pair already exists\0",
        MDB_NOTFOUND => b"MDB_NOTFOUND: no matching key/data pair found\0",
        MDB_PAGE_NOTFOUND => b"MDB_PAGE_NOTFOUND: a requested page was not found\0",
        MDB_CORRUPTED => b"MDB_CORRUPTED: the database file is corrupted\0",
        MDB_PANIC => b"MDB_PANIC: the environment hit a fatal error and must be reopened\0",
        MDB_VERSION_MISMATCH => {
            b"MDB_VERSION_MISMATCH: the file's format version is not this library's\0"
        }
        MDB_INVALID => b"MDB_INVALID: the file is not a database this library reads (an LMDB environment is converted once with `cairn migrate DIR`)\0",
        MDB_MAP_FULL => b"MDB_MAP_FULL: the size limit set by mdb_env_set_mapsize was reached\0",
        MDB_DBS_FULL => b"MDB_DBS_FULL: more named databases than mdb_env_set_maxdbs allows\0",
        MDB_READERS_FULL => b"MDB_READERS_FULL: every reader table slot is in use\0",
        MDB_TLS_FULL => b"MDB_TLS_FULL: too many thread-local reader slots\0",
        MDB_TXN_FULL => b"MDB_TXN_FULL: the transaction has too many dirty pages\0",
        MDB_CURSOR_FULL => b"MDB_CURSOR_FULL: the cursor stack is too deep\0",
        MDB_PAGE_FULL => b"MDB_PAGE_FULL: a page has no room left\0",
        MDB_MAP_RESIZED => b"MDB_MAP_RESIZED: another process grew the map past this one's size\0",
        MDB_INCOMPATIBLE => b"MDB_INCOMPATIBLE: the operation or flags contradict the database's\0",
        MDB_BAD_RSLOT => b"MDB_BAD_RSLOT: the reader slot is not in a state that allows this\0",
        MDB_BAD_TXN => {
            b"MDB_BAD_TXN: the transaction is finished, reset, has a live child or failed\0"
        }
        MDB_BAD_VALSIZE => b"MDB_BAD_VALSIZE: a key or value has an unsupported size\0",
        MDB_BAD_DBI => b"MDB_BAD_DBI: the database handle was closed, dropped or changed\0",
        _ => return None,
    })
}

static UNKNOWN: &[u8] = b"Unknown error code\0";

/// The message of an LMDB code or an errno value; a static string.
#[no_mangle]
pub extern "C" fn mdb_strerror(err: c_int) -> *mut c_char {
    if let Some(t) = mdb_text(err) {
        return t.as_ptr() as *mut c_char;
    }
    if err > 0 {
        // SAFETY: strerror returns a static or thread-local string for any int (docs/safety.md
        // §7); LMDB's mdb_strerror has the same contract.
        return unsafe { libc::strerror(err) };
    }
    UNKNOWN.as_ptr() as *mut c_char
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_text() {
        for c in MDB_KEYEXIST..=MDB_LAST_ERRCODE {
            let t = mdb_text(c).expect("text");
            assert_eq!(t.last(), Some(&0));
        }
    }
}
