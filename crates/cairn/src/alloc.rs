//! The free-page set: runs of pages that are reusable now, and runs freed by a committed
//! transaction that some snapshot may still see ("pending").
//!
//! Invariants:
//! - Runs never overlap, and every run lies below the high-water mark `npages`.
//! - A run is reusable only when no pinned snapshot can see it: a run born (written) by
//!   transaction `b` and freed by transaction `f` is visible to snapshots `b..f`; it is released
//!   when no reader, and not the last steady commit, lies in that interval. This frees pages that
//!   were born and died between two open readers, not only those older than the oldest reader.
//! - Adjacent reusable runs are merged, so bookkeeping is by runs, not pages.
//! - A pending run's interval covers the interval of every page in it: adjacent pending runs
//!   whose intervals overlap, blocked alike by the pins of the last release, merge under their
//!   hull (`mergeable`), which can only delay a page's release, never advance it.
//! - Every change is recorded in `dirty` (by span: the free tree's record of the span that
//!   holds the run's first page is rewritten at commit) and in the
//!   undo log (replayed backward on abort, to any nesting depth), except a pending run that
//!   becomes reusable without merging: the free tree keeps it as pending, which is equivalent
//!   (loading re-examines every pending run against the pins of its time), and the change
//!   holds whatever the transaction does, so it is neither persisted nor undone.
//! - `held` counts pages of the last steady snapshot (the lazy mode's recovery point) that
//!   commits since it have freed: they stay pending until the next steady commit whatever the
//!   readers do. It is a lower bound (the free tree's own copies are not counted, and a
//!   reloaded set starts from 0), used only to decide when a lazy commit flushes to give them
//!   back (`recovery_flush_due`), never to decide what is reusable.

use crate::error::Result;
use crate::pageset::PageMap;
use crate::pageset::PageSet;
use std::collections::BTreeMap;

use crate::format::{self, SPAN_SHIFT};

/// One run of free pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    /// Pages in the run.
    pub len: u64,
    /// Transaction that wrote the pages (0 for runs that were never visible).
    pub birth: u64,
    /// Transaction that freed them; 0 once reusable.
    pub freed: u64,
}

impl Run {
    /// This run and its pending neighbour `next` as one run, visible to every snapshot either
    /// was (the hull of their intervals: see `FreeState::mergeable`).
    fn hull(&self, next: &Run) -> Run {
        Run {
            len: self.len + next.len,
            birth: self.birth.min(next.birth),
            freed: self.freed.max(next.freed),
        }
    }
}

/// Decodes one record of a free tree written in format `version` into runs (the byte layout
/// and its checks: `format::decode_free_record`).
pub fn decode_free_record(
    version: u32,
    key: &[u8],
    val: &[u8],
    mut f: impl FnMut(u64, Run) -> Result<()>,
) -> Result<()> {
    format::decode_free_record(version, key, val, |start, len, birth, freed| {
        f(start, Run { len, birth, freed })
    })
}

/// The runs by first page: a bitmap of the starts for the run before a page, and the runs of
/// each bucket of 64 pages in a sorted vector of its own, so that a span's record (1,024 pages,
/// docs/design.md "Free tree") is encoded from 16 contiguous slices. Each change of the set
/// looks up a run and its neighbours; over a search tree of tens of thousands of runs each
/// lookup was a descent through cold nodes (the free set was ~13% of a lazy 1M fillrandom's
/// time, docs/bench/causes.md, session 17). A hash map of the runs served the lookups as well,
/// but encoding a span then cost a lookup per run: at 10M keys with a flush a second, every
/// commit re-encodes nearly every span (its frees fall all over the file), and that was 23% of
/// the time (session 20). Buckets are small so that an insert or removal moves few entries:
/// one vector per span cost 22% more instructions on a 300,000-key load, in `memmove`.
/// Invariants: `starts` holds exactly the starts in `buckets`; `buckets[k]` holds the runs
/// that start in pages `[k << BUCKET_SHIFT, (k + 1) << BUCKET_SHIFT)`, sorted by start,
/// without repeats; `len` counts them all.
#[derive(Default, Clone)]
pub(crate) struct RunMap {
    starts: PageSet,
    buckets: Vec<Vec<(u64, Run)>>,
    len: usize,
}

/// Pages a bucket of `RunMap` covers: 1 << BUCKET_SHIFT (a span holds 16).
const BUCKET_SHIFT: u32 = 6;
const _: () = assert!(BUCKET_SHIFT <= SPAN_SHIFT);

