//! The checker: walks every page of a snapshot and verifies every invariant: each page's
//! checksum, number and writer; key order inside pages and against the separators above them;
//! uniform depth; the counts in every database record; and that every page below the
//! high-water mark is reachable exactly once or free.

use crate::alloc::{self, Run};
use crate::btree::{cursor::Position, PageSource, MAX_DEPTH};
use crate::env::EnvInner;
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp};
use crate::txn::Snapshot;
use std::cmp::Ordering;

/// What the checker found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Report {
    /// Pages walked in trees.
    pub tree_pages: u64,
    /// Pages free or pending.
    pub free_pages: u64,
    /// Entries in all databases.
    pub entries: u64,
    /// Named databases.
    pub databases: u64,
    /// Problems found; empty when the snapshot is sound.
    pub problems: Vec<String>,
}

impl Report {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
    /// Turns problems into an error.
    pub fn into_result(self) -> Result<Report> {
        if self.is_ok() {
            Ok(self)
        } else {
            Err(Error::corrupted(self.problems.join("; ")))
        }
    }
}

struct Walker<'a> {
    src: &'a Snapshot<'a>,
    seen: Vec<u8>,
    report: Report,
}

impl Walker<'_> {
    fn mark(&mut self, pg: u64, span: u64, what: &str) {
        for p in pg..pg + span {
            match self.seen.get_mut(p as usize) {
                Some(s) if *s == 0 => *s = 1,
                Some(_) => self
                    .report
                    .problems
                    .push(format!("page {p} ({what}) is used twice")),
                None => self
                    .report
                    .problems
                    .push(format!("page {p} ({what}) is past the end")),
            }
        }
    }

    fn tree(&mut self, name: &str, rec: &DbRecord, cmp: &KeyCmp) {
        let mut counts = DbRecord::default();
        if rec.root != 0 {
            if let Err(e) = self.node(name, rec.root, cmp, None, None, 1, rec.depth, &mut counts) {
                self.report.problems.push(format!("{name}: {e}"));
                return;
            }
        }
        let same = counts.entries == rec.entries
            && counts.branch_pages == rec.branch_pages
            && counts.leaf_pages == rec.leaf_pages
            && counts.overflow_pages == rec.overflow_pages;
        if !same {
            self.report.problems.push(format!(
                "{name}: record says {} entries / {}+{}+{} pages, tree has {} / {}+{}+{}",
                rec.entries,
                rec.branch_pages,
                rec.leaf_pages,
                rec.overflow_pages,
                counts.entries,
                counts.branch_pages,
                counts.leaf_pages,
                counts.overflow_pages
            ));
        }
        self.report.entries += counts.entries;
    }

    #[allow(clippy::too_many_arguments, reason = "a recursive walk's state")]
    fn node(
        &mut self,
        name: &str,
        pg: u64,
        cmp: &KeyCmp,
        lo: Option<&[u8]>,
        hi: Option<&[u8]>,
        level: u16,
        depth: u16,
        c: &mut DbRecord,
    ) -> Result<()> {
        if usize::from(level) > MAX_DEPTH || level > depth {
            return Err(Error::corrupted(format!(
                "page {pg} deeper than the record's depth {depth}"
            )));
        }
        let b = self.src.page(pg)?;
        format::verify_page(b, pg, None)?;
        let p = format::Page::new(b, pg)?;
        if p.txnid() > self.src.meta.txnid {
            return Err(Error::corrupted(format!(
                "page {pg} written by a future transaction {}",
                p.txnid()
            )));
        }
        self.mark(pg, 1, name);
        self.report.tree_pages += 1;
        let n = p.nkeys();
        if n == 0 && !(level == 1 && p.is_leaf()) {
            return Err(Error::corrupted(format!("page {pg} is empty")));
        }
        let first = usize::from(!p.is_leaf());
        let mut prev: Option<&[u8]> = lo;
        for i in first..n {
            let k = p.key(i)?;
            if let Some(pk) = prev {
                let o = cmp.cmp(pk, k);
                let bad = if i == first && lo.is_some() {
                    o == Ordering::Greater
                } else {
                    o != Ordering::Less
                };
                if bad {
                    return Err(Error::corrupted(format!("page {pg}: key {i} out of order")));
                }
            }
            if let Some(h) = hi {
                if cmp.cmp(k, h) != Ordering::Less {
                    return Err(Error::corrupted(format!(
                        "page {pg}: key {i} not below its upper bound"
                    )));
                }
            }
            prev = Some(k);
        }
        p.check_hints()?;
        if p.is_leaf() {
            if level != depth {
                return Err(Error::corrupted(format!(
                    "leaf {pg} at level {level}, depth is {depth}"
                )));
            }
            c.leaf_pages += 1;
            for i in 0..n {
                let nd = p.node(i)?;
                c.entries += 1;
                if nd.is_big() {
                    let opg = format::decode_u64(nd.val)?;
                    let span = format::overflow_pages(self.src.page_size(), nd.vlen as usize);
                    let ob = self.src.pages(opg, span)?;
                    format::verify_page(ob, opg, None)?;
                    format::overflow_value(ob, opg, nd.vlen as usize)?;
                    if format::page_id(ob)?.span != span {
                        return Err(Error::corrupted(format!("overflow {opg}: wrong span")));
                    }
                    self.mark(opg, span, name);
                    c.overflow_pages += span;
                }
            }
        } else {
            c.branch_pages += 1;
            let keys: Vec<Vec<u8>> = (0..n)
                .map(|i| p.key(i).map(<[u8]>::to_vec))
                .collect::<Result<_>>()?;
            for i in 0..n {
                let child = p.child(i)?;
                let clo = if i == 0 { lo } else { Some(&keys[i][..]) };
                let chi = if i + 1 < n {
                    Some(&keys[i + 1][..])
                } else {
                    hi
                };
                self.node(name, child, cmp, clo, chi, level + 1, depth, c)?;
            }
        }
        Ok(())
    }
}

