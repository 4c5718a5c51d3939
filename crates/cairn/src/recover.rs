//! Recovery (docs/design.md, "Opening after a crash"): read the three meta slots, try valid
//! ones newest first, and take the first whose written pages all verify (number, writer,
//! checksum). Work is bounded by what the last commits wrote, never by the file's size. Also
//! the commit's own lists (written runs, list pages) and the loading of its free tree.

use crate::alloc::{self, FreeState};
use crate::btree::cursor::Position;
use crate::error::{Error, Result};
use crate::format::{self, Meta, MetaSlot, WrittenRun, META_SLOTS, SECTOR};
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::storage::Storage;

/// Whether a commit may be used: steady commits always (they are verified), unsteady ones only
/// if written during this boot (their pages are in the page cache even if never flushed).
pub(crate) fn trusted(m: &Meta, boot: &[u8; format::BOOT_ID]) -> bool {
    m.is_steady() || (m.boot_id == *boot && *boot != [0; format::BOOT_ID])
}

/// The valid commit records in the data file's slots, newest first, and each slot's txnid.
pub(crate) fn read_metas(storage: &dyn Storage) -> Result<(Vec<Meta>, [u64; META_SLOTS])> {
    let mut head = [0u8; META_SLOTS * SECTOR];
    storage.read_at(0, &mut head)?;
    let mut slots = [0u64; META_SLOTS];
    let mut v = Vec::new();
    for (i, slot) in slots.iter_mut().enumerate() {
        if let MetaSlot::Valid(m) = Meta::decode(&head[i * SECTOR..(i + 1) * SECTOR]) {
            *slot = m.txnid;
            v.push(m);
        }
    }
    v.sort_by_key(|m| std::cmp::Reverse(m.txnid));
    Ok((v, slots))
}

/// The current commit's record: its published copy, or the data file's if that copy is torn.
/// Retried while commits move on underneath (bounded: each retry means a newer commit).
pub(crate) fn current_meta(shared: &Shared, storage: &dyn Storage) -> Result<Meta> {
    for _ in 0..1000 {
        let t = shared.current();
        if let Some(m) = shared.read_cell(t).or_else(|| meta_from_file(storage, t)) {
            return Ok(m);
        }
        std::thread::yield_now();
    }
    Err(Error::corrupted(format!(
        "commit {} published but unreadable",
        shared.current()
    )))
}

/// Commit `t`'s record from the data file (when the lock file's copy is torn).
pub(crate) fn meta_from_file(storage: &dyn Storage, t: u64) -> Option<Meta> {
    read_metas(storage)
        .ok()?
        .0
        .into_iter()
        .find(|m| m.txnid == t)
}

/// Picks the newest commit that verifies; returns it and the txnid held by each slot.
pub(crate) fn recover(storage: &dyn Storage) -> Result<(Meta, [u64; META_SLOTS])> {
    recover_with(storage, None)
}

/// Whether commit `m` is known whole without reading its pages: it is the commit the lock
/// file's last session left current (`published`, read before the table is reset), and its
/// pages cannot have been lost since. A record is published only after its commit succeeded
/// (pages and meta written, and flushed if steady) or after a recovery accepted it, and pages
/// reachable from the current commit are never rewritten; so a steady commit is whole on the
/// disk, and an unsteady one is whole in the page cache as long as the system has not
/// rebooted (its boot id is this boot's, as `trusted` requires). docs/design.md, "Opening:
/// what it costs".
pub(crate) fn published_whole(
    m: &Meta,
    published: Option<&Meta>,
    boot: &[u8; format::BOOT_ID],
) -> bool {
    let this_boot = m.boot_id == *boot && *boot != [0; format::BOOT_ID];
    published.is_some_and(|p| p == m) && (m.is_steady() || this_boot)
}

/// [`recover`] with the commit the lock file's last session published, if it could be read:
/// that commit, if it is the newest valid one, is accepted without reading its pages
/// ([`published_whole`]), so a clean open or one after a process crash costs O(1) in the
/// size of the last commit as well as the file's.
pub(crate) fn recover_with(
    storage: &dyn Storage,
    published: Option<&Meta>,
) -> Result<(Meta, [u64; META_SLOTS])> {
    let len = storage.len();
    let mut head = vec![0u8; (META_SLOTS * SECTOR).min(len as usize)];
    storage.read_at(0, &mut head)?;
    if len < (META_SLOTS * SECTOR) as u64 {
        return Err(if format::has_magic(&head) {
            Error::corrupted(format!("file of {len} bytes is truncated"))
        } else {
            Error::NotCairn {
                path: "data file".into(),
            }
        });
    }
    let mut valid = Vec::new();
    let mut slots = [0u64; META_SLOTS];
    let mut damage = Vec::new();
    let mut foreign = 0;
    for (i, slot) in slots.iter_mut().enumerate() {
        match Meta::decode(&head[i * SECTOR..(i + 1) * SECTOR]) {
            MetaSlot::Valid(m) => {
                *slot = m.txnid;
                valid.push(m);
            }
            MetaSlot::Damaged(why) => damage.push(format!("slot {i}: {why}")),
            MetaSlot::Foreign => foreign += 1,
        }
    }
    if foreign == META_SLOTS {
        return Err(Error::NotCairn {
            path: "data file".into(),
        });
    }
    if valid.is_empty() {
        // A version mismatch is reported as such.
        let v = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if !format::readable_version(v) && format::has_magic(&head) {
            return Err(Error::VersionMismatch {
                found: v,
                supported: format::FORMAT_VERSION,
            });
        }
        return Err(Error::corrupted(format!(
            "no valid commit record ({})",
            damage.join("; ")
        )));
    }
    valid.sort_by_key(|m| std::cmp::Reverse(m.txnid));
    // Each candidate is verified on its own page size: a damaged newest meta claiming another
    // (valid) size must not hide the older commits.
    let mut reasons = Vec::new();
    let boot = storage.boot_id();
    for m in &valid {
        if !trusted(m, &boot) {
            reasons.push(format!(
                "commit {}: not flushed before the system restarted",
                m.txnid
            ));
            continue;
        }
        let checked = if published_whole(m, published, &boot) {
            fits(storage, m)
        } else {
            verify_commit(storage, m)
        };
        match checked {
            Ok(()) => return Ok((m.clone(), slots)),
            Err(e) => reasons.push(format!("commit {}: {e}", m.txnid)),
        }
    }
    Err(Error::corrupted(format!(
        "no commit verifies: {}",
        reasons.join("; ")
    )))
}