impl RunMap {
    /// The runs of bucket `k` (empty past the last one), sorted by start.
    #[inline]
    fn bucket(&self, k: u64) -> &[(u64, Run)] {
        self.buckets.get(k as usize).map_or(&[], |v| v.as_slice())
    }

    #[inline]
    fn find(v: &[(u64, Run)], start: u64) -> std::result::Result<usize, usize> {
        v.binary_search_by_key(&start, |e| e.0)
    }

    #[inline]
    fn get(&self, start: u64) -> Option<&Run> {
        let v = self.bucket(start >> BUCKET_SHIFT);
        Self::find(v, start).ok().map(|i| &v[i].1)
    }

    #[inline]
    fn get_mut(&mut self, start: u64) -> Option<&mut Run> {
        let v = self.buckets.get_mut((start >> BUCKET_SHIFT) as usize)?;
        let i = Self::find(v, start).ok()?;
        Some(&mut v[i].1)
    }

    fn insert(&mut self, start: u64, r: Run) -> Option<Run> {
        let k = (start >> BUCKET_SHIFT) as usize;
        if self.buckets.len() <= k {
            self.buckets.resize_with(k + 1, Vec::new);
        }
        let v = &mut self.buckets[k];
        match Self::find(v, start) {
            Ok(i) => Some(std::mem::replace(&mut v[i].1, r)),
            Err(i) => {
                v.insert(i, (start, r));
                self.starts.insert(start);
                self.len += 1;
                None
            }
        }
    }

    fn remove(&mut self, start: u64) -> Option<Run> {
        let v = self.buckets.get_mut((start >> BUCKET_SHIFT) as usize)?;
        let i = Self::find(v, start).ok()?;
        let (_, old) = v.remove(i);
        self.starts.remove(start);
        self.len -= 1;
        Some(old)
    }

    /// The run starting last below page `x`.
    #[inline]
    fn before(&self, x: u64) -> Option<(u64, Run)> {
        let s = self.starts.last_before(x)?;
        Some((s, *self.get(s).expect("`starts` lists only held runs")))
    }

    fn len(&self) -> usize {
        self.len
    }

    /// The runs that start in span `span`, in page order.
    fn span(&self, span: u64) -> impl Iterator<Item = &(u64, Run)> + '_ {
        let per = 1u64 << (SPAN_SHIFT - BUCKET_SHIFT);
        (span * per..(span + 1) * per).flat_map(|k| self.bucket(k))
    }

    /// The runs in page order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u64, Run)> + '_ {
        self.buckets.iter().flatten().copied()
    }

    /// Asserts the invariants (tests): `iter` reads the buckets alone, so the starts' bitmap
    /// that `before` relies on is compared here.
    #[cfg(test)]
    fn check(&self) {
        for (k, v) in self.buckets.iter().enumerate() {
            assert!(v.windows(2).all(|w| w[0].0 < w[1].0), "bucket {k} unsorted");
            assert!(
                v.iter().all(|e| e.0 >> BUCKET_SHIFT == k as u64),
                "bucket {k}: a stray run"
            );
        }
        let starts: Vec<u64> = self.iter().map(|(s, _)| s).collect();
        assert_eq!(self.starts.iter().collect::<Vec<_>>(), starts);
        assert_eq!(self.len, starts.len());
    }
}

