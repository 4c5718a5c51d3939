//! Named databases as keys of the main database (LMDB's layout): each named database is a
//! leaf node of the main tree whose key is its name and whose value area is its 48-byte
//! record, flagged [`format::NF_DB`] (LMDB's F_SUBDATA). Iterating the main database lists the
//! names among the user's keys, in the main database's key order, and its record counts them.
//!
//! Invariants (docs/design.md, "Named databases"):
//! - An NF_DB node lives only in a leaf of the main tree, never with another node flag, and
//!   its value is exactly one database record (`format::Page::node` checks the last two; the
//!   checker and every reader that interprets values check the first).
//! - A main database that is DUP_SORT or INTEGER_KEY holds no named database (LMDB's rule).
//! - A write transaction keeps the records of the databases it uses in `RwTxn::dbs`; the
//!   main tree's copy of a record is brought up to date at commit (`RwTxn::save_catalog`),
//!   while creating and deleting a named database change the main tree at once.

use crate::btree::{self, cursor::Position, PageSource, PageWriter, Path};
use crate::db::DbFlags;
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp};

/// What the main database holds under a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Named {
    /// A named database, with its record as the main tree stores it.
    Db(DbRecord),
    /// A plain key of the main database (opening it as a database is refused).
    Plain,
    /// Nothing.
    Absent,
}

/// Whether a main database with record flags `main_flags` may hold named databases: not when
/// it is DUP_SORT or INTEGER_KEY (LMDB's rule: a name is a byte string, and a DUP_SORT key
/// holds values, not one record).
pub(crate) fn main_allows_named(main_flags: u16) -> bool {
    let f = DbFlags::from_bits_retain(u32::from(main_flags));
    !f.contains(DbFlags::DUP_SORT) && !f.contains(DbFlags::INTEGER_KEY)
}

/// Whether a handle whose main-database order is `cmp` can search the main tree `main`: not
/// when the record says its keys are in a user-supplied order and the handle has none (a
/// file written by a program with its own comparator). Such a tree is scanned instead.
fn searchable(main: &DbRecord, cmp: &KeyCmp) -> bool {
    main.order & format::ORDER_CUSTOM_KEYS == 0 || matches!(cmp, KeyCmp::Custom(_))
}

/// Where `name` is in the main tree: the branches passed (each with the slot taken), the
/// leaf and the slot; None when absent. Found by a search in the order `cmp`, or, when
/// the handle lacks the tree's order, by a walk of its keys in the order they are stored
/// (bounded by its entry count).
pub(crate) fn find<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
    cmp: &KeyCmp,
    name: &[u8],
) -> Result<Option<(Path, u64, usize)>> {
    if !main_allows_named(main.flags) || main.root == 0 {
        return Ok(None);
    }
    if searchable(main, cmp) {
        let mut path = Path::default();
        return Ok(
            match btree::search::find_leaf_path(src, main, cmp, name, Some(&mut path))? {
                Some((pg, _, i, true)) => Some((path, pg, i)),
                _ => None,
            },
        );
    }
    let mut found = None;
    walk(src, main, |pos, pg, i| {
        if btree::tree_page(src, pg)?.key(i)? != name {
            return Ok(true);
        }
        let mut path = pos.path().clone();
        path.pop();
        found = Some((path, pg, i));
        Ok(false)
    })?;
    Ok(found)
}

/// Walks the leaves of the main tree `main` in the order its keys are stored, calling `f` with
/// the position, leaf and slot of each key until it returns false; bounded by the entry
/// count (a crafted tree that shares pages ends in an error).
fn walk<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
    mut f: impl FnMut(&Position, u64, usize) -> Result<bool>,
) -> Result<()> {
    let mut pos = Position::new();
    let mut more = pos.first(src, main)?;
    let mut steps = 0u64;
    while more {
        steps += 1;
        if steps > main.entries {
            return Err(Error::corrupted(format!(
                "main database holds more keys than its {} entries",
                main.entries
            )));
        }
        let (pg, i) = pos
            .leaf()
            .ok_or_else(|| Error::corrupted("main database cursor lost its place"))?;
        if !f(&pos, pg, i)? {
            return Ok(());
        }
        more = pos.next(src)?;
    }
    Ok(())
}

/// Looks `name` up in the main tree `main` (ordered by `cmp`, the main database's order).
pub(crate) fn catalog_lookup<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
    cmp: &KeyCmp,
    name: &str,
) -> Result<Named> {
    let Some((_, pg, i)) = find(src, main, cmp, name.as_bytes())? else {
        return Ok(Named::Absent);
    };
    let n = btree::tree_page(src, pg)?.node(i)?;
    if n.is_db() {
        Ok(Named::Db(DbRecord::decode(n.val)?))
    } else {
        Ok(Named::Plain)
    }
}

/// Writes `rec` as named database `name`'s record into its node of the main tree `main`, in
/// place (a record's size never changes, so no key moves and no order is needed beyond
/// finding the node: a handle that lacks the main database's user-supplied order updates
/// records too). The path to the node is made writable first.
pub(crate) fn update_record<W: PageWriter + ?Sized>(
    w: &mut W,
    main: &mut DbRecord,
    cmp: &KeyCmp,
    name: &[u8],
    rec: &DbRecord,
) -> Result<()> {
    let Some((mut path, leaf, i)) = find(w, main, cmp, name)? else {
        return Err(Error::internal(format!(
            "named database {:?} has no key in the main database",
            String::from_utf8_lossy(name)
        )));
    };
    if !btree::tree_page(w, leaf)?.node(i)?.is_db() {
        return Err(Error::internal(format!(
            "named database {:?} is a plain key of the main database",
            String::from_utf8_lossy(name)
        )));
    }
    // A dirty leaf has a dirty path (pages are made writable top-down).
    let leaf = if w.is_dirty(leaf) {
        leaf
    } else {
        btree::touch_path(w, main, &mut path, leaf)?
    };
    let mut page = format::PageMut::new(w.page_mut(leaf)?);
    rec.encode(page.value_area_mut(i)?);
    Ok(())
}

/// The named databases of the main tree `main`, as (name, record), in the main tree's order.
/// Walks the whole main database (its plain keys too), bounded by its entry count.
pub(crate) fn catalog_entries<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
) -> Result<Vec<(Vec<u8>, DbRecord)>> {
    let mut out = Vec::new();
    if !main_allows_named(main.flags) {
        return Ok(out);
    }
    walk(src, main, |_, pg, i| {
        let n = btree::tree_page(src, pg)?.node(i)?;
        if n.is_db() {
            out.push((n.key.to_vec(), DbRecord::decode(n.val)?));
        }
        Ok(true)
    })?;
    Ok(out)
}

/// The names of the named databases of the main tree `main`, in its order.
pub(crate) fn catalog_names<S: PageSource + ?Sized>(
    src: &S,
    main: &DbRecord,
) -> Result<Vec<String>> {
    Ok(catalog_entries(src, main)?
        .into_iter()
        .map(|(k, _)| String::from_utf8_lossy(&k).into_owned())
        .collect())
}

/// The refusal to open a named database under a name that is a plain key of the main
/// database (LMDB's MDB_INCOMPATIBLE).
pub(crate) fn plain_key_error(name: &str) -> Error {
    Error::Incompatible {
        existing: 0,
        requested: 0,
        what: format!("{name:?} is a plain key of the main database, not a named database"),
    }
}
