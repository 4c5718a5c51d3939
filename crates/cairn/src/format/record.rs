//! Database records (48 bytes): the root and counters of one B+tree, stored in the meta, in
//! the main tree's leaves (a named database's node) and in the leaves holding a
//! sorted-duplicates sub-tree.

use super::*;

// ---------------------------------------------------------------------------------------------
// Database records (48 bytes): the root and counters of one B+tree.

/// Size of an encoded [`DbRecord`].
pub const DB_RECORD: usize = 48;

/// The root and counters of one B+tree, as stored in the meta or in a named database's node.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DbRecord {
    /// Root page, 0 for an empty tree (page 0 is never a tree page).
    pub root: u64,
    /// Number of entries.
    pub entries: u64,
    /// Branch pages.
    pub branch_pages: u64,
    /// Leaf pages.
    pub leaf_pages: u64,
    /// Overflow pages.
    pub overflow_pages: u64,
    /// Levels: 0 for an empty tree, 1 for a lone leaf.
    pub depth: u16,
    /// Database flags (DbFlags bits).
    pub flags: u16,
    /// Which of the database's orders are user-supplied ([`ORDER_CUSTOM_KEYS`],
    /// [`ORDER_CUSTOM_VALUES`]), as the handle that last wrote the database had them. The
    /// functions are not stored; the bits tell a process without them (the checker, a
    /// compacting copy) that the flags' order does not apply.
    pub order: u16,
}

/// [`DbRecord::order`]: the keys are in a user-supplied order (`Env::set_key_order`).
pub const ORDER_CUSTOM_KEYS: u16 = 0x1;
/// [`DbRecord::order`]: a DUPSORT database's values are in a user-supplied order
/// (`Env::set_dup_order`).
pub const ORDER_CUSTOM_VALUES: u16 = 0x2;

impl DbRecord {
    /// Encodes into 48 bytes.
    pub fn encode(&self, b: &mut [u8]) {
        put_u64(b, 0, self.root);
        put_u64(b, 8, self.entries);
        put_u64(b, 16, self.branch_pages);
        put_u64(b, 24, self.leaf_pages);
        put_u64(b, 32, self.overflow_pages);
        put_u16(b, 40, self.depth);
        put_u16(b, 42, self.flags);
        put_u16(b, 44, self.order);
        put_u16(b, 46, 0);
    }

    /// Decodes 48 bytes and checks that the fields agree with one another: known flags and
    /// order bits (values only with DUPSORT), a zero reserved half-word, a depth within [`MAX_TREE_DEPTH`], and an empty tree exactly when the
    /// root is 0. Whether the root and counts fit the snapshot is checked by the meta (for its
    /// own records) and by every descent.
    pub fn decode(b: &[u8]) -> Result<DbRecord> {
        if b.len() != DB_RECORD {
            return Err(Error::corrupted(format!(
                "database record of {} bytes",
                b.len()
            )));
        }
        let r = DbRecord {
            root: get_u64(b, 0),
            entries: get_u64(b, 8),
            branch_pages: get_u64(b, 16),
            leaf_pages: get_u64(b, 24),
            overflow_pages: get_u64(b, 32),
            depth: get_u16(b, 40),
            flags: get_u16(b, 42),
            order: get_u16(b, 44),
        };
        let bad = |what: &str| Err(Error::corrupted(format!("database record: {what}")));
        if r.flags & !DB_RECORD_FLAGS != 0 {
            return bad(&format!("unknown flags {:#x}", r.flags));
        }
        if r.order & !(ORDER_CUSTOM_KEYS | ORDER_CUSTOM_VALUES) != 0 {
            return bad(&format!("unknown order bits {:#x}", r.order));
        }
        if r.order & ORDER_CUSTOM_VALUES != 0 && r.flags & DB_DUPSORT == 0 {
            return bad("a value order without DUPSORT");
        }
        if get_u16(b, 46) != 0 {
            return bad("reserved half-word is not zero");
        }
        if r.depth > MAX_TREE_DEPTH {
            return bad(&format!("depth {}", r.depth));
        }
        let pages = r.branch_pages.checked_add(r.leaf_pages);
        let shape_ok = if r.root == 0 {
            r.depth == 0 && r.entries == 0 && pages == Some(0) && r.overflow_pages == 0
        } else {
            // A DUPSORT record's page counts include its sub-trees' pages, so a one-leaf
            // main tree may count branch pages of its sub-trees.
            let dupsort = r.flags & DB_DUPSORT != 0;
            r.depth >= 1
                && r.leaf_pages >= 1
                && (r.depth == 1 || r.branch_pages > 0)
                && (dupsort || r.depth > 1 || r.branch_pages == 0)
                && pages.is_some_and(|p| p >= u64::from(r.depth))
        };
        if !shape_ok {
            return bad(&format!(
                "root {} with depth {}, {} entries, {}+{}+{} pages",
                r.root, r.depth, r.entries, r.branch_pages, r.leaf_pages, r.overflow_pages
            ));
        }
        Ok(r)
    }

    /// Decodes the record of a sorted-duplicates sub-tree (an NF_SUBTREE node's value area):
    /// checked as any record, but its `flags` field holds the DUPFIXED value size, and the
    /// tree is never empty, has no overflow pages and no order bits (the database's cover it).
    pub fn decode_sub(b: &[u8]) -> Result<DbRecord> {
        let mut plain = [0u8; DB_RECORD];
        if b.len() != DB_RECORD {
            return Err(Error::corrupted(format!(
                "sub-tree record of {} bytes",
                b.len()
            )));
        }
        plain.copy_from_slice(b);
        put_u16(&mut plain, 42, 0);
        let mut r = DbRecord::decode(&plain)?;
        if r.root == 0 || r.overflow_pages != 0 || r.order != 0 {
            return Err(Error::corrupted(
                "sub-tree record: empty, with overflow pages, or with order bits",
            ));
        }
        r.flags = get_u16(b, 42);
        Ok(r)
    }

    /// Whether every page the record counts, and its root, lie below `npages`.
    pub fn fits(&self, npages: u64) -> bool {
        self.root < npages
            && [self.branch_pages, self.leaf_pages, self.overflow_pages]
                .iter()
                .try_fold(0u64, |a, &c| a.checked_add(c))
                .is_some_and(|total| total < npages)
    }

    /// Encoded form.
    pub fn to_bytes(&self) -> [u8; DB_RECORD] {
        let mut b = [0u8; DB_RECORD];
        self.encode(&mut b);
        b
    }
}