impl PartialEq for RunMap {
    fn eq(&self, other: &RunMap) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl std::fmt::Debug for RunMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The free-page set with its indexes, dirty keys and undo log.
#[derive(Default, Clone)]
pub struct FreeState {
    runs: RunMap,
    /// Starts of the reusable runs: a bitmap, so that indexing costs a bit flip and the
    /// lowest run is found without a search-tree descent per allocated page.
    reusable: PageSet,
    /// Pending runs grouped by the pinned snapshot that blocked them at the last `release`
    /// (key 0: not examined since they became pending). A group needs another look only when
    /// its pin goes away, so `release` costs what changed, not what is pending. The lists
    /// only grow between looks: a start is listed in group g while `pending_group` says g,
    /// and entries that no longer say so (the run was taken, merged, or re-listed) are
    /// skipped when the group is examined, so that freeing a page costs a push, not a
    /// search-tree insert and removal.
    pending: BTreeMap<u64, Vec<u64>>,
    /// Start of a pending run -> its group in `pending`.
    pending_group: PageMap<u64>,
    /// Starts changed since the last `take_dirty`, with repeats (sorted and deduplicated
    /// there).
    dirty: Vec<u64>,
    undo: Vec<(u64, Option<Run>)>,
    reusable_pages: u64,
    pending_pages: u64,
    held: u64,
    /// The pinned snapshots of the last `release`, for `mergeable`.
    pins: Vec<u64>,
    /// Tests: merge pending runs only when their intervals are equal, so that every page
    /// keeps its exact interval (the page model's comparison).
    #[cfg(test)]
    exact: bool,
}

/// A lazy commit flushes (becomes steady) once the pages its recovery point holds reach this
/// fraction (1/4) of the file's pages in use (docs/design.md, "Lazy commits"). Each flush
/// costs disk writes (a page copied twice between flushes is written once; flushing more
/// often writes more of the copies) and write faults on the pages it cleaned: on a 1M
/// fillrandom (examples/space) 1/4 wrote ~1.9x the bytes of the time rule alone, 1/8 2.2x, for
/// a file of 274, 244 MiB instead of 309-348 (docs/bench/causes.md, session 14).
pub const HELD_DIVISOR: u64 = 4;
/// ... and at least this many pages (8 MiB of 4 KiB pages): a small tree held whole costs
/// little, and flushing for it would make every few commits of a small file steady.
pub const HELD_FLOOR: u64 = 2048;

/// Whether a lazy commit should be steady so that the `held` pages of the recovery point
/// become reusable, in a file of `npages` pages in use.
pub fn recovery_flush_due(held: u64, npages: u64) -> bool {
    held >= HELD_FLOOR.max(npages / HELD_DIVISOR)
}

impl FreeState {
    /// Loads one run read from the free tree (at open).
    pub fn load(&mut self, start: u64, run: Run) {
        self.index(start, &run);
        self.runs.insert(start, run);
    }

    fn index(&mut self, start: u64, r: &Run) {
        if r.freed == 0 {
            self.reusable.insert(start);
            self.reusable_pages += r.len;
        } else {
            self.pending.entry(0).or_default().push(start);
            self.pending_group.insert(start, 0);
            self.pending_pages += r.len;
        }
    }

    fn unindex(&mut self, start: u64, r: &Run) {
        if r.freed == 0 {
            self.reusable.remove(start);
            self.reusable_pages -= r.len;
        } else if self.pending_group.remove(&start).is_some() {
            // Its entry in the group's list goes stale (see `pending`).
            self.pending_pages -= r.len;
        }
    }

    fn set(&mut self, start: u64, new: Option<Run>) {
        // A reusable run resized in place stays in the same index entry: only its page
        // count changes (an allocation from its end, the most common change of all).
        if let Some(r) = new.filter(|r| r.freed == 0) {
            if let Some(cur) = self.runs.get_mut(start) {
                if cur.freed == 0 {
                    let old = std::mem::replace(cur, r);
                    self.reusable_pages = self.reusable_pages - old.len + r.len;
                    self.undo.push((start, Some(old)));
                    self.mark_dirty(start);
                    return;
                }
            }
        }
        let old = match new {
            Some(r) => self.runs.insert(start, r),
            None => self.runs.remove(start),
        };
        // Unindex the old run before indexing the new one: both live under the same key, and
        // the other order dropped a run that was extended in place from the indexes (a leak).
        if let Some(o) = &old {
            self.unindex(start, o);
        }
        if let Some(r) = &new {
            self.index(start, r);
        }
        self.undo.push((start, old));
        self.mark_dirty(start);
    }

    /// Records a changed span (that of a run's first page); a repeat of the last one
    /// (allocations from one run, changes close together) is left out here rather than
    /// sorted away in `take_dirty`.
    #[inline]
    fn mark_dirty(&mut self, start: u64) {
        let span = start >> SPAN_SHIFT;
        if self.dirty.last() != Some(&span) {
            self.dirty.push(span);
        }
    }

    /// Marks every span that holds a run changed: the whole set is written again (a file
    /// whose free tree has another format, rebuilt at its first commit).
    pub fn mark_all_dirty(&mut self) {
        let starts: Vec<u64> = self.runs.iter().map(|(s, _)| s).collect();
        for s in starts {
            self.mark_dirty(s);
        }
    }

