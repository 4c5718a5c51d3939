//! Range iterators: a key range walked from both ends at once (`next`, `next_back`) until the
//! two ends cross.

use super::*;

/// An iterator over the (key, value) pairs of a key range, forward or (with `.rev()`)
/// backward; in a DUP_SORT database every value of a key in turn.
pub struct Iter<'t> {
    src: &'t dyn PageSource,
    cmp: KeyCmp,
    vcmp: KeyCmp,
    front: DupPos,
    back: DupPos,
    started: (bool, bool),
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rec: DbRecord,
    done: bool,
    /// Per end (front, back): the key being walked and the sub-tree leaf of its values with
    /// the slot reached, so that a step inside the leaf reads no page again (DUP_SORT).
    leaf: [Option<(&'t [u8], Leaf<'t>, usize)>; 2],
    /// Per end: the main-tree leaf being walked and the slot reached (databases without
    /// sorted duplicates), so that a step inside the leaf reads no page again. While set, its
    /// slot is the end's place and the position's leaf slot may lag behind: it is brought up
    /// to date when the walk leaves the leaf (`main_leave`), the only move that reads it.
    main: [Option<(Page<'t>, usize)>; 2],
    /// Per end: the parent branch of the leaf in `main`, when known (read when the walk last
    /// moved between leaves under it), so that the next move between its children reads only
    /// the leaf it lands in. Cleared whenever `main` is set from the position.
    up: [Option<Page<'t>>; 2],
    /// Pairs yielded so far, both ends: more than the record counts means a crafted tree
    /// (children shared between branches), reported instead of walked for ever.
    yielded: u64,
}

impl<'t> Iter<'t> {
    pub(crate) fn new<'k, R: std::ops::RangeBounds<&'k [u8]>>(
        src: &'t dyn PageSource,
        rec: DbRecord,
        cmp: KeyCmp,
        range: R,
    ) -> Result<Iter<'t>> {
        let own = |b: Bound<&&[u8]>| b.cloned().map(<[u8]>::to_vec);
        Ok(Iter {
            src,
            cmp,
            vcmp: DupOrder::of(rec.flags).cmp,
            front: DupPos::new(&rec),
            back: DupPos::new(&rec),
            started: (false, false),
            lo: own(range.start_bound()),
            hi: own(range.end_bound()),
            rec,
            done: false,
            leaf: [None, None],
            main: [None, None],
            up: [None, None],
            yielded: 0,
        })
    }

    /// Takes the database's user-supplied value order, if it has one (Env::set_dup_order):
    /// the two ends compare pairs to find where they meet.
    pub(crate) fn custom_dup_order(
        mut self,
        env: &crate::state::EnvInner,
        db: Database,
    ) -> Result<Iter<'t>> {
        if let Some(v) = env.dup_order_of(db, &self.rec)? {
            self.vcmp = v;
        }
        Ok(self)
    }

    /// A step of end `side` inside the sub-tree leaf it walks, if the step stays there.
    #[inline]
    fn leaf_step(&mut self, side: usize) -> Result<Entry<'t>> {
        // The slot moves in place: the leaf view is not copied out and back each step.
        let Some((k, p, i)) = &mut self.leaf[side] else {
            return Ok(None);
        };
        let (k, p) = (*k, *p);
        let j = if side == 0 { *i + 1 } else { i.wrapping_sub(1) };
        if j >= p.nkeys() {
            return Ok(None);
        }
        *i = j;
        let pos = if side == 0 {
            &mut self.front
        } else {
            &mut self.back
        };
        // The position follows, for the other end's crossing test.
        pos.set_sub_slot(j);
        Ok(Some((k, p.key(j)?)))
    }

    /// A step of end `side` over the main tree of a database without sorted duplicates (the
    /// end holds its leaf: `main[side]` is set); None at the end of the tree. A step inside
    /// the leaf reads no page and leaves the position's slot behind (`main[side]` is the
    /// truth while set, see the field); leaving the leaf is out of line.
    #[inline(always)]
    fn main_step(&mut self, side: usize) -> Result<Entry<'t>> {
        let Some((p, i)) = &mut self.main[side] else {
            return Ok(None);
        };
        let j = if side == 0 { *i + 1 } else { i.wrapping_sub(1) };
        if j >= p.nkeys() {
            return self.main_leave(side);
        }
        *i = j;
        let p = *p;
        self.main_pair(p, j)
    }

    /// `main_step` past the edge of the leaf: the position catches up with the slot, steps
    /// into the neighbouring leaf from the page in hand (not read again), and the end keeps
    /// the leaf it lands in.
    #[inline(never)]
    fn main_leave(&mut self, side: usize) -> Result<Entry<'t>> {
        let Some((p, i)) = self.main[side] else {
            return Ok(None);
        };
        let pos = if side == 0 {
            &mut self.front
        } else {
            &mut self.back
        };
        pos.set_main_slot(i);
        let Some((p, i, up)) = pos.step_main(self.src, side == 0, p, self.up[side])? else {
            self.main[side] = None;
            self.up[side] = None;
            return Ok(None);
        };
        self.main[side] = Some((p, i));
        self.up[side] = up;
        self.main_pair(p, i)
    }

    /// Node `i` of main-tree leaf `p` as a pair, in a database without sorted duplicates
    /// (every walk of such a leaf reads its nodes here, so a crafted duplicates node is
    /// reported wherever the walk meets it).
    fn main_pair(&self, p: Page<'t>, i: usize) -> Result<Entry<'t>> {
        let n = p.node(i)?;
        if n.is_dups() {
            return Err(Error::corrupted(
                "duplicates node in a database without DUPSORT",
            ));
        }
        Ok(Some((n.key, crate::btree::node_value(self.src, &n)?)))
    }

    /// The pair under end `side` (for the other end's crossing test): from the leaf it holds
    /// when it holds one (its position's slot may lag behind), else through its position.
    fn end_current(&self, side: usize) -> Result<Entry<'t>> {
        if let Some((p, i)) = self.main[side] {
            if i >= p.nkeys() {
                return Ok(None);
            }
            return self.main_pair(p, i);
        }
        let pos = if side == 0 { &self.front } else { &self.back };
        pos.current(self.src)
    }

    /// The pair under end `side` after a move, remembering its sub-tree leaf.
    fn landed(&mut self, side: usize) -> Result<Entry<'t>> {
        let pos = if side == 0 { &self.front } else { &self.back };
        self.main[side] = pos.main_leaf(self.src)?;
        self.up[side] = None;
        if let Some((p, i)) = self.main[side] {
            // No sorted duplicates: the pair is the leaf's node, read from the page already
            // in hand (not looked up again through the position).
            self.leaf[side] = None;
            if i >= p.nkeys() {
                self.main[side] = None;
                return Ok(None);
            }
            return self.main_pair(p, i);
        }
        let e = pos.current(self.src)?;
        self.leaf[side] = match (e, pos.sub_leaf(self.src)?) {
            (Some((k, _)), Some((p, i))) => Some((k, p, i)),
            _ => None,
        };
        Ok(e)
    }

    #[inline]
    fn below_hi(&self, k: &[u8]) -> bool {
        match &self.hi {
            Bound::Unbounded => true,
            Bound::Included(h) => self.cmp.cmp(k, h) != Ordering::Greater,
            Bound::Excluded(h) => self.cmp.cmp(k, h) == Ordering::Less,
        }
    }
    fn above_lo(&self, k: &[u8]) -> bool {
        match &self.lo {
            Bound::Unbounded => true,
            Bound::Included(l) => self.cmp.cmp(k, l) != Ordering::Less,
            Bound::Excluded(l) => self.cmp.cmp(k, l) == Ordering::Greater,
        }
    }

    #[inline]
    fn step_front(&mut self) -> Result<Entry<'t>> {
        let moved = if !self.started.0 {
            self.started.0 = true;
            match &self.lo {
                Bound::Unbounded => self.front.first(self.src, &self.rec)?,
                Bound::Included(l) | Bound::Excluded(l) => {
                    let l = l.clone();
                    let (found, exact) = self.front.seek(self.src, &self.rec, &self.cmp, &l)?;
                    if found && exact && matches!(self.lo, Bound::Excluded(_)) {
                        self.front.next_nodup(self.src)?
                    } else {
                        found
                    }
                }
            }
        } else {
            if self.main[0].is_some() {
                return self.main_step(0);
            }
            if let Some(e) = self.leaf_step(0)? {
                return Ok(Some(e));
            }
            self.front.next(self.src)?
        };
        if !moved {
            return Ok(None);
        }
        self.landed(0)
    }

    fn step_back(&mut self) -> Result<Entry<'t>> {
        let moved = if !self.started.1 {
            self.started.1 = true;
            match &self.hi {
                Bound::Unbounded => self.back.last(self.src, &self.rec)?,
                Bound::Included(h) | Bound::Excluded(h) => {
                    let h = h.clone();
                    let (found, exact) = self.back.seek(self.src, &self.rec, &self.cmp, &h)?;
                    if found && exact && matches!(self.hi, Bound::Included(_)) {
                        self.back.last_dup(self.src)?
                    } else if found {
                        self.back.prev_nodup(self.src)?
                    } else {
                        self.back.last(self.src, &self.rec)?
                    }
                }
            }
        } else {
            if self.main[1].is_some() {
                return self.main_step(1);
            }
            if let Some(e) = self.leaf_step(1)? {
                return Ok(Some(e));
            }
            self.back.prev(self.src)?
        };
        if !moved {
            return Ok(None);
        }
        self.landed(1)
    }

    /// Counts a pair about to be yielded; an error once there are more than the record holds.
    #[inline]
    fn count_one(&mut self) -> Option<Error> {
        self.yielded += 1;
        (self.yielded > self.rec.entries).then(|| {
            self.done = true;
            Error::corrupted(format!(
                "iteration yields more than the {} entries the database records",
                self.rec.entries
            ))
        })
    }

    fn crossed(&self, k: &[u8], v: &[u8], forward: bool) -> bool {
        // Stop when the two ends meet.
        let started = if forward {
            self.started.1
        } else {
            self.started.0
        };
        if !started {
            return false;
        }
        match self.end_current(usize::from(forward)) {
            Ok(Some((ok, ov))) => {
                let o = self.cmp.cmp(k, ok).then_with(|| self.vcmp.cmp(v, ov));
                if forward {
                    o != Ordering::Less
                } else {
                    o != Ordering::Greater
                }
            }
            _ => true,
        }
    }
}

