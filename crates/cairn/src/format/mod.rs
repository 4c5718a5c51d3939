//! The on-disk format: the only module that knows byte offsets. This file holds the constants
//! and integer helpers every part shares; the parts are `page` (checksums, page identity,
//! overflow runs, branch and leaf pages), `record` (database records), `meta` (commit records
//! and commit-list pages), `lockfile` (the lock file's words), `dupset` (sorted-duplicates
//! value sets), `packed` (packed leaves of DUPFIXED sub-trees), `fill` (pages filled in order
//! by a bulk load) and `search` (key orders and the search of a branch or leaf page). Everything is re-exported here: users of the format name
//! `format::X`, never a part.
//!
//! Invariants kept here (docs/design.md has the byte tables):
//! - Every integer is little-endian and goes through `get_*`/`put_*`; nothing is cast over the map.
//! - Every read of a page that came from disk is bounds-checked and turns a bad field into
//!   `Error::Corrupted`, never a panic: a hostile file can only produce errors.
//! - A branch or leaf page is a slotted page: a 72-byte header (40 bytes of fields, then up to
//!   32 bytes of the common key prefix), a slot array of 4-byte slots (u16 node offset, u16 key
//!   hint) growing up, and nodes packed down from the end of the page. Slots are in key order.
//! - On a "hinted" page (bytewise key order), every key of the page (but slot 0 of a branch,
//!   whose key is empty) starts with the stored prefix, and each slot's hint is the big-endian
//!   pair of key bytes that follow the prefix (zero-padded). Hints are monotonic in key order.

use crate::error::{Error, Result};

/// File magic: a high byte and CR LF catch text-mode mangling, as PNG's does.
pub const MAGIC: [u8; 8] = [0x89, b'C', b'A', b'I', b'R', b'N', b'\r', b'\n'];
/// Data file format version (see docs/design.md, "Version history").
pub const FORMAT_VERSION: u32 = 4;
/// The oldest version this code opens: version 3 differs from 4 in the free tree's records
/// only, which are read either way and rewritten in version 4's form at the first commit.
pub const OLDEST_READABLE_VERSION: u32 = 3;

/// Whether a commit of format `version` can be read.
pub fn readable_version(version: u32) -> bool {
    (OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version)
}
/// Unit of atomic writes assumed of the media; a meta slot is one sector.
pub const SECTOR: usize = 512;
/// Number of meta slots at the start of page 0.
pub const META_SLOTS: usize = 3;
/// Smallest and largest page sizes accepted.
pub const MIN_PAGE_SIZE: usize = 4096;
/// See [`MIN_PAGE_SIZE`].
pub const MAX_PAGE_SIZE: usize = 65536;

/// Page header: fixed fields.
pub const PAGE_FIELDS: usize = 40;
/// Room reserved for the common key prefix of a branch or leaf page.
pub const PREFIX_MAX: usize = 32;
/// Where the slot array (or a list page's entries) starts.
pub const SLOTS_AT: usize = PAGE_FIELDS + PREFIX_MAX;
/// Bytes per slot.
pub const SLOT: usize = 4;
/// Node header: flags u8, key length u16, value length u32.
pub const NODE_HDR: usize = 7;
/// Value area of a node whose value lives on overflow pages: the first page number.
pub const OVERFLOW_REF: usize = 8;
/// Largest value stored (LMDB's and libmdbx's practical limit, 2 GiB).
pub const MAX_VALUE: usize = 0x7fff_ffff;
/// Deepest tree accepted: far beyond any real tree (2 keys per page gives 2^32 entries), and
/// the bound on every descent, so a cycle in a corrupted file ends in an error.
pub const MAX_TREE_DEPTH: u16 = 32;
/// Database flags that may be stored in a record (LMDB's REVERSEKEY, DUPSORT, INTEGERKEY,
/// DUPFIXED, INTEGERDUP, REVERSEDUP).
pub const DB_RECORD_FLAGS: u16 = 0x7e;
/// The DUPSORT bit of a database record's flags.
const DB_DUPSORT: u16 = 0x04;

// Page header offsets.
const H_CHECKSUM: usize = 0;
const H_PGNO: usize = 8;
const H_TXNID: usize = 16;
const H_KIND: usize = 24;
const H_FLAGS: usize = 25;
const H_NKEYS: usize = 26;
const H_UPPER: usize = 28; // branch/leaf: start of the node area; overflow: page count
const H_PLEN: usize = 32; // branch/leaf: prefix length; list: next list page (u64)
const H_PREFIX: usize = PAGE_FIELDS;

/// Page kinds.
pub const KIND_BRANCH: u8 = 1;
/// See [`KIND_BRANCH`].
pub const KIND_LEAF: u8 = 2;
/// See [`KIND_BRANCH`].
pub const KIND_OVERFLOW: u8 = 3;
/// See [`KIND_BRANCH`].
pub const KIND_LIST: u8 = 4;