    /// The record of span `span` (docs/design.md, "Free tree") into `out`, replacing its
    /// contents: empty when no run starts in the span (its key is then deleted).
    pub fn encode_span(&self, span: u64, out: &mut Vec<u8>) {
        out.clear();
        let base = span << SPAN_SHIFT;
        let end = base + (1 << SPAN_SHIFT);
        for &(s, r) in self.runs.span(span) {
            debug_assert!((base..end).contains(&s));
            format::put_free_run(out, s - base, r.len, r.birth, r.freed);
        }
    }

    /// Length of the undo log (a nesting mark).
    pub fn mark(&self) -> usize {
        self.undo.len()
    }

    /// Undoes every change after `mark`.
    pub fn rollback(&mut self, mark: usize) {
        while self.undo.len() > mark {
            let (start, old) = self.undo.pop().expect("len > mark");
            if let Some(cur) = self.runs.remove(start) {
                self.unindex(start, &cur);
            }
            if let Some(o) = old {
                self.index(start, &o);
                self.runs.insert(start, o);
            }
        }
    }

    /// Forgets the undo log (at commit).
    pub fn forget_undo(&mut self) {
        self.undo.clear();
    }

    /// Takes the spans changed since the last call into `out`, to persist them (ascending,
    /// once each); the set keeps `out`'s old buffer, so that neither grows again each commit.
    pub fn take_dirty(&mut self, out: &mut Vec<u64>) {
        out.clear();
        std::mem::swap(out, &mut self.dirty);
        crate::radix::sort_by_page(out, |&s| s);
        out.dedup();
    }

    /// Whether every change has been persisted.
    pub fn is_clean(&self) -> bool {
        self.dirty.is_empty()
    }

    /// The run starting at `start`.
    #[cfg(test)]
    pub fn get(&self, start: u64) -> Option<Run> {
        self.runs.get(start).copied()
    }

    /// Whether any page of `[start, start + len)` is already free.
    pub fn overlaps(&self, start: u64, len: u64) -> bool {
        self.runs
            .before(start + len)
            .is_some_and(|(s, r)| s + r.len > start)
    }

    /// Takes `n` contiguous reusable pages from the lowest run that has them (so the file
    /// stays compact), at that run's end: the run keeps its start, so the change stays in
    /// its span's record.
    pub fn alloc(&mut self, n: u64) -> Option<u64> {
        let start = if n == 1 {
            self.reusable.first()?
        } else {
            let runs = &self.runs;
            self.reusable
                .iter()
                .find(|&s| runs.get(s).is_some_and(|r| r.len >= n))?
        };
        let cur = self.runs.get_mut(start).expect("indexed runs exist");
        let r = *cur;
        if r.len > n {
            // Shrunk in place (what `set` would do, without a second search).
            cur.len -= n;
            self.reusable_pages -= n;
            self.undo.push((start, Some(r)));
            self.mark_dirty(start);
            return Some(start + r.len - n);
        }
        self.set(start, None);
        Some(start)
    }

    /// Adds pages no snapshot can see, merging with reusable neighbours.
    pub fn add_reusable(&mut self, start: u64, mut len: u64) {
        if let Some(nr) = self.runs.get(start + len).copied() {
            if nr.freed == 0 {
                self.set(start + len, None);
                len += nr.len;
            }
        }
        let reusable = |len| {
            Some(Run {
                len,
                birth: 0,
                freed: 0,
            })
        };
        if let Some((ps, pr)) = self.runs.before(start) {
            if pr.freed == 0 && ps + pr.len == start {
                // The predecessor grows under its own key: resized in place (see `set`).
                self.set(ps, reusable(pr.len + len));
                return;
            }
        }
        self.set(start, reusable(len));
    }

    /// Adds pages born by `birth` and freed by the transaction `freed`; false (and nothing
    /// changed) when some of them are free already. A pending neighbour whose visibility
    /// interval overlaps this one merges with it (`mergeable`).
    pub fn add_pending(&mut self, start: u64, len: u64, birth: u64, freed: u64) -> bool {
        // One search answers both questions: the last run starting before the end of the
        // new one either overlaps it or is its predecessor.
        let before = self.runs.before(start + len);
        if before.is_some_and(|(ps, pr)| ps + pr.len > start) {
            return false;
        }
        let mut run = Run { len, birth, freed };
        if let Some(nr) = self.runs.get(start + len).copied() {
            if self.mergeable(&nr, &run) {
                self.set(start + len, None);
                run = run.hull(&nr);
            }
        }
        if let Some((ps, pr)) = before {
            if ps + pr.len == start && self.mergeable(&pr, &run) {
                self.set(ps, Some(pr.hull(&run)));
                return true;
            }
        }
        self.set(start, Some(run));
        true
    }

