//! Snapshots: Cairn hot copies of the node's environment, built while writers go on and
//! installed on a follower by swapping in a new environment (docs/replication.md,
//! "Snapshots").
//!
//! Invariants:
//! - A snapshot's metadata (last log id, membership) is read in the read transaction that
//!   the copy is taken from, so it describes exactly the data the file holds.
//! - `raft.meta/snapshot` in the live environment names the current snapshot's file and holds
//!   its metadata; it is written after the file is flushed, and a file it no longer names is
//!   deleted only after that commit (at open, every file it does not name is). An install
//!   writes it in the commit that carries the log over, so switching `CURRENT` switches the
//!   data and the snapshot record together. The snapshot mutex orders these changes; a
//!   snapshot built from an environment that an install replaced meanwhile (older than the
//!   current one) is not recorded.
//! - An install keeps this node's vote and log: the copy's `raft.log` and `raft.meta` (the
//!   sender's) are emptied and this node's copied in, in one commit, before `CURRENT` is
//!   switched; the handle is held exclusively from the copy of the log to the switch, so no
//!   log write falls between them.

use crate::raft::storage::{RaftSnapshotBuilder, StorageIOError};
use crate::raft::{Snapshot, SnapshotMeta, StorageError};
use crate::sm::read_applied;
use crate::store::{
    commit_durable, db, env_options, err, msg, prepare, replace_file, sync_dir,
    write_snapshot_record, CurrentSnapshot, Live, Res, Shared, LOG_DB, META_DB,
};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::AsyncSeekExt;

/// Builds snapshots of one node's state machine.
pub struct SnapshotBuilder {
    pub(crate) shared: Arc<Shared>,
}

fn snap_err(e: openraft::AnyError) -> StorageError {
    StorageIOError::write_snapshot(None, e).into()
}

/// Records a built snapshot `cur` as the current one, deleting the file of the one it
/// replaces; a snapshot older than the current one (built while an install replaced the
/// environment) is not recorded.
fn publish_built(s: &Shared, cur: CurrentSnapshot) -> Res<()> {
    let mut slot = s.snapshot.lock().unwrap_or_else(|p| p.into_inner());
    if slot
        .as_ref()
        .is_some_and(|c| c.meta.last_log_id > cur.meta.last_log_id)
    {
        // The caller holds the file open; it goes when the handle does.
        let _ = std::fs::remove_file(s.snapshot_dir().join(&cur.file));
        return Ok(());
    }
    s.with_env(|env| -> Res<()> {
        let mut w = env.write_txn().map_err(err)?;
        write_snapshot_record(&mut w, &cur)?;
        commit_durable(w).map_err(err)
    })?;
    replace_current(s, &mut slot, cur);
    Ok(())
}

/// Puts `cur` in the snapshot slot and deletes the file of the snapshot it replaces.
fn replace_current(s: &Shared, slot: &mut Option<CurrentSnapshot>, cur: CurrentSnapshot) {
    if let Some(old) = slot.replace(cur) {
        if Some(&old.file) != slot.as_ref().map(|c| &c.file) {
            let _ = std::fs::remove_file(s.snapshot_dir().join(old.file));
        }
    }
}

/// Copies the live environment into a new snapshot file; returns the snapshot, its data
/// opened before it was published (so a later snapshot deleting the file cannot pull it away).
fn build(s: &Shared) -> Res<(SnapshotMeta, std::fs::File)> {
    let seq = s.next_seq();
    let file = format!("snap-{seq:020}.cairn");
    let path = s.snapshot_dir().join(&file);
    let meta = s.with_env(|env| -> Res<SnapshotMeta> {
        let r = env.read_txn().map_err(err)?;
        let (last_log_id, last_membership) = read_applied(&r)?;
        // Compacting: the copy holds no free pages, so it is what the data weighs.
        r.copy_to_file(&path, true).map_err(err)?;
        let snapshot_id = match last_log_id {
            Some(l) => format!(
                "{}-{}-{}-{seq}",
                l.leader_id.term, l.leader_id.node_id, l.index
            ),
            None => format!("none-{seq}"),
        };
        Ok(SnapshotMeta {
            last_log_id,
            last_membership,
            snapshot_id,
        })
    })?;
    let f = std::fs::File::open(&path).map_err(err)?;
    publish_built(
        s,
        CurrentSnapshot {
            meta: meta.clone(),
            file,
        },
    )?;
    Ok((meta, f))
}

impl RaftSnapshotBuilder<crate::raft::TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot, StorageError> {
        let (meta, f) = self.shared.blocking(|s| build(s).map_err(snap_err)).await?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(f)),
        })
    }
}

/// The current snapshot, its data opened for reading.
pub(crate) async fn current(s: &Arc<Shared>) -> Result<Option<Snapshot>, StorageError> {
    s.blocking(|s| {
        let slot = s.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        let Some(cur) = slot.as_ref() else {
            return Ok(None);
        };
        let f = std::fs::File::open(s.snapshot_dir().join(&cur.file))
            .map_err(|e| StorageIOError::read_snapshot(None, err(e)))?;
        Ok(Some(Snapshot {
            meta: cur.meta.clone(),
            snapshot: Box::new(tokio::fs::File::from_std(f)),
        }))
    })
    .await
}