/// Page flag: prefix and hints are maintained (bytewise key order).
pub const PF_HINTED: u8 = 1;

/// Node flag: the value lives on overflow pages; the value area holds the first page number.
pub const NF_BIG: u8 = 1;
/// Node flag (DUPSORT): the value area holds a sub-tree record (see [`SUBTREE_REC`]).
pub const NF_SUBTREE: u8 = 2;
/// Node flag (DUPSORT): the value area holds an inline value set (see [`DupSet`]).
pub const NF_DUPS: u8 = 4;
/// Node flag (main database only): the key is a named database's name and the value area its
/// [`DbRecord`] (LMDB's F_SUBDATA), exactly [`DB_RECORD`] bytes, inline, never with another
/// flag. Such a node lives only in a leaf of the main tree; a put or delete of its key through
/// the main database is refused (`Error::Incompatible`).
pub const NF_DB: u8 = 8;

// One bounds check per field (a slice of its width), not one per byte.
#[inline(always)]
fn get_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_le_bytes(a)
}
#[inline(always)]
fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}
#[inline(always)]
fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}
#[inline]
fn put_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}
#[inline]
fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
#[inline]
fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Reads a little-endian u64 from an 8-byte value area (page numbers, integers in records).
pub fn decode_u64(b: &[u8]) -> Result<u64> {
    if b.len() != 8 {
        return Err(Error::corrupted(format!(
            "expected an 8-byte field, found {} bytes",
            b.len()
        )));
    }
    Ok(get_u64(b, 0))
}

/// Encodes a u64 little-endian.
pub fn encode_u64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Whether `n` is an accepted page size.
pub fn valid_page_size(n: usize) -> bool {
    n.is_power_of_two() && (MIN_PAGE_SIZE..=MAX_PAGE_SIZE).contains(&n)
}

/// Largest node (slot excluded) a page of `page_size` holds while still fitting two of them.
pub fn node_max(page_size: usize) -> usize {
    (page_size - SLOTS_AT) / 2 - SLOT
}

/// Largest key for a page size, one limit for every kind of database (as LMDB's
/// mdb_env_get_maxkeysize): a node holding it and the largest thing a leaf node refers to
/// instead of a value (a DUPSORT sub-tree record, larger than an overflow reference or a
/// branch's child number) must fit twice on a page.
pub fn max_key_size(page_size: usize) -> usize {
    node_max(page_size) - NODE_HDR - OVERFLOW_REF.max(DB_RECORD)
}

/// Bytes of a node on a page.
#[inline]
pub fn node_size(klen: usize, stored_vlen: usize) -> usize {
    NODE_HDR + klen + stored_vlen
}

/// Pages needed by an overflow value.
pub fn overflow_pages(page_size: usize, vlen: usize) -> u64 {
    (PAGE_FIELDS + vlen).div_ceil(page_size) as u64
}

/// Whether a leaf value is stored inline (else on overflow pages).
pub fn value_inline(page_size: usize, klen: usize, vlen: usize) -> bool {
    node_size(klen, vlen) <= node_max(page_size)
}

// ---------------------------------------------------------------------------------------------
// The sections of the format, each in its own file.

mod fill;
mod freerec;
mod lockfile;
mod meta;
mod page;
mod record;
pub use freerec::*;
pub use lockfile::*;
pub use meta::*;
pub use page::*;
pub use record::*;

// ---------------------------------------------------------------------------------------------
// Sorted duplicates (DUPSORT): inline value sets and sub-tree records, in `format/dupset.rs`.

mod dupset;
pub use dupset::{
    dups_node_max, dupset_insert, dupset_remove, dupset_size, DupSet, DupSetBuilder, DUPSET_HDR,
    SUBTREE_REC,
};

// Packed leaves of DUPFIXED sub-trees (kind 5), in `format/packed.rs`.
mod search;
pub use search::{cmp_bytes, hint_of, CmpFn, KeyCmp};

