//! Database handles, flags and statistics, and the key and value orders a set of flags
//! chooses.

use crate::format::{DbRecord, KeyCmp};

macro_rules! flag_set {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident = $v:expr;)* }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
        pub struct $name(u32);
        impl $name {
            $($(#[$fm])* pub const $f: $name = $name($v);)*
            /// No flag.
            pub const fn empty() -> $name { $name(0) }
            /// The raw bits (LMDB's values).
            pub const fn bits(self) -> u32 { self.0 }
            /// From raw bits, keeping unknown ones.
            pub const fn from_bits_retain(b: u32) -> $name { $name(b) }
            /// Whether every flag of `o` is set.
            pub const fn contains(self, o: $name) -> bool { self.0 & o.0 == o.0 }
            /// Whether no flag is set.
            pub const fn is_empty(self) -> bool { self.0 == 0 }
        }
        impl std::ops::BitOr for $name {
            type Output = $name;
            fn bitor(self, o: $name) -> $name { $name(self.0 | o.0) }
        }
    };
}

flag_set! {
    /// Flags of a database, with LMDB's values.
    DbFlags {
        /// Keys compared from their last byte to their first.
        REVERSE_KEY = 0x02;
        /// Sorted duplicates: a key holds a sorted set of unique values (a multimap).
        DUP_SORT = 0x04;
        /// Keys are native unsigned 32- or 64-bit integers, ordered as numbers.
        INTEGER_KEY = 0x08;
        /// With DUP_SORT: all values of a key have one size and are stored packed.
        DUP_FIXED = 0x10;
        /// With DUP_SORT: values are native unsigned 32- or 64-bit integers, ordered as numbers.
        INTEGER_DUP = 0x20;
        /// With DUP_SORT: values are compared from their last byte to their first.
        REVERSE_DUP = 0x40;
        /// Create the database if it does not exist.
        CREATE = 0x4_0000;
    }
}

impl DbFlags {
    /// The flags stored with the database (CREATE is an instruction, not a property).
    pub fn persistent(self) -> DbFlags {
        DbFlags(self.0 & (0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40))
    }
}

flag_set! {
    /// Flags of a put, with LMDB's values.
    PutFlags {
        /// Fail with `KeyExists` if the key exists.
        NO_OVERWRITE = 0x10;
        /// DUP_SORT: fail with `KeyExists` if the key/value pair exists.
        NO_DUP_DATA = 0x20;
        /// The key sorts after every key of the database: fill pages, do not split them.
        /// In a DUP_SORT database the last key itself may be given with APPEND_DUP.
        APPEND = 0x2_0000;
        /// DUP_SORT: the value sorts after every value of its key (`AppendOrder` otherwise).
        APPEND_DUP = 0x4_0000;
        /// DUP_FIXED: many fixed-size values in one call (see `RwTxn::put_multiple`).
        MULTIPLE = 0x8_0000;
    }
}

/// A handle to a database of an environment. Copy it freely; it stays valid while the
/// environment is open (using it after the database was dropped gives `BadDbi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Database {
    pub(crate) idx: u32,
    pub(crate) env_id: u64,
}

impl Database {
    /// The handle's index (LMDB's dbi).
    pub fn index(&self) -> u32 {
        self.idx
    }
}

/// Statistics of one database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Page size.
    pub page_size: u32,
    /// Levels of the tree.
    pub depth: u32,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Entries.
    pub entries: u64,
}

impl Stat {
    pub(crate) fn of(r: &DbRecord, page_size: u32) -> Stat {
        Stat {
            page_size,
            depth: u32::from(r.depth),
            branch_pages: r.branch_pages,
            leaf_pages: r.leaf_pages,
            overflow_pages: r.overflow_pages,
            entries: r.entries,
        }
    }
}

/// The key order of a database with these flags.
pub(crate) fn cmp_for(flags: DbFlags) -> KeyCmp {
    if flags.contains(DbFlags::INTEGER_KEY) {
        KeyCmp::Integer
    } else if flags.contains(DbFlags::REVERSE_KEY) {
        KeyCmp::Reverse
    } else {
        KeyCmp::Bytes
    }
}

/// The value order of a DUP_SORT database with these flags.
pub(crate) fn dup_cmp_for(flags: DbFlags) -> KeyCmp {
    if flags.contains(DbFlags::INTEGER_DUP) {
        KeyCmp::Integer
    } else if flags.contains(DbFlags::REVERSE_DUP) {
        KeyCmp::Reverse
    } else {
        KeyCmp::Bytes
    }
}