    /// Whether pending runs `a` and `b`, neighbours, may become one run whose interval of
    /// visibility is the hull of theirs (lowest birth, highest freeing txnid). The hull only
    /// widens what each page is kept for: a page is released no earlier than before, never
    /// while a snapshot that can see it is pinned. When the intervals overlap the cost is
    /// usually nothing: pages that a lazy handle's recovery point holds all contain that
    /// point and are released together at the next flush. Without this, each commit's freed
    /// pages stayed runs of their own until the flush, hundreds a span, and every commit
    /// encoded them all again (docs/bench/causes.md, session 19).
    fn mergeable(&self, a: &Run, b: &Run) -> bool {
        if a.freed == 0 || b.freed == 0 {
            return false;
        }
        if a.birth == b.birth && a.freed == b.freed {
            return true;
        }
        #[cfg(test)]
        if self.exact {
            return false;
        }
        // Overlapping, and blocked by the same pins of the last release: the hull (their union,
        // as they overlap) then holds no pin that one of them did not. A run the recovery point
        // holds and one born after it would otherwise keep the second until the next flush
        // (the lazy file grew 391 -> 440 MiB after a 1M fillrandom, docs/bench/causes.md).
        a.birth < b.freed
            && b.birth < a.freed
            && self
                .pins
                .iter()
                .all(|&p| (a.birth <= p && p < a.freed) == (b.birth <= p && p < b.freed))
    }

    /// Makes reusable every pending run that no pinned snapshot (sorted ascending) can see.
    /// Looks only at runs not examined yet and at groups whose blocking snapshot is gone.
    pub fn release(&mut self, pinned: &[u64]) {
        self.pins.clear();
        self.pins.extend_from_slice(pinned);
        let stale: Vec<u64> = self
            .pending
            .keys()
            .copied()
            .filter(|&g| g == 0 || pinned.binary_search(&g).is_err())
            .collect();
        let mut ready = Vec::new();
        for g in stale {
            let mut starts = self.pending.remove(&g).unwrap_or_default();
            crate::radix::sort_by_page(&mut starts, |&s| s);
            starts.dedup();
            for &s in &starts {
                if self.pending_group.get(&s) != Some(&g) {
                    continue; // a stale entry
                }
                let r = *self.runs.get(s).expect("listed runs exist");
                // The first pinned snapshot at or after the birth must be at or after `freed`.
                let i = pinned.partition_point(|&p| p < r.birth);
                match pinned.get(i) {
                    Some(&p) if p < r.freed => self.regroup(s, p),
                    // Listed in no group now; `set` below unindexes it.
                    _ => ready.push((s, r.len)),
                }
            }
            // The list of runs not examined yet is refilled by every transaction: its buffer
            // is kept (when small) rather than grown again from nothing.
            if g == 0 && starts.capacity() <= 4096 && !self.pending.contains_key(&0) {
                starts.clear();
                self.pending.insert(0, starts);
            }
        }
        for (s, len) in ready {
            // The successor (a run starting where this one ends) and the predecessor (the run
            // before it, if it ends where this one starts) decide whether the keys change.
            let next_reusable = self.runs.get(s + len).is_some_and(|r| r.freed == 0);
            let prev_reusable = self
                .runs
                .before(s)
                .is_some_and(|(k, r)| r.freed == 0 && k + r.len == s);
            if prev_reusable || next_reusable {
                // Merging changes keys of the free tree: a recorded, persisted change.
                self.set(s, None);
                self.add_reusable(s, len);
            } else {
                // Becoming reusable in place is neither persisted nor undone: the free tree
                // keeps the run as pending (birth, freed), which every load re-examines against
                // the pins of its time, and an abort has no reason to pin the run again.
                let cur = self.runs.get_mut(s).expect("listed runs exist");
                let old = *cur;
                cur.freed = 0;
                let now = *cur;
                self.unindex(s, &old);
                self.index(s, &now);
            }
        }
    }

