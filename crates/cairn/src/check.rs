//! The checker: walks every page of a snapshot and verifies every invariant: each page's
//! checksum, number and writer; key order inside pages and against the separators above them;
//! uniform depth; the counts in every database record; every sorted-duplicates value set
//! (order, uniqueness, counts, and the form its size calls for: see `btree/dup.rs`); and that
//! every page below the high-water mark, sub-tree pages included, is reachable exactly once or
//! free. Named databases are the NF_DB nodes of the main tree's leaves (nowhere else), each
//! a valid record whose tree is walked in turn.
//!
//! Orders: a database is checked in the order the handle gives it (a user-supplied one set with
//! `Env::set_key_order` / `set_dup_order`, else the flags' one). A database whose record says
//! its keys or values are in a user-supplied order the handle has not set (a file written by a
//! program with its own comparator, checked by `cairn check`) cannot be checked for that order:
//! its structure, counts and pages are checked, identical neighbours are still refused, and the
//! report's `notes` say what was left out. Such a file is never reported as corrupted for it.

use crate::alloc;
use crate::btree::dup::Form;
use crate::btree::{cursor::Position, PageSource, MAX_DEPTH};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp};
use crate::snapshot::Snapshot;
use crate::state::EnvInner;
use crate::txn::RoTxn;
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
    /// What could not be checked and why (not problems): databases kept in a user-supplied
    /// order that the handle running the check has not set.
    pub notes: Vec<String>,
}

impl RoTxn<'_> {
    /// Walks the whole snapshot and checks every invariant (see [`crate::check`]).
    pub fn check(&self) -> Result<Report> {
        check(self.snapshot(), &self.env().inner)
    }
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
    /// Set while the main tree is walked (and it may hold named databases): its leaves' NF_DB
    /// nodes are named databases, collected into `named`. Anywhere else such a node is a
    /// problem.
    main_names: bool,
    named: Vec<(Vec<u8>, DbRecord)>,
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

    fn tree(&mut self, name: &str, rec: &DbRecord, cmp: Option<&KeyCmp>, dups: Option<ValueOrder>) {
        let mut counts = DbRecord::default();
        let kind = match &dups {
            Some(o) => Kind::Dups(o),
            None => Kind::Plain,
        };
        if rec.root != 0 {
            let top = (rec.root, rec.depth);
            if let Err(e) = self.node(name, top, cmp, (None, None), 1, kind, &mut counts) {
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
        (pg, depth): (u64, u16),
        cmp: Option<&KeyCmp>,
        (lo, hi): (Option<&[u8]>, Option<&[u8]>),
        level: u16,
        kind: Kind<'_>,
        c: &mut DbRecord,
    ) -> Result<()> {
        if usize::from(level) > MAX_DEPTH || level > depth {
            return Err(Error::corrupted(format!(
                "page {pg} deeper than the record's depth {depth}"
            )));
        }
        let b = self.src.page(pg)?;
        format::verify_page(b, pg, None)?;
        let writer = format::page_id(b)?.txnid;
        if writer > self.src.meta.txnid {
            return Err(Error::corrupted(format!(
                "page {pg} written by a future transaction {writer}"
            )));
        }
        self.mark(pg, 1, name);
        self.report.tree_pages += 1;
        if let (Kind::Sub(Some(size)), true) = (kind, level == depth) {
            // A DUPFIXED sub-tree's leaf: packed, of the record's value size.
            let l = format::PackedLeaf::new(b, pg, Some(size))?;
            if l.nkeys() == 0 {
                return Err(Error::corrupted(format!("page {pg} is empty")));
            }
            check_order(pg, (0, l.nkeys()), |i| l.key(i), cmp, (lo, hi))?;
            c.leaf_pages += 1;
            c.entries += l.nkeys() as u64;
            return Ok(());
        }
        let p = format::Page::new(b, pg)?;
        let n = p.nkeys();
        if n == 0 && !(level == 1 && p.is_leaf()) {
            return Err(Error::corrupted(format!("page {pg} is empty")));
        }
        let first = usize::from(!p.is_leaf());
        check_order(pg, (first, n), |i| p.key(i), cmp, (lo, hi))?;
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
                if nd.is_db() {
                    if !(self.main_names && matches!(kind, Kind::Plain)) {
                        return Err(Error::corrupted(format!(
                            "page {pg}: node {i} is a named database's record outside the \
                             main database (or in a DUP_SORT or INTEGER_KEY main database)"
                        )));
                    }
                    let rec = DbRecord::decode(nd.val).map_err(|e| {
                        Error::corrupted(format!(
                            "page {pg}: named database {:?}: {e}",
                            String::from_utf8_lossy(nd.key)
                        ))
                    })?;
                    self.named.push((nd.key.to_vec(), rec));
                    continue;
                }
                match kind {
                    Kind::Plain if nd.is_dups() => {
                        return Err(Error::corrupted(format!(
                            "page {pg}: duplicates node {i} in a database without DUP_SORT"
                        )));
                    }
                    Kind::Dups(o) if nd.is_dups() => {
                        c.entries -= 1;
                        self.values(name, pg, &nd, o, c)?;
                        continue;
                    }
                    Kind::Sub(size)
                        if nd.flags != 0
                            || nd.vlen != 0
                            || size.is_some_and(|s| nd.key.len() != s) =>
                    {
                        return Err(Error::corrupted(format!(
                            "sub-tree page {pg}: node {i} is not a bare value"
                        )));
                    }
                    _ => {}
                }
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
                self.node(name, (child, depth), cmp, (clo, chi), level + 1, kind, c)?;
            }
        }
        Ok(())
    }
}

