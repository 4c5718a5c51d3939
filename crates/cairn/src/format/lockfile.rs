//! The lock file's layout (docs/design.md, "Lock file").

use super::*;

// ---------------------------------------------------------------------------------------------
// The lock file (docs/design.md, "Lock file"). Shared memory, not durable: it is rebuilt by the
// first process that opens the environment. Everything in it is a native-endian 64-bit word
// accessed atomically, so offsets are given in words.

/// Magic word of a lock file ("CAIRNLK" + version byte).
pub const LOCK_MAGIC: u64 = u64::from_le_bytes(*b"CAIRNLK\x01");
/// Lock-file format version (2: the slots-used word).
pub const LOCK_VERSION: u64 = 2;
/// Word: magic, written last by the initialising process.
pub const LW_MAGIC: usize = 0;
/// Word: format version.
pub const LW_VERSION: usize = 1;
/// Word: reader slots in the table.
pub const LW_MAX_READERS: usize = 2;
/// Word: txnid of the current (latest published) commit.
pub const LW_CURRENT: usize = 3;
/// Word: txnid of a commit being written now (0 when none); left set by a writer that died.
pub const LW_INFLIGHT: usize = 4;
/// Word: page size of the data file.
pub const LW_PAGE_SIZE: usize = 5;
/// Word: one past the highest reader slot claimed since the file was reset (only grows): scans
/// for snapshots stop there instead of reading the whole table.
pub const LW_SLOTS_USED: usize = 6;
/// Words: three published commit records, each a sequence word and a sector of meta.
pub const LW_CELLS: usize = 8;
/// Words per published commit record.
pub const LW_CELL_WORDS: usize = 1 + SECTOR / 8;
/// Bytes before the first reader slot.
pub const LOCK_HEADER: usize = 4096;
/// Bytes per reader slot: one cache line.
pub const LOCK_SLOT: usize = 64;
/// Slot word: snapshot txnid, 0 when idle.
pub const LS_TXNID: usize = 0;
/// Slot word: owner (pid << 32 | handle tag), 0 when free.
pub const LS_OWNER: usize = 1;
/// Slot word: thread id of the last reader.
pub const LS_TID: usize = 2;
/// Byte locked (shared) by every process using the file; exclusive by the initialiser.
pub const LB_ALIVE: u64 = 0;
/// Byte locked exclusively by the writer.
pub const LB_WRITER: u64 = 1;
/// Byte locked exclusively while claiming or reaping reader slots.
pub const LB_TABLE: u64 = 2;
const _: () = assert!(LW_SLOTS_USED < LW_CELLS);
const _: () = assert!(LW_CELLS + 3 * LW_CELL_WORDS <= LOCK_HEADER / 8);

/// Byte locked by the owner of reader slot `i` while it lives (released by the kernel when
/// it dies, which is how a dead reader is told from a live one, whatever its pid).
pub fn lock_slot_byte(i: usize) -> u64 {
    (LOCK_HEADER + i * LOCK_SLOT) as u64
}

/// Size of a lock file with `max_readers` slots.
pub fn lock_file_len(max_readers: usize) -> usize {
    LOCK_HEADER + max_readers * LOCK_SLOT
}

/// Word index of word `w` of reader slot `i`.
pub fn lock_slot_word(i: usize, w: usize) -> usize {
    (LOCK_HEADER + i * LOCK_SLOT) / 8 + w
}