/// Whether a commit's pages fit in the file (a crash while growing or a truncated copy can
/// leave a meta past the end).
fn fits(storage: &dyn Storage, m: &Meta) -> Result<()> {
    if m.npages
        .checked_mul(m.page_size as u64)
        .is_none_or(|end| end > storage.len())
    {
        return Err(Error::corrupted(format!(
            "{} pages do not fit in the file",
            m.npages
        )));
    }
    Ok(())
}

/// Verifies that every page a commit wrote reached the disk whole.
pub(crate) fn verify_commit(storage: &dyn Storage, m: &Meta) -> Result<()> {
    let ps = m.page_size as u64;
    fits(storage, m)?;
    for r in written_runs(storage, m)? {
        let end = r.start.saturating_add(u64::from(r.len));
        if r.len == 0 || r.start == 0 || end > m.npages {
            return Err(Error::corrupted(format!(
                "written run {}+{} out of range",
                r.start, r.len
            )));
        }
        // A run holds whole pages and overflow runs back to back; each is verified alone.
        let mut p = r.start;
        while p < end {
            let id = format::page_id(storage.bytes(p * ps, format::PAGE_FIELDS)?)?;
            if id.span == 0 || p + id.span > end {
                return Err(Error::corrupted(format!(
                    "page {p}: span {} leaves its run",
                    id.span
                )));
            }
            let b = storage.bytes(p * ps, (id.span * ps) as usize)?;
            format::verify_page(b, p, Some(r.txnid))?;
            p += id.span;
        }
    }
    Ok(())
}

/// The runs a commit lists, verifying its list pages on the way.
pub(crate) fn written_runs(storage: &dyn Storage, m: &Meta) -> Result<Vec<WrittenRun>> {
    if m.list_head == 0 {
        return Ok(m.inline_runs.clone());
    }
    let ps = m.page_size as u64;
    let mut out = Vec::new();
    let mut pg = m.list_head;
    // Bounded by the snapshot's page count: a cycle ends in an error.
    for _ in 0..m.npages {
        if pg == 0 {
            break;
        }
        if pg >= m.npages {
            return Err(Error::corrupted(format!("list page {pg} out of range")));
        }
        let b = storage.bytes(pg * ps, ps as usize)?;
        format::verify_page(b, pg, Some(m.txnid))?;
        let (runs, next) = format::read_list_page(b)?;
        out.extend(runs);
        pg = next;
    }
    if out.len() != m.run_count as usize || pg != 0 {
        return Err(Error::corrupted("commit list does not match its count"));
    }
    Ok(out)
}

/// List pages of a commit (freed by the next commit).
pub(crate) fn list_pages(storage: &dyn Storage, m: &Meta) -> Result<Vec<u64>> {
    let ps = m.page_size as u64;
    let mut out = Vec::new();
    let mut pg = m.list_head;
    while pg != 0 {
        if out.len() as u64 >= m.npages || pg >= m.npages {
            return Err(Error::corrupted("commit list chain"));
        }
        out.push(pg);
        let b = storage.bytes(pg * ps, ps as usize)?;
        pg = format::read_list_page(b)?.1;
    }
    Ok(out)
}

/// Loads the free tree of a commit.
pub(crate) fn load_free(storage: &dyn Storage, meta: &Meta, free: &mut FreeState) -> Result<()> {
    let snap = Snapshot::new(storage, meta.clone());
    let mut pos = Position::new();
    let mut more = pos.first(&snap, &meta.free)?;
    let mut n = 0u64;
    while more {
        let (k, v) = pos
            .current(&snap)?
            .ok_or_else(|| Error::corrupted("free tree cursor"))?;
        alloc::decode_free_record(meta.version, k, v, |start, run| {
            if run.len == 0
                || start == 0
                || start.checked_add(run.len).is_none_or(|e| e > meta.npages)
            {
                return Err(Error::corrupted(format!(
                    "free run {start}+{} out of range",
                    run.len
                )));
            }
            if free.overlaps(start, run.len) {
                return Err(Error::corrupted(format!(
                    "free run {start} overlaps another"
                )));
            }
            free.load(start, run);
            n += 1;
            if n > meta.npages {
                return Err(Error::corrupted("free tree has more runs than pages"));
            }
            Ok(())
        })?;
        more = pos.next(&snap)?;
    }
    Ok(())
}