    /// Lists pending run `s` (taken from its group's list) in the group of the snapshot `to`
    /// blocking it.
    fn regroup(&mut self, s: u64, to: u64) {
        self.pending.entry(to).or_default().push(s);
        self.pending_group.insert(s, to);
    }

    /// Gives back a reusable run that ends at the high-water mark; returns the new mark.
    pub fn trim_tail(&mut self, npages: u64) -> u64 {
        if let Some((s, r)) = self.runs.before(npages) {
            if r.freed == 0 && s + r.len == npages {
                self.set(s, None);
                return s;
            }
        }
        npages
    }

    /// Pages reusable now.
    pub fn reusable_pages(&self) -> u64 {
        self.reusable_pages
    }

    /// Pages freed but still visible to some snapshot.
    pub fn pending_pages(&self) -> u64 {
        self.pending_pages
    }

    /// Pages of the last steady snapshot freed by the commits since it (see the invariants).
    pub fn held(&self) -> u64 {
        self.held
    }

    /// Counts a commit that freed `pages` of the last steady snapshot; a steady commit is the
    /// new recovery point, which holds nothing yet.
    pub fn note_commit(&mut self, pages: u64, steady: bool) {
        self.held = if steady { 0 } else { self.held + pages };
    }
}

#[cfg(test)]
impl FreeState {
    /// The runs of spans `0..=last` as their records encode them, decoded again.
    fn runs_through_records(&self, last: u64) -> Vec<(u64, Run)> {
        let mut got = Vec::new();
        let mut val = Vec::new();
        for span in 0..=last {
            self.encode_span(span, &mut val);
            if !val.is_empty() {
                decode_free_record(4, &format::span_key(span), &val, |s, r| {
                    got.push((s, r));
                    Ok(())
                })
                .expect("a record this set encoded decodes");
            }
        }
        got
    }

    /// Checks every index against the runs (the module's invariants).
    fn check_indexes(&self) {
        self.runs.check();
        let mut end = 0;
        let (mut reusable, mut pending) = (0, 0);
        for (s, r) in self.runs.iter() {
            assert!(r.len > 0 && s >= end, "run {s} overlaps or is empty");
            end = s + r.len;
            if r.freed == 0 {
                reusable += r.len;
            } else {
                pending += r.len;
                let g = self.pending_group[&s];
                assert!(self.pending[&g].contains(&s), "pending run {s} not listed");
            }
        }
        let want: Vec<u64> = self
            .runs
            .iter()
            .filter(|(_, r)| r.freed == 0)
            .map(|(s, _)| s)
            .collect();
        assert_eq!(self.reusable.iter().collect::<Vec<_>>(), want);
        assert_eq!(self.pending_group.len(), self.runs.len() - want.len());
        assert_eq!(
            (self.reusable_pages, self.pending_pages),
            (reusable, pending)
        );
    }
}

#[cfg(test)]
mod model {
    //! Model-based: the free set against a map of free pages, through transactions that
    //! release against random pins, free, allocate, nest and abort.
    use super::*;
    use proptest::prelude::*;

    /// Free page -> (birth, freed); freed 0 once reusable.
    type Pages = BTreeMap<u64, (u64, u64)>;