/// Checks keys `first..n` of page `pg` (read by `key`): strictly increasing by `cmp`, the
/// first not below `lo`, all below `hi`; with the order unknown, no two neighbours identical.
fn check_order<'k>(
    pg: u64,
    (first, n): (usize, usize),
    key: impl Fn(usize) -> Result<&'k [u8]>,
    cmp: Option<&KeyCmp>,
    (lo, hi): (Option<&[u8]>, Option<&[u8]>),
) -> Result<()> {
    let mut prev: Option<&[u8]> = lo;
    for i in first..n {
        let k = key(i)?;
        let Some(cmp) = cmp else {
            // Order unknown: identical neighbours are out of order in any order.
            if i > first && key(i - 1)? == k {
                return Err(Error::corrupted(format!("page {pg}: key {i} repeated")));
            }
            continue;
        };
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
    Ok(())
}

/// The value order a DUP_SORT database is checked with.
struct ValueOrder {
    /// None: a user-supplied order the checking handle has not set.
    cmp: Option<KeyCmp>,
    /// DUPFIXED.
    fixed: bool,
}

/// The orders to check the database of record `rec` with, given the checking handle's
/// database `idx` (None: the handle has not opened it), and what could not be checked.
fn orders(
    env: &EnvInner,
    idx: Option<usize>,
    rec: &DbRecord,
) -> (Option<KeyCmp>, Option<ValueOrder>, Vec<&'static str>) {
    let flags = crate::DbFlags::from_bits_retain(u32::from(rec.flags));
    let (key_set, value_set) = match idx {
        Some(i) => {
            let (k, _) = env.db_orders(i);
            (
                matches!(k, KeyCmp::Custom(_)).then_some(k),
                env.db_dup_cmp(i),
            )
        }
        None => (None, None),
    };
    let mut unknown = Vec::new();
    let keys = match key_set {
        Some(k) => Some(k),
        None if rec.order & format::ORDER_CUSTOM_KEYS != 0 && rec.root != 0 => {
            unknown.push("keys");
            None
        }
        None => Some(crate::db::cmp_for(flags)),
    };
    let values = flags
        .contains(crate::DbFlags::DUP_SORT)
        .then(|| ValueOrder {
            fixed: flags.contains(crate::DbFlags::DUP_FIXED),
            cmp: match value_set {
                Some(v) => Some(v),
                None if rec.order & format::ORDER_CUSTOM_VALUES != 0 && rec.root != 0 => {
                    unknown.push("values");
                    None
                }
                None => Some(crate::db::dup_cmp_for(flags)),
            },
        });
    (keys, values, unknown)
}

/// What a tree walk expects of its leaf nodes.
#[derive(Clone, Copy)]
enum Kind<'o> {
    /// Plain values.
    Plain,
    /// A DUP_SORT database: single values, inline sets or sub-trees.
    Dups(&'o ValueOrder),
    /// A sub-tree: bare values (keys with empty data), of one size for DUP_FIXED.
    Sub(Option<usize>),
}

impl Walker<'_> {
    /// Checks a user database in the orders [`orders`] gives it, noting what it cannot check.
    fn database(&mut self, env: &EnvInner, name: &str, idx: Option<usize>, rec: &DbRecord) {
        let (keys, values, unknown) = orders(env, idx, rec);
        for what in unknown {
            self.report.notes.push(format!(
                "{name}: its {what} are in a user-supplied order this handle has not set \
                 (Env::set_key_order / set_dup_order): their order was not checked"
            ));
        }
        self.tree(name, rec, keys.as_ref(), values);
    }

    /// Checks the value set of DUP_SORT node `nd` on page `pg` and adds it to the counts.
    fn values(
        &mut self,
        name: &str,
        pg: u64,
        nd: &format::Node<'_>,
        o: &ValueOrder,
        c: &mut DbRecord,
    ) -> Result<()> {
        let ps = self.src.page_size();
        let bad = |what: String| Error::corrupted(format!("page {pg}: key {:?}: {what}", nd.key));
        match crate::btree::dup::form(self.src, nd, o.fixed)? {
            Form::One(_) => unreachable!("is_dups nodes hold a set"),
            Form::Inline(set) => {
                if set.len() < 2 {
                    return Err(bad(format!("inline set of {} values", set.len())));
                }
                if format::node_size(nd.key.len(), nd.val.len()) > format::dups_node_max(ps) {
                    return Err(bad("inline set larger than its limit".into()));
                }
                let mut data = 0;
                for j in 0..set.len() {
                    let v = set.get(j)?;
                    data += v.len();
                    if j > 0 {
                        let pv = set.get(j - 1)?;
                        let ok = match &o.cmp {
                            Some(cmp) => cmp.cmp(pv, v) == Ordering::Less,
                            None => pv != v,
                        };
                        if !ok {
                            return Err(bad(format!("inline value {j} out of order or repeated")));
                        }
                    }
                }
                if format::dupset_size(set.len(), data, o.fixed) != nd.val.len() {
                    return Err(bad("inline set has stray bytes".into()));
                }
                c.entries += set.len() as u64;
            }
            Form::Tree(sub) => {
                let mut sc = DbRecord::default();
                let size = o.fixed.then_some(usize::from(sub.flags));
                let kind = Kind::Sub(size);
                self.node(
                    name,
                    (sub.root, sub.depth),
                    o.cmp.as_ref(),
                    (None, None),
                    1,
                    kind,
                    &mut sc,
                )?;
                let same = sc.entries == sub.entries
                    && sc.branch_pages == sub.branch_pages
                    && sc.leaf_pages == sub.leaf_pages
                    && sc.overflow_pages == 0;
                if !same {
                    return Err(bad(format!(
                        "sub-tree record says {} values / {}+{} pages, it has {} / {}+{}",
                        sub.entries,
                        sub.branch_pages,
                        sub.leaf_pages,
                        sc.entries,
                        sc.branch_pages,
                        sc.leaf_pages
                    )));
                }
                if sub.entries < 2 {
                    return Err(bad(format!("sub-tree of {} values", sub.entries)));
                }
                if sub.depth == 1 {
                    let p = crate::btree::packed::any_leaf(self.src, sub.root, size)?;
                    let mut data = 0;
                    for j in 0..p.nkeys() {
                        data += p.key(j)?.len();
                    }
                    let inline = format::dupset_size(p.nkeys(), data, o.fixed);
                    if format::node_size(nd.key.len(), inline) <= format::dups_node_max(ps) / 2 {
                        return Err(bad("sub-tree small enough to be inline".into()));
                    }
                }
                c.entries += sub.entries;
                c.branch_pages += sub.branch_pages;
                c.leaf_pages += sub.leaf_pages;
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
        main_names: crate::catalog::main_allows_named(m.main.flags),
        named: Vec::new(),
    };
    w.mark(0, 1, "meta");
    // The main tree, collecting its named databases' nodes on the way.
    w.database(env, "main", Some(0), &m.main);
    w.main_names = false;
    w.tree("free tree", &m.free, Some(&KeyCmp::Bytes), None);
    // Named databases.
    let named = std::mem::take(&mut w.named);
    w.report.databases = named.len() as u64;
    for (name, rec) in &named {
        let name = String::from_utf8_lossy(name);
        w.database(env, &name, env.lookup_db(&name), rec);
    }
    let mut pos = Position::new();
    // Commit-list pages of this commit.
    for pg in crate::recover::list_pages(src.storage, m)? {
        w.mark(pg, 1, "commit list");
    }
    // Free runs.
    let mut more = pos.first(src, &m.free)?;
    while more {
        let (k, v) = pos
            .current(src)?
            .ok_or_else(|| Error::corrupted("free cursor"))?;
        alloc::decode_free_record(m.version, k, v, |start, run| {
            if run.len == 0 || start.checked_add(run.len).is_none_or(|e| e > m.npages) {
                w.report
                    .problems
                    .push(format!("free run {start}+{} out of range", run.len));
            } else {
                w.mark(start, run.len, "free");
                w.report.free_pages += run.len;
            }
            Ok(())
        })?;
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
    Ok(w.report)
}
