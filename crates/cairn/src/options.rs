//! Options for opening an environment, and its durability mode.

use std::path::PathBuf;

/// When commits reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every commit is flushed (one fdatasync) before `commit` returns.
    #[default]
    Durable,
    /// Commits are not flushed; a power loss may lose the latest commits but never corrupts
    /// the file: pages of the last flushed commit are kept until the next flush.
    Lazy,
    /// Every commit is durable before `commit` returns, at the cost of what it changed: the
    /// pages are written as in lazy mode (not flushed) and a record of the transaction's
    /// effects (its puts and deletes) is appended to a log file beside the data file and
    /// flushed. The data file is flushed as in lazy mode ([`EnvOptions::sync_every`], a full
    /// log, [`Env::sync`](crate::Env::sync), closing); after a power loss the first handle to
    /// open the environment replays the log onto the last flushed commit (docs/design.md,
    /// "Logged commits"). A transaction whose effects the log cannot carry (creating, emptying
    /// or dropping a database, a RESERVE put, a database with a user-supplied order) commits
    /// as in durable mode.
    Logged,
}

impl Durability {
    /// Whether commits leave their pages unflushed (lazy and logged modes).
    pub(crate) fn lazy_pages(self) -> bool {
        matches!(self, Durability::Lazy | Durability::Logged)
    }
}

/// Options for opening an environment (see [`Env::options`](crate::Env::options)).
#[derive(Clone, Debug)]
pub struct EnvOptions {
    pub(crate) page_size: usize,
    pub(crate) max_dbs: u32,
    pub(crate) max_readers: u32,
    pub(crate) max_size: Option<u64>,
    pub(crate) initial_size: u64,
    pub(crate) durability: Durability,
    pub(crate) read_only: bool,
    pub(crate) no_subdir: Option<bool>,
    pub(crate) sync_bytes: Option<u64>,
    pub(crate) space_flush: bool,
    pub(crate) sync_every: Option<std::time::Duration>,
    /// Whether `sync_every` was set (else logged mode uses [`DEFAULT_LOGGED_SYNC_PERIOD`]).
    pub(crate) sync_every_set: bool,
    pub(crate) reserve: u64,
    pub(crate) reserve_set: bool,
    pub(crate) map_writes: bool,
    pub(crate) file_names: FileNames,
    pub(crate) no_lock: bool,
    pub(crate) group_max_writes: usize,
    pub(crate) group_max_time: std::time::Duration,
    pub(crate) migrate_lmdb: bool,
    pub(crate) log_size: u64,
}

/// The names of the two files in an environment's directory (when the path is a directory;
/// with [`EnvOptions::no_subdir`] they are the path itself and the path with `-lock` added).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FileNames {
    /// `data.cairn` and `lock.cairn`, unless the directory holds `data.mdb` and no
    /// `data.cairn`: then LMDB's names (so a tool opens either kind of directory).
    #[default]
    Auto,
    /// `data.cairn` and `lock.cairn`.
    Cairn,
    /// `data.mdb` and `lock.mdb`, LMDB's names (what the LMDB faces use, so that programs
    /// and tests that open those files by name find them).
    Lmdb,
}

/// Default of [`EnvOptions::sync_every`]: in lazy mode, the first commit a second or more after
/// the last flush flushes, so a power loss loses about the last second of commits at most.
/// Time, not bytes written: a flush writes every page changed since the previous one and pins
/// the flushed snapshot's pages until the next, so flushing after a fixed amount of writing
/// taxed heavy writers most (64 MiB: 27% slower random puts, 1,000 a transaction, than this
/// default; docs/bench/causes.md) while bounding nothing a user reasons about.
pub const DEFAULT_SYNC_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

/// The flush period of logged mode unless [`EnvOptions::sync_every`] sets one: commits are
/// durable through the log, so the data file is flushed to bound the log and the replay after
/// a power loss (a full log flushes too), not to bound what a power loss takes. Each flush
/// writes every page changed since the previous one, so flushing rarely saves most of the
/// writing a random load does (docs/bench/causes.md).
pub const DEFAULT_LOGGED_SYNC_PERIOD: std::time::Duration = std::time::Duration::from_secs(30);