mod packed;
pub use packed::{
    is_packed, packed_capacity, Leaf, PackedLeaf, PackedLeafMut, KIND_LEAF_FIXED, PACKED_AT,
};

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn leaf(ps: usize) -> Vec<u8> {
        let mut b = vec![0u8; ps];
        PageMut::init(&mut b, KIND_LEAF, true);
        b
    }

    pub(super) fn node_in<'a>(key: &'a [u8], val: &'a [u8]) -> NodeIn<'a> {
        NodeIn {
            flags: 0,
            key,
            val,
            vlen: val.len() as u32,
        }
    }

    pub(super) fn contents(b: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let p = Page::new(b, 1).unwrap();
        (0..p.nkeys())
            .map(|i| {
                let n = p.node(i).unwrap();
                (n.key.to_vec(), n.val.to_vec())
            })
            .collect()
    }

    /// Scattered dead space is compacted in place: after removals and growing replacements
    /// the nodes, their order and the byte count are what a fresh page would hold.
    #[test]
    fn compaction_and_replace_keep_every_node() {
        let mut b = leaf(4096);
        let mut want = Vec::new();
        for i in 0..60u32 {
            let k = format!("key{i:04}").into_bytes();
            let v = vec![i as u8; (i as usize * 7) % 50];
            assert!(PageMut::new(&mut b)
                .insert(i as usize, &node_in(&k, &v))
                .unwrap());
            want.push((k, v));
        }
        // Every third node removed: dead space between live nodes.
        for i in (0..60).rev().filter(|i| i % 3 == 0) {
            PageMut::new(&mut b).remove(i);
            want.remove(i);
        }
        // Grow nodes until one no longer fits; each growth needs compaction at some point.
        let mut grown = 0;
        for round in 0..40 {
            for i in 0..want.len() {
                let v = vec![round as u8; want[i].1.len() + 5];
                let k = want[i].0.clone();
                if PageMut::new(&mut b).replace(i, &node_in(&k, &v)).unwrap() {
                    want[i].1 = v;
                    grown += 1;
                } else {
                    // Refused: the page is untouched.
                    assert_eq!(contents(&b), want);
                }
            }
        }
        assert!(grown > 40);
        assert_eq!(contents(&b), want);
        let p = Page::new(&b, 1).unwrap();
        let live: usize = want
            .iter()
            .map(|(k, v)| SLOT + NODE_HDR + k.len() + v.len())
            .sum();
        assert_eq!(p.used_bytes().unwrap(), SLOTS_AT + live);
        PageMut::new(&mut b).compact().unwrap();
        assert_eq!(contents(&b), want);
        assert_eq!(PageMut::new(&mut b).gap(), 4096 - SLOTS_AT - live);
        // Shrinking replacements stay in place.
        let k = want[0].0.clone();
        assert!(PageMut::new(&mut b).replace(0, &node_in(&k, b"")).unwrap());
        want[0].1.clear();
        assert_eq!(contents(&b), want);
    }

    /// The checksum is XXH3-64 with seed 0 whichever implementation and SIMD path computes
    /// it: files written by earlier builds (xxhash-rust) must keep verifying.
    #[test]
    fn checksum_is_standard_xxh3() {
        assert_eq!(xxh3_64(b""), 0x2D06_8005_38D3_94C2);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let data: Vec<u8> = (0..if cfg!(miri) { 4_100 } else { 70_000 })
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        // Every length class of XXH3 (0-16, 17-128, 129-240, long) and page sizes; under miri
        // (which interprets every SIMD instruction) one length per class.
        let lens: Vec<usize> = if cfg!(miri) {
            vec![0, 5, 16, 100, 200, 4088]
        } else {
            (0..300)
                .chain([512, 1000, 4096, 4088, 8192, 16_384, 65_536])
                .collect()
        };
        for len in lens {
            for off in [0, 1, 7] {
                let b = &data[off..off + len];
                assert_eq!(
                    xxh3_64(b),
                    xxhash_rust::xxh3::xxh3_64(b),
                    "len {len} off {off}"
                );
            }
        }
    }

    #[test]
    fn meta_round_trip_and_damage() {
        let m = Meta {
            version: FORMAT_VERSION,
            page_size: 4096,
            txnid: 7,
            flags: MF_STEADY,
            npages: 10,
            last_steady: 7,
            run_count: 1,
            list_head: 0,
            main: DbRecord {
                root: 3,
                entries: 2,
                leaf_pages: 1,
                depth: 1,
                ..Default::default()
            },
            free: DbRecord::default(),
            inline_runs: vec![WrittenRun {
                start: 3,
                len: 1,
                txnid: 7,
            }],
            boot_id: [9; BOOT_ID],
        };
        let mut b = m.encode();
        match Meta::decode(&b) {
            MetaSlot::Valid(d) => assert_eq!(d, m),
            other => panic!("{other:?}"),
        }
        b[100] ^= 1;
        assert!(matches!(Meta::decode(&b), MetaSlot::Damaged(_)));
        assert!(matches!(Meta::decode(&[0u8; SECTOR]), MetaSlot::Foreign));
    }

    #[test]
    fn page_seal_verify() {
        let mut b = leaf(4096);
        seal_page(&mut b, 5, 9);
        verify_page(&b, 5, Some(9)).unwrap();
        assert!(verify_page(&b, 6, Some(9)).is_err());
        assert!(verify_page(&b, 5, Some(8)).is_err());
        b[2000] ^= 0x10;
        assert!(verify_page(&b, 5, None).is_err());
    }

    #[test]
    fn hostile_headers_are_errors() {
        let mut b = leaf(4096);
        put_u16(&mut b, H_NKEYS, 5000);
        assert!(Page::new(&b, 1).is_err());
        let mut b = leaf(4096);
        put_u16(&mut b, H_NKEYS, 1);
        put_u32(&mut b, H_UPPER, 4000);
        put_u16(&mut b, SLOTS_AT, 4094);
        let p = Page::new(&b, 1).unwrap();
        assert!(p.node(0).is_err());
    }
}