    #[derive(Debug, Clone)]
    enum Op {
        FreeNew(u64, u64),
        FreeOld(u64, u64, u64),
        Alloc(u64),
        Mark,
        Rollback,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1u64..160, 1u64..4).prop_map(|(s, l)| Op::FreeNew(s, l)),
            (1u64..160, 1u64..6, 0u64..4).prop_map(|(s, l, b)| Op::FreeOld(s, l, b)),
            (1u64..4).prop_map(Op::Alloc),
            Just(Op::Mark),
            Just(Op::Rollback),
        ]
    }

    fn txn() -> impl Strategy<Value = (Vec<u64>, Vec<Op>, bool)> {
        (
            prop::collection::vec(0u64..4, 0..3),
            prop::collection::vec(op(), 0..40),
            any::<bool>(),
        )
    }

    /// Runs transactions against the page model. `exact`: pending runs merge only with equal
    /// intervals, and every page's interval must be the model's; else they merge when their
    /// intervals overlap, and a page's interval may only be wider.
    fn run_model(txns: Vec<(Vec<u64>, Vec<Op>, bool)>, exact: bool) -> Result<(), TestCaseError> {
        let mut f = FreeState {
            exact,
            ..FreeState::default()
        };
        let mut pages = Pages::new();
        let mut dirty = Vec::new();
        for (t, (pin_back, ops, abort)) in txns.into_iter().enumerate() {
            let id = t as u64 + 10;
            // Pins among the last few transactions, ascending.
            let mut pins: Vec<u64> = pin_back.iter().map(|b| id - 1 - b).collect();
            pins.sort_unstable();
            pins.dedup();
            f.release(&pins);
            // What stays pending is blocked by a pin inside its (possibly widened) interval.
            for (_, r) in f.runs.iter().filter(|(_, r)| r.freed != 0) {
                prop_assert!(pins.iter().any(|&p| r.birth <= p && p < r.freed));
            }
            for v in pages.values_mut() {
                if v.1 != 0 && !pins.iter().any(|&p| v.0 <= p && p < v.1) {
                    *v = (0, 0);
                }
            }
            f.check_indexes();
            let start = (f.mark(), pages.clone(), f.runs.clone());
            let mut marks = vec![];
            for o in ops {
                match o {
                    Op::FreeNew(s, l) => {
                        if (s..s + l).all(|p| !pages.contains_key(&p)) {
                            f.add_reusable(s, l);
                            pages.extend((s..s + l).map(|p| (p, (0, 0))));
                        }
                    }
                    Op::FreeOld(s, l, b) => {
                        let clash = (s..s + l).any(|p| pages.contains_key(&p));
                        let birth = id - 1 - b;
                        prop_assert_eq!(f.add_pending(s, l, birth, id), !clash);
                        if !clash {
                            pages.extend((s..s + l).map(|p| (p, (birth, id))));
                        }
                    }
                    Op::Alloc(n) => match f.alloc(n) {
                        Some(p) => {
                            for q in p..p + n {
                                prop_assert_eq!(pages.remove(&q), Some((0, 0)));
                            }
                        }
                        None => prop_assert!(n > 1 || !exact || pages.values().all(|v| v.1 != 0)),
                    },
                    Op::Mark => marks.push((f.mark(), pages.clone(), f.runs.clone())),
                    Op::Rollback => {
                        if let Some((m, p, r)) = marks.pop() {
                            f.rollback(m);
                            pages = p;
                            prop_assert_eq!(&f.runs, &r);
                        }
                    }
                }
                f.check_indexes();
            }
            if abort {
                f.rollback(start.0);
                pages = start.1;
                prop_assert_eq!(&f.runs, &start.2);
            } else {
                f.take_dirty(&mut dirty);
                prop_assert!(dirty.windows(2).all(|w| w[0] < w[1]));
                // Every span's record decodes to the span's runs, and only those.
                let last = f.runs.iter().last().map_or(0, |(s, _)| s >> SPAN_SHIFT);
                let runs: Vec<(u64, Run)> = f.runs.iter().collect();
                prop_assert_eq!(f.runs_through_records(last), runs);
            }
            f.forget_undo();
            f.check_indexes();
            let mut runs_pages = Pages::new();
            for (s, r) in f.runs.iter() {
                runs_pages.extend((s..s + r.len).map(|p| (p, (r.birth, r.freed))));
            }
            // Reusable pages carry no birth in the set.
            let model: Pages = pages
                .iter()
                .map(|(&p, &(b, fr))| (p, if fr == 0 { (0, 0) } else { (b, fr) }))
                .collect();
            let got: Pages = runs_pages
                .into_iter()
                .map(|(p, (b, fr))| (p, if fr == 0 { (0, 0) } else { (b, fr) }))
                .collect();
            if exact {
                prop_assert_eq!(got, model);
            } else {
                // The same free pages; each pending page kept for at least its own interval
                // (a widened one releases it no earlier), a reusable one possibly still
                // pending under a neighbour's.
                prop_assert!(got.keys().eq(model.keys()));
                for (p, &(b, fr)) in &model {
                    let (gb, gf) = got[p];
                    prop_assert!(fr == 0 || (gf != 0 && gb <= b && gf >= fr), "page {p}");
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        #[test]
        fn free_set_matches_a_page_model(txns in prop::collection::vec(txn(), 1..12)) {
            run_model(txns, true)?;
        }

        #[test]
        fn free_set_with_merged_intervals_is_conservative(
            txns in prop::collection::vec(txn(), 1..12),
        ) {
            run_model(txns, false)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Runs anywhere in a file of many spans (some crossing a span's end, some with
        /// txnids past 32 bits) come back from their spans' records as they went in.
        #[test]
        fn span_records_round_trip(
            runs in proptest::collection::btree_map(
                0u64..20_000,
                (1u64..3_000, proptest::prelude::any::<u64>(), 0u64..3),
                0..200,
            )
        ) {
            let mut f = FreeState::default();
            let mut end = 0;
            let mut want = Vec::new();
            for (&start, &(len, birth, freed)) in &runs {
                if start < end {
                    continue;
                }
                let r = Run { len, birth, freed: freed * birth };
                f.load(start, r);
                want.push((start, r));
                end = start + len;
            }
            proptest::prop_assert_eq!(f.runs_through_records(20_000 >> SPAN_SHIFT), want);
        }

    }

    #[test]
    fn merge_alloc_and_rollback() {
        let mut f = FreeState::default();
        f.add_reusable(10, 2);
        f.add_reusable(12, 3);
        assert_eq!(
            f.get(10),
            Some(Run {
                len: 5,
                birth: 0,
                freed: 0
            })
        );
        let mark = f.mark();
        // From the end of the lowest run that has room.
        assert_eq!(f.alloc(1), Some(14));
        assert_eq!(f.alloc(3), Some(11));
        assert_eq!(f.reusable_pages(), 1);
        assert_eq!(f.alloc(1), Some(10));
        assert_eq!(f.alloc(1), None);
        f.rollback(mark);
        assert_eq!(
            f.get(10),
            Some(Run {
                len: 5,
                birth: 0,
                freed: 0
            })
        );
        assert_eq!(f.reusable_pages(), 5);
    }

    #[test]
    fn release_between_readers() {
        let mut f = FreeState::default();
        f.add_pending(5, 1, 3, 6); // visible to snapshots 3..6
        f.add_pending(8, 1, 7, 9); // visible to 7..9, between readers 2 and 10
        f.release(&[4, 10]);
        assert_eq!(f.get(5).unwrap().freed, 6);
        assert_eq!(f.get(8).unwrap().freed, 0);
        f.release(&[5]);
        assert_eq!(f.get(5).unwrap().freed, 6);
        f.release(&[]);
        assert_eq!(f.get(5).unwrap().freed, 0);
        assert!(f.overlaps(5, 1) && !f.overlaps(6, 2));
        // Pages already free are refused, whole.
        assert!(!f.add_pending(4, 2, 1, 11) && !f.add_pending(7, 2, 1, 11));
        assert!(f.add_pending(6, 2, 1, 11));
        assert_eq!(f.trim_tail(9), 8);
    }

    #[test]
    fn runs_extended_in_place_stay_indexed() {
        let mut f = FreeState::default();
        f.add_pending(5, 1, 3, 6);
        f.add_pending(6, 2, 3, 6); // extends the run at 5
        assert_eq!(f.pending_pages(), 3);
        f.release(&[]);
        assert_eq!(f.reusable_pages(), 3);
        f.add_reusable(8, 1); // merges into the run at 5
        assert_eq!(f.reusable_pages(), 4);
        assert_eq!(f.alloc(4), Some(5));
        assert_eq!(f.reusable_pages(), 0);
    }

    #[test]
    fn release_in_place_is_neither_persisted_nor_undone() {
        let mut f = FreeState::default();
        // 5 in span 0, the others in span 2.
        let (p9, p10) = (2 << SPAN_SHIFT | 9, 2 << SPAN_SHIFT | 10);
        f.add_pending(5, 1, 3, 6);
        f.add_pending(p9, 1, 3, 7);
        f.add_reusable(p10, 2);
        f.take_dirty(&mut Vec::new());
        f.forget_undo();
        f.release(&[]);
        // 5 had no reusable neighbour: reusable in memory, nothing to write.
        assert_eq!(f.get(5).unwrap().freed, 0);
        // 9 merged with 10: a new key layout, which the free tree must learn.
        assert_eq!(f.get(p9).unwrap().len, 3);
        let mut dirty = Vec::new();
        f.take_dirty(&mut dirty);
        assert_eq!(dirty, [2]);
        // An abort undoes the merge (to be redone by the next release) but not the release of 5.
        f.rollback(0);
        assert_eq!(f.get(5).unwrap().freed, 0);
        assert_eq!(f.reusable_pages(), 3);
        assert_eq!(f.alloc(1), Some(5));
    }
}
