//! A node's directory and the environment handle that the log store, the state machine and
//! the snapshot builder share.
//!
//! Layout (docs/replication.md, "Where the log, the vote and the state live"):
//! `NODE/CURRENT` names the live environment directory `NODE/env-NNNNNN/`; `NODE/snapshot/`
//! holds the current snapshot's data file, which the live environment's `raft.meta/snapshot`
//! names (with the snapshot's metadata).
//!
//! Invariants:
//! - `CURRENT` is only ever replaced by rename (write a temp file, flush, rename, flush the
//!   directory), so after any crash it names one complete environment.
//! - Every Cairn call holds [`Shared::env`] shared for its whole duration; only the swap of an
//!   installed snapshot holds it exclusively. So no transaction spans two environments, and
//!   nothing is written to an environment after it was retired.
//! - The live environment always holds `raft.log`, `raft.meta` (with `format` = [`FORMAT`])
//!   and `raft.sm`: created by [`open`] before anyone else sees the handle.

use crate::raft::storage::AnyError;
use crate::raft::{SnapshotMeta, StorageError};
use crate::types::FORMAT;
use cairn::{Database, DbFlags, Durability, Env, PutFlags, RwTxn};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard};

/// The Raft log: key = index, 8 bytes big-endian.
pub(crate) const LOG_DB: &str = "raft.log";
/// `vote`, `purged`, `committed`, `format`, `snapshot` (the current snapshot).
pub(crate) const META_DB: &str = "raft.meta";
/// `applied`, `membership`: written in the transaction that applies the entries.
pub(crate) const SM_DB: &str = "raft.sm";

/// Errors inside the crate: openraft's error payload, wrapped into a `StorageError` with its
/// subject where a trait method returns.
pub(crate) type Res<T> = Result<T, AnyError>;

/// An error of any std error type, as openraft carries it.
pub(crate) fn err<E: std::error::Error + 'static>(e: E) -> AnyError {
    AnyError::new(&e)
}

/// An error from a message.
pub(crate) fn msg(m: impl ToString) -> AnyError {
    AnyError::error(m)
}

/// The live environment and the name of its directory.
pub(crate) struct Live {
    pub(crate) env: Env,
    pub(crate) name: String,
}

/// The current snapshot: its metadata and its data file.
#[derive(Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct CurrentSnapshot {
    pub(crate) meta: SnapshotMeta,
    /// File name under `snapshot/`.
    pub(crate) file: String,
}

/// What one node's storage objects share.
pub struct Shared {
    pub(crate) dir: PathBuf,
    pub(crate) env: RwLock<Live>,
    /// The current snapshot as `raft.meta/snapshot` records it; the mutex orders changes of
    /// the record and of the snapshot files (taken before the handle, never after).
    pub(crate) snapshot: Mutex<Option<CurrentSnapshot>>,
    /// Files openraft is receiving snapshots into, deleted by the next install.
    pub(crate) receiving: Mutex<Vec<PathBuf>>,
    /// Source of unique file names (snapshot files, received data, environment directories).
    seq: AtomicU64,
    /// The state machine's extension, if the node has one (src/ext.rs); set before Raft runs.
    pub(crate) extension: std::sync::OnceLock<Arc<dyn crate::ext::Extension>>,
}

/// The options every environment of a node is opened with.
pub(crate) fn env_options() -> cairn::EnvOptions {
    // Logged mode (docs/design.md "Logged commits") with no timed flush: every write that must
    // be durable when its call returns (log appends, the vote, truncate, purge, the snapshot
    // record, an install) is a plain commit, made durable by one flush of the commit log's
    // record, not of its pages. `apply` (sm.rs) and `save_committed` (log.rs) commit with
    // `commit_no_sync`: their records ride on the next flushed one, and what they write is
    // rebuilt from the flushed Raft log after a power loss anyway (docs/replication.md, "Apply
    // is idempotent across crashes"). A killed process loses nothing either way: its commits
    // are in the page cache. More handles than the default 128, since every client database
    // takes one. The page size is pinned: it sets the largest key, and a batch refused for its
    // key size must be refused on every replica alike (sm.rs).
    Env::options()
        .max_dbs(4096)
        .page_size(4096)
        .durability(Durability::Logged)
        .sync_every(None)
        .sync_every_bytes(None)
}

/// Commits `w` durably before returning: this commit and every earlier one (the unflushed
/// applies too: their log records precede this one's, or, when one of them could not be
/// logged, this commit flushes the data file instead) survive a power loss. One fdatasync.
pub(crate) fn commit_durable(w: RwTxn<'_>) -> cairn::Result<()> {
    w.commit()
}

impl Shared {
    /// Runs `f` with the live environment, holding the handle shared.
    pub(crate) fn with_env<R>(&self, f: impl FnOnce(&Env) -> R) -> R {
        let live = self.live();
        f(&live.env)
    }