impl<'t> Iter<'t> {
    /// One step of `next` (`forward`) or `next_back`: the pair, if it is still inside the range
    /// and short of the other end's position; the iteration ends at the first that is not, and
    /// after an error. Inlined into both with `forward` a constant.
    #[inline(always)]
    fn advance(&mut self, forward: bool) -> Option<Result<(&'t [u8], &'t [u8])>> {
        if self.done {
            return None;
        }
        let side = usize::from(!forward);
        if let Some((p, i)) = &mut self.main[side] {
            // The common step of a walk over a database without duplicates: the next plain
            // node of the leaf in hand. With no bound on this side and the other end not
            // started, neither the range nor a crossing can end the walk here; the count
            // still bounds it. Anything else takes the general path below.
            let j = if forward { *i + 1 } else { i.wrapping_sub(1) };
            let open = if forward {
                matches!(self.hi, Bound::Unbounded) && !self.started.1
            } else {
                matches!(self.lo, Bound::Unbounded) && !self.started.0
            };
            if open && self.yielded < self.rec.entries {
                if let Some(kv) = p.leaf_pair(j) {
                    *i = j;
                    self.yielded += 1;
                    return Some(Ok(kv));
                }
            }
        }
        self.advance_general(forward)
    }

    /// `advance` past its fast path: leaving a leaf, ranges, both ends walking, duplicates,
    /// flagged nodes, the first step. Out of line, so that the fast path's caller keeps a
    /// small frame.
    #[inline(never)]
    fn advance_general(&mut self, forward: bool) -> Option<Result<(&'t [u8], &'t [u8])>> {
        let step = if forward {
            self.step_front()
        } else {
            self.step_back()
        };
        match step {
            Ok(Some((k, v)))
                if (if forward {
                    self.below_hi(k)
                } else {
                    self.above_lo(k)
                }) =>
            {
                if self.crossed(k, v, forward) {
                    self.done = true;
                    return None;
                }
                if let Some(e) = self.count_one() {
                    return Some(Err(e));
                }
                Some(Ok((k, v)))
            }
            Ok(_) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<'t> Iterator for Iter<'t> {
    type Item = Result<(&'t [u8], &'t [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        self.advance(true)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.advance(false)
    }
}