/// Default of [`EnvOptions::log_size`]: when a record does not fit, the commit is made steady
/// instead, which starts the log over.
pub const DEFAULT_LOG_SIZE: u64 = 64 << 20;

/// Default of [`EnvOptions::group_max_writes`]. Chosen by measurement (docs/bench/group).
pub const DEFAULT_GROUP_MAX_WRITES: usize = 1024;
/// Default of [`EnvOptions::group_max_time`]. Chosen by measurement (docs/bench/group).
pub const DEFAULT_GROUP_MAX_TIME: std::time::Duration = std::time::Duration::from_millis(10);

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            page_size: 4096,
            max_dbs: 128,
            max_readers: 126,
            max_size: None,
            initial_size: 0,
            durability: Durability::Durable,
            read_only: false,
            no_subdir: None,
            sync_bytes: None,
            space_flush: false,
            sync_every: Some(DEFAULT_SYNC_PERIOD),
            sync_every_set: false,
            reserve: 1 << 40,
            reserve_set: false,
            map_writes: true,
            file_names: FileNames::Auto,
            no_lock: false,
            group_max_writes: DEFAULT_GROUP_MAX_WRITES,
            group_max_time: DEFAULT_GROUP_MAX_TIME,
            migrate_lmdb: false,
            log_size: DEFAULT_LOG_SIZE,
        }
    }
}

impl EnvOptions {
    /// Page size of a new file: a power of two from 4 KiB to 64 KiB (default 4 KiB).
    pub fn page_size(mut self, n: usize) -> Self {
        self.page_size = n;
        self
    }
    /// Largest number of named database handles open at once in this environment (default
    /// 128; LMDB's mdb_env_set_maxdbs): opening one more fails with [`Error::DbsFull`]. The
    /// file itself holds any number of named databases.
    pub fn max_dbs(mut self, n: u32) -> Self {
        self.max_dbs = n;
        self
    }
    /// Reader table size (default 126).
    pub fn max_readers(mut self, n: u32) -> Self {
        self.max_readers = n;
        self
    }
    /// Upper limit of the file size; past it writes fail with [`Error::MapFull`](crate::Error::MapFull). No limit by
    /// default: the file grows as needed.
    pub fn max_size(mut self, bytes: Option<u64>) -> Self {
        self.max_size = bytes;
        self
    }
    /// Size the file is grown to at creation.
    pub fn initial_size(mut self, bytes: u64) -> Self {
        self.initial_size = bytes;
        self
    }
    /// Durability mode (default [`Durability::Durable`]).
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// In lazy mode, make a commit steady (flushed) once this many bytes were written since
    /// the last flush (default `None`: no limit by bytes). With `sync_every(None)` too, only
    /// [`Env::sync`](crate::Env::sync) and closing the environment flush.
    pub fn sync_every_bytes(mut self, bytes: Option<u64>) -> Self {
        self.sync_bytes = bytes;
        self
    }
    /// In lazy mode with an automatic flush (`sync_every` or `sync_every_bytes`), also make a
    /// commit steady once the pages the last flushed commit holds (freed since, kept for
    /// recovery) reach a quarter of the pages in use (default off). The file then stays
    /// within about 4/3 of the tree instead of up to twice it, at the price of more flushes:
    /// ~1.9x the bytes written on a 1M-key random fill (docs/design.md, "Lazy commits").
    pub fn flush_for_space(mut self, on: bool) -> Self {
        self.space_flush = on;
        self
    }
    /// In lazy and logged modes, make a commit steady once this much time has passed since the
    /// last flush (checked at commit; no background thread). Default [`DEFAULT_SYNC_PERIOD`]
    /// (1 s) in lazy mode, [`DEFAULT_LOGGED_SYNC_PERIOD`] (30 s) in logged mode; `None`: no
    /// limit by time.
    pub fn sync_every(mut self, period: Option<std::time::Duration>) -> Self {
        self.sync_every = period;
        self.sync_every_set = true;
        self
    }