    pub(crate) fn live(&self) -> RwLockReadGuard<'_, Live> {
        // A panic while holding the lock left no half-done state the lock protects (the swap
        // publishes by assignment at its end), so poisoning is ignored.
        self.env.read().unwrap_or_else(|p| p.into_inner())
    }

    /// A fresh number for a file or directory name, larger than any used before.
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn snapshot_dir(&self) -> PathBuf {
        self.dir.join("snapshot")
    }

    /// Runs blocking Cairn work on tokio's blocking pool: commits flush, and a flush inside an
    /// async task would stall the runtime's workers.
    pub(crate) async fn blocking<R, F>(self: &Arc<Self>, f: F) -> Result<R, StorageError>
    where
        R: Send + 'static,
        F: FnOnce(&Shared) -> Result<R, StorageError> + Send + 'static,
    {
        let s = Arc::clone(self);
        tokio::task::spawn_blocking(move || f(&s))
            .await
            .map_err(|e| crate::raft::storage::StorageIOError::write(err(e)).into())
            .and_then(|r| r)
    }
}

/// Opens the named Raft database of `w`, creating it.
pub(crate) fn db(w: &mut RwTxn<'_>, name: &str) -> cairn::Result<Database> {
    w.create_db(Some(name), DbFlags::CREATE)
}

/// Replaces `path` with `bytes` atomically and durably (temp file, flush, rename, flush of the
/// directory).
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    sync_dir(path.parent().expect("a file in a directory"))
}

/// Flushes a directory's entries (a rename or a new file in it).
pub(crate) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

/// Creates the Raft databases of `env` if missing and checks the encoding's version.
pub(crate) fn prepare(env: &Env) -> Res<()> {
    let mut w = env.write_txn().map_err(err)?;
    let meta = db(&mut w, META_DB).map_err(err)?;
    db(&mut w, LOG_DB).map_err(err)?;
    db(&mut w, SM_DB).map_err(err)?;
    match w.get(meta, b"format").map_err(err)? {
        Some(v) => {
            let found = u32::from_be_bytes(
                v.try_into()
                    .map_err(|_| msg("raft.meta/format is not 4 bytes"))?,
            );
            if found != FORMAT {
                return Err(msg(format!(
                    "raft.meta/format is {found}; this build reads {FORMAT}"
                )));
            }
            w.abort();
            return Ok(());
        }
        None => w
            .put(meta, b"format", &FORMAT.to_be_bytes(), PutFlags::empty())
            .map_err(err)?,
    }
    commit_durable(w).map_err(err)
}

/// The current snapshot recorded in `env`.
fn read_snapshot_record(env: &Env) -> Res<Option<CurrentSnapshot>> {
    let r = env.read_txn().map_err(err)?;
    let meta = r.open_db(Some(META_DB)).map_err(err)?;
    match r.get(meta, b"snapshot").map_err(err)? {
        Some(v) => Ok(Some(crate::types::decode(v).map_err(msg)?)),
        None => Ok(None),
    }
}

/// Records `cur` as the current snapshot in `w` (`raft.meta/snapshot`).
pub(crate) fn write_snapshot_record(w: &mut RwTxn<'_>, cur: &CurrentSnapshot) -> Res<()> {
    let meta = db(w, META_DB).map_err(err)?;
    let v = crate::types::encode(cur).map_err(msg)?;
    w.put(meta, b"snapshot", &v, PutFlags::empty()).map_err(err)
}

/// Opens (creating if needed) the node directory `dir`, clearing what a crash left half done:
/// environment directories `CURRENT` does not name, received snapshot data, snapshot files
/// the pointer does not name.
pub fn open(dir: &Path) -> Res<Arc<Shared>> {
    std::fs::create_dir_all(dir.join("snapshot")).map_err(err)?;
    let seq0 = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(1);
    let current = dir.join("CURRENT");
    let name = match std::fs::read_to_string(&current) {
        Ok(s) => s.trim().to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let name = format!("env-{seq0:020}");
            std::fs::create_dir_all(dir.join(&name)).map_err(err)?;
            replace_file(&current, name.as_bytes()).map_err(err)?;
            name
        }
        Err(e) => return Err(err(e)),
    };
    let env = env_options().open(dir.join(&name)).map_err(err)?;
    prepare(&env)?;
    for e in std::fs::read_dir(dir).map_err(err)? {
        let e = e.map_err(err)?;
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("env-") && n != name {
            std::fs::remove_dir_all(e.path()).map_err(err)?;
        }
    }
    let snapshot = read_snapshot_record(&env)?;
    let snap_dir = dir.join("snapshot");
    for e in std::fs::read_dir(&snap_dir).map_err(err)? {
        let e = e.map_err(err)?;
        let n = e.file_name().to_string_lossy().into_owned();
        if snapshot.as_ref().is_none_or(|s| s.file != n) {
            std::fs::remove_file(e.path()).map_err(err)?;
        }
    }
    Ok(Arc::new(Shared {
        dir: dir.to_path_buf(),
        env: RwLock::new(Live { env, name }),
        snapshot: Mutex::new(snapshot),
        receiving: Mutex::new(Vec::new()),
        // seq0 may have named the environment just created; later names come after it.
        seq: AtomicU64::new(seq0 + 1),
        extension: std::sync::OnceLock::new(),
    }))
}