/// Checks a whole snapshot.
pub(crate) fn check(src: &Snapshot<'_>, env: &EnvInner) -> Result<Report> {
    let m = &src.meta;
    let mut w = Walker {
        src,
        seen: vec![0u8; m.npages as usize],
        report: Report::default(),
    };
    w.mark(0, 1, "meta");
    let main_cmp = crate::db::cmp_for(crate::DbFlags::from_bits_retain(u32::from(m.main.flags)));
    w.tree("main", &m.main, &main_cmp);
    w.tree("catalog", &m.catalog, &KeyCmp::Bytes);
    w.tree("free tree", &m.free, &KeyCmp::Bytes);
    // Named databases.
    let mut pos = Position::new();
    let mut more = pos.first(src, &m.catalog)?;
    let mut named = Vec::new();
    while more {
        let (k, v) = pos
            .current(src)?
            .ok_or_else(|| Error::corrupted("catalog cursor"))?;
        named.push((
            String::from_utf8_lossy(k).into_owned(),
            DbRecord::decode(v)?,
        ));
        more = pos.next(src)?;
    }
    w.report.databases = named.len() as u64;
    for (name, rec) in &named {
        let cmp = crate::db::cmp_for(crate::DbFlags::from_bits_retain(u32::from(rec.flags)));
        w.tree(name, rec, &cmp);
    }
    // Commit-list pages of this commit.
    for pg in crate::env::list_pages(src.storage, m)? {
        w.mark(pg, 1, "commit list");
    }
    // Free runs.
    let mut more = pos.first(src, &m.free)?;
    while more {
        let (k, v) = pos
            .current(src)?
            .ok_or_else(|| Error::corrupted("free cursor"))?;
        let start = alloc::decode_run_key(k).ok_or_else(|| Error::corrupted("free key"))?;
        let run: Run = Run::decode(v).ok_or_else(|| Error::corrupted("free value"))?;
        if run.len == 0 || start.checked_add(run.len).is_none_or(|e| e > m.npages) {
            w.report
                .problems
                .push(format!("free run {start}+{} out of range", run.len));
        } else {
            w.mark(start, run.len, "free");
            w.report.free_pages += run.len;
        }
        more = pos.next(src)?;
    }
    let lost: Vec<u64> = w
        .seen
        .iter()
        .enumerate()
        .filter(|(_, &s)| s == 0)
        .map(|(i, _)| i as u64)
        .take(10)
        .collect();
    if !lost.is_empty() {
        w.report.problems.push(format!(
            "pages neither used nor free: {lost:?}{}",
            if lost.len() == 10 { "..." } else { "" }
        ));
    }
    let _ = env;
    Ok(w.report)
}