    /// The flush period in effect: in logged mode, unless set, [`DEFAULT_LOGGED_SYNC_PERIOD`].
    pub(crate) fn sync_period(&self) -> Option<std::time::Duration> {
        match self.durability {
            Durability::Logged if !self.sync_every_set => Some(DEFAULT_LOGGED_SYNC_PERIOD),
            _ => self.sync_every,
        }
    }
    /// In lazy mode, whether write transactions write their pages in place through a
    /// writable shared map of the data file (default true), as LMDB's MDB_WRITEMAP does,
    /// instead of copying them into the file with pwrite at commit. A commit then costs no
    /// write call per run of pages: a random load that rewrites most of its pages each commit
    /// ran ~20% faster (docs/bench/causes.md). Crash safety is unchanged (pages of the
    /// snapshots anyone may need are never written either way). It applies only where the
    /// file system allocates blocks ahead (fallocate), so that a store can never meet a full
    /// disk; elsewhere, in durable mode and read-only, pages go through pwrite.
    pub fn map_writes(mut self, yes: bool) -> Self {
        self.map_writes = yes;
        self
    }

    /// In logged mode, the size of the log file (default 64 MiB, at least 64 KiB): a commit
    /// whose record does not fit after the records since the last flush flushes the data file
    /// instead (and the log starts over). Replay after a power loss reads at most this much.
    pub fn log_size(mut self, bytes: u64) -> Self {
        self.log_size = bytes.max(64 << 10);
        self
    }

    /// Whether write transactions try to write pages in place (see [`Self::map_writes`]).
    pub(crate) fn wants_map_writes(&self) -> bool {
        self.map_writes && self.durability.lazy_pages() && !self.read_only
    }

    /// Opens read-only: no write transaction can begin.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
    /// Whether the path names the data file itself (true) or a directory holding it (false).
    /// By default an existing regular file is opened as the data file, anything else as a
    /// directory.
    pub fn no_subdir(mut self, yes: bool) -> Self {
        self.no_subdir = Some(yes);
        self
    }

    /// The names of the data and lock files in a directory (default [`FileNames::Auto`]).
    pub fn file_names(mut self, names: FileNames) -> Self {
        self.file_names = names;
        self
    }

    /// No lock file, as LMDB's MDB_NOLOCK: the reader table lives in this handle's memory,
    /// and the caller promises that no other handle or process uses the file while this one
    /// writes (nothing checks it). Default false.
    pub fn no_lock(mut self, yes: bool) -> Self {
        self.no_lock = yes;
        self
    }

    /// The data file and the lock file that [`Self::open`] would use for `path`.
    pub fn files(&self, path: impl AsRef<std::path::Path>) -> (PathBuf, PathBuf) {
        let path = path.as_ref();
        if self.subdir(path) {
            let lmdb = match self.file_names {
                FileNames::Lmdb => true,
                FileNames::Cairn => false,
                FileNames::Auto => {
                    !path.join("data.cairn").exists() && path.join("data.mdb").exists()
                }
            };
            if lmdb {
                (path.join("data.mdb"), path.join("lock.mdb"))
            } else {
                (path.join("data.cairn"), path.join("lock.cairn"))
            }
        } else {
            let mut l = path.as_os_str().to_owned();
            l.push("-lock");
            (path.to_path_buf(), PathBuf::from(l))
        }
    }

    /// Whether `path` names a directory holding the files (else the data file itself).
    pub(crate) fn subdir(&self, path: &std::path::Path) -> bool {
        match self.no_subdir {
            Some(n) => !n,
            None => !path.is_file(),
        }
    }
    /// The most closures one grouped commit carries ([`Env::write_grouped`](crate::Env::
    /// write_grouped)); the rest wait for the next group. At least 1.
    pub fn group_max_writes(mut self, n: usize) -> Self {
        self.group_max_writes = n.max(1);
        self
    }

    /// How long a group keeps taking closures that queue while it runs, from its start; the
    /// closures it took before the limit still run. A group always takes what was queued when
    /// it began (up to [`EnvOptions::group_max_writes`]).
    pub fn group_max_time(mut self, period: std::time::Duration) -> Self {
        self.group_max_time = period;
        self
    }

    /// Address space reserved for the map (default 1 TiB); the file can never grow past it.
    /// Without this option a `max_size` also bounds the reservation; with it, the size limit
    /// can later be raised up to the reservation ([`Env::set_max_size`](crate::Env::set_max_size)).
    pub fn map_reserve(mut self, bytes: u64) -> Self {
        self.reserve = bytes;
        self.reserve_set = true;
        self
    }
}
