//! The catalog: the tree that maps each named database to its record.

use crate::btree::{self, cursor::Position, PageSource};
use crate::error::{Error, Result};
use crate::format::{DbRecord, KeyCmp};

/// Looks up a named database's record in a catalog.
pub(crate) fn catalog_lookup<S: PageSource + ?Sized>(
    src: &S,
    catalog: &DbRecord,
    name: &str,
) -> Result<Option<DbRecord>> {
    match btree::search::get(src, catalog, &KeyCmp::Bytes, name.as_bytes())? {
        Some(v) => Ok(Some(DbRecord::decode(v)?)),
        None => Ok(None),
    }
}

/// Names in a catalog.
pub(crate) fn catalog_names<S: PageSource + ?Sized>(
    src: &S,
    catalog: &DbRecord,
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut pos = Position::new();
    let mut more = pos.first(src, catalog)?;
    while more {
        let (k, _) = pos
            .current(src)?
            .ok_or_else(|| Error::corrupted("catalog cursor"))?;
        out.push(String::from_utf8_lossy(k).into_owned());
        more = pos.next(src)?;
    }
    Ok(out)
}