/// A new file for openraft to write a snapshot's chunks into as they arrive.
pub(crate) async fn begin_receiving(s: &Arc<Shared>) -> Result<Box<tokio::fs::File>, StorageError> {
    let path = s
        .snapshot_dir()
        .join(format!("recv-{:020}.tmp", s.next_seq()));
    let f = tokio::fs::File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .await
        .map_err(|e| snap_err(err(e)))?;
    s.receiving
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(path);
    Ok(Box::new(f))
}

/// Installs the snapshot whose data `data` holds (from its start): see the module's
/// invariants and docs/replication.md, "Snapshots".
pub(crate) async fn install(
    s: &Arc<Shared>,
    meta: &SnapshotMeta,
    mut data: Box<tokio::fs::File>,
) -> Result<(), StorageError> {
    // Receive files registered so far belong to this snapshot or to abandoned ones: openraft
    // receives one snapshot at a time.
    let received: Vec<PathBuf> =
        std::mem::take(&mut *s.receiving.lock().unwrap_or_else(|p| p.into_inner()));
    let file = format!("snap-{:020}.cairn", s.next_seq());
    let path = s.snapshot_dir().join(&file);
    // The data is one of the receive files (begin_receiving): found by its identity, it is
    // flushed and renamed into place, not copied (a copy wrote the whole snapshot a second
    // time and flushed it again: a fifth of a 1M-key rebuild). A file of another origin is
    // copied.
    let id = data.metadata().await.map_err(|e| snap_err(err(e)))?;
    let own = received.iter().position(|p| {
        std::fs::metadata(p).is_ok_and(|m| m.dev() == id.dev() && m.ino() == id.ino())
    });
    match own {
        Some(i) => {
            data.sync_all().await.map_err(|e| snap_err(err(e)))?;
            tokio::fs::rename(&received[i], &path)
                .await
                .map_err(|e| snap_err(err(e)))?;
            sync_dir(&s.snapshot_dir()).map_err(|e| snap_err(err(e)))?;
        }
        None => {
            let mut out = tokio::fs::File::create(&path)
                .await
                .map_err(|e| snap_err(err(e)))?;
            data.seek(std::io::SeekFrom::Start(0))
                .await
                .map_err(|e| snap_err(err(e)))?;
            tokio::io::copy(&mut *data, &mut out)
                .await
                .map_err(|e| snap_err(err(e)))?;
            out.sync_all().await.map_err(|e| snap_err(err(e)))?;
        }
    }
    drop(data);
    let meta = meta.clone();
    s.blocking(move |s| {
        let cur = CurrentSnapshot { meta, file };
        let mut slot = s.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        let done = swap_in(s, &path, &cur).map(|()| replace_current(s, &mut slot, cur));
        drop(slot);
        for p in received {
            let _ = std::fs::remove_file(p);
        }
        done.map_err(snap_err)
    })
    .await
}

/// Makes the snapshot file at `snap` the node's live environment, keeping the node's log and
/// vote, and retires the old one.
fn swap_in(s: &Shared, snap: &Path, cur: &CurrentSnapshot) -> Res<()> {
    let meta = &cur.meta;
    let name = format!("env-{:020}", s.next_seq());
    let dir = s.dir.join(&name);
    std::fs::create_dir(&dir).map_err(err)?;
    let (data, _) = env_options().files(&dir);
    std::fs::copy(snap, &data).map_err(err)?;
    let env = env_options().open(&dir).map_err(err)?;
    {
        let r = env.read_txn().map_err(err)?;
        let (applied, _) = read_applied(&r)?;
        if applied != meta.last_log_id {
            return Err(msg(format!(
                "snapshot {}: its data is applied up to {applied:?}, its metadata says {:?}",
                meta.snapshot_id, meta.last_log_id
            )));
        }
    }
    let mut live = s.env.write().unwrap_or_else(|p| p.into_inner());
    {
        let old = live.env.read_txn().map_err(err)?;
        let mut w = env.write_txn().map_err(err)?;
        for name in [LOG_DB, META_DB] {
            let to = db(&mut w, name).map_err(err)?;
            w.clear_db(to).map_err(err)?;
            let from = old.open_db(Some(name)).map_err(err)?;
            for item in old.iter(from).map_err(err)? {
                let (k, v) = item.map_err(err)?;
                w.put(to, k, v, cairn::PutFlags::APPEND).map_err(err)?;
            }
        }
        write_snapshot_record(&mut w, cur)?;
        commit_durable(w).map_err(err)?;
    }
    prepare(&env)?;
    sync_dir(&dir).map_err(err)?;
    sync_dir(&s.dir).map_err(err)?;
    replace_file(&s.dir.join("CURRENT"), name.as_bytes()).map_err(err)?;
    let old = std::mem::replace(&mut *live, Live { env, name });
    drop(live);
    let old_dir = s.dir.join(&old.name);
    drop(old);
    std::fs::remove_dir_all(old_dir).map_err(err)
}
