//! Opening an LMDB environment: its files, both meta pages, the newest valid one, and page
//! reads bounded by the snapshot's last page and the file's length.
//!
//! Reads go through a small cache of aligned extents ([`CHUNK`] bytes, [`CHUNKS`] of them):
//! a walk in key order over a tree written by appends reads its leaves in file order, so one
//! `pread` serves many pages instead of one call per page, and a walk's levels hold their page
//! as a shared view of its extent ([`PageRef`]) rather than a copy. Memory: CHUNKS extents,
//! plus one per tree level a walk holds while its extent was replaced (a level holds one page,
//! so at most the depth limit's), each at most CHUNK bytes and never past the file's end. A
//! read the cache cannot serve (an overflow value across extents) is a `pread` of its own.
//! What an extent holds is what the file held when it was read: the checks of every page
//! read are the same either way.

use crate::error::{Error, Result};
use crate::format::{self, DbRecord, Meta, MetaProblem, PAGE_HEADER};
use crate::walk::{Pairs, Seen, Walk};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Bytes of one cached extent of the data file (a multiple of every LMDB page size).
pub const CHUNK: usize = 128 << 10;
/// Extents cached at most (least recently used replaced): the leaf level's and the branch
/// levels' pages usually lie in different ones.
const CHUNKS: usize = 4;

/// The cached extents: (extent number, last use) and their bytes (as much as the file held).
#[derive(Debug, Default)]
struct Cache {
    slots: Vec<(u64, u64, Arc<Vec<u8>>)>,
    clock: u64,
}

/// A page (or any range) of the data file, read through the extent cache: a view of its
/// extent, shared with the cache.
#[derive(Clone, Debug)]
pub(crate) struct PageRef {
    ext: Arc<Vec<u8>>,
    at: usize,
    len: usize,
}

impl std::ops::Deref for PageRef {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.ext[self.at..self.at + self.len]
    }
}

/// The data and lock files of the environment at `path`: `DIR/data.mdb` and `DIR/lock.mdb`,
/// or with `no_subdir` (LMDB's MDB_NOSUBDIR) `PATH` and `PATH-lock`. `None`: a regular file
/// is the data file itself, anything else a directory.
pub fn files(path: &Path, no_subdir: Option<bool>) -> (PathBuf, PathBuf) {
    let subdir = match no_subdir {
        Some(n) => !n,
        None => !path.is_file(),
    };
    if subdir {
        (path.join("data.mdb"), path.join("lock.mdb"))
    } else {
        let mut l = path.as_os_str().to_owned();
        l.push("-lock");
        (path.to_path_buf(), PathBuf::from(l))
    }
}

/// Whether `data` is a file that starts with an LMDB meta page (page number 0, the meta flag,
/// LMDB's magic, either byte order): the test Cairn's tools use to tell LMDB's environments
/// from their own.
pub fn is_lmdb_file(data: &Path) -> bool {
    let Ok(f) = File::open(data) else {
        return false;
    };
    let mut head = [0u8; PAGE_HEADER + 8];
    if f.read_exact_at(&mut head, 0).is_err() {
        return false;
    }
    let flags = u16::from_le_bytes([head[10], head[11]]);
    // Meta page 0 records its own page number, 0 (a Cairn file starts with its magic there).
    head[..8] == [0; 8]
        && format::has_magic(&head)
        && (flags & format::P_META != 0 || flags.swap_bytes() & format::P_META != 0)
}

/// A named database: its name (the main database's key) and its record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamedDb {
    /// The name's bytes (usually UTF-8, without NUL).
    pub name: Vec<u8>,
    /// Its record (flags, root, counts).
    pub record: DbRecord,
}

impl NamedDb {
    /// The name as text (lossy for names that are not UTF-8).
    pub fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// An LMDB environment opened for reading: one snapshot, the newest valid meta's.
#[derive(Debug)]
pub struct LmdbEnv {
    file: File,
    data_path: PathBuf,
    lock_path: PathBuf,
    file_len: u64,
    page_size: usize,
    meta: Meta,
    metas: [std::result::Result<Meta, MetaProblem>; 2],
    npages: u64,
    cache: Mutex<Cache>,
}

impl LmdbEnv {
    /// Opens the environment at `path` (see [`files`]) read-only. Nothing is written: not
    /// even LMDB's lock file is created.
    pub fn open(path: &Path, no_subdir: Option<bool>) -> Result<LmdbEnv> {
        let (data, lock) = files(path, no_subdir);
        Self::open_files(&data, &lock)
    }

    /// Opens the data file `data`, with `lock` as its lock file's name.
    pub fn open_files(data: &Path, lock: &Path) -> Result<LmdbEnv> {
        let name = data.display().to_string();
        let file = File::open(data).map_err(|source| Error::Io {
            what: format!("opening {name}"),
            source,
        })?;
        let file_len = file
            .metadata()
            .map_err(|source| Error::Io {
                what: format!("reading the size of {name}"),
                source,
            })?
            .len();
        let meta_bytes = PAGE_HEADER + format::META_LEN;
        let read = |off: u64, len: usize| -> Result<Option<Vec<u8>>> {
            if off + len as u64 > file_len {
                return Ok(None);
            }
            let mut b = vec![0u8; len];
            file.read_exact_at(&mut b, off)
                .map_err(|source| Error::Io {
                    what: format!("reading {name} at offset {off}"),
                    source,
                })?;
            Ok(Some(b))
        };
        let Some(head) = read(0, meta_bytes)? else {
            let mut small = vec![0u8; file_len as usize];
            let _ = file.read_exact_at(&mut small, 0);
            return Err(if format::has_magic(&small) {
                Error::corrupt(
                    0,
                    format!("the file is {file_len} bytes: truncated inside the first meta page"),
                )
            } else {
                Error::NotLmdb { path: name }
            });
        };
        let m0 = format::decode_meta(&head, 0);
        // The second meta sits one page in: the first meta's page size, or, when the first is
        // damaged, whichever page size finds a meta there that records the same size.
        let mut m1 = Err(MetaProblem::NoMagic);
        let sizes: Vec<u64> = match &m0 {
            Ok(m) => vec![m.page_size() as u64],
            Err(_) => (9..=16).map(|s| 1u64 << s).collect(),
        };
        for p in sizes {
            if let Some(b) = read(p, meta_bytes)? {
                let r = format::decode_meta(&b, 1);
                match &r {
                    Ok(m) if m.page_size() as u64 == p => {
                        m1 = r;
                        break;
                    }
                    Ok(m) => {
                        m1 = Err(MetaProblem::Damaged(format!(
                            "page size {} where the first meta says {p}",
                            m.page_size()
                        )));
                    }
                    Err(MetaProblem::NoMagic) => {}
                    Err(_) => m1 = r,
                }
            }
        }
        let metas = [m0, m1];
        if metas
            .iter()
            .any(|m| matches!(m, Err(MetaProblem::BigEndian)))
        {
            return Err(Error::Unsupported {
                path: name,
                what:
                    "an LMDB file of a big-endian machine (this reader reads little-endian files)"
                        .into(),
            });
        }
        let valid: Vec<&Meta> = metas.iter().filter_map(|m| m.as_ref().ok()).collect();
        // The newest valid meta; on equal txnids the first, as LMDB picks.
        let Some(meta) = valid
            .iter()
            .copied()
            .max_by(|a, b| a.txnid.cmp(&b.txnid).then(b.slot.cmp(&a.slot)))
            .copied()
        else {
            if metas.iter().all(|m| matches!(m, Err(MetaProblem::NoMagic))) {
                return Err(Error::NotLmdb { path: name });
            }
            if let Some(v) = metas.iter().find_map(|m| match m {
                Err(MetaProblem::Version(v)) => Some(*v),
                _ => None,
            }) {
                return Err(Error::Unsupported {
                    path: name,
                    what: format!(
                        "LMDB data format version {v} (this reader reads version {})",
                        format::DATA_VERSION
                    ),
                });
            }
            return Err(Error::corrupt(
                0,
                format!(
                    "no valid meta page: meta 0: {}; meta 1: {}",
                    describe(&metas[0]),
                    describe(&metas[1])
                ),
            ));
        };
        if let [a, b] = valid[..] {
            if a.page_size() != b.page_size() {
                return Err(Error::corrupt(
                    1,
                    format!(
                        "the metas disagree on the page size: {} and {}",
                        a.page_size(),
                        b.page_size()
                    ),
                ));
            }
        }
        let page_size = meta.page_size();
        let in_file = file_len / page_size as u64;
        if meta.last_pgno >= in_file {
            return Err(Error::corrupt(
                meta.last_pgno,
                format!(
                    "meta {} (txn {}) uses pages up to {}, the file holds {in_file} pages of {page_size} bytes: truncated",
                    meta.slot, meta.txnid, meta.last_pgno
                ),
            ));
        }
        Ok(LmdbEnv {
            file,
            data_path: data.to_path_buf(),
            lock_path: lock.to_path_buf(),
            file_len,
            page_size,
            npages: meta.last_pgno + 1,
            meta,
            metas,
            cache: Mutex::new(Cache::default()),
        })
    }

    /// The meta this snapshot is read from (the newest valid one).
    pub fn meta(&self) -> &Meta {
        &self.meta
    }

    /// Each meta page, decoded or why not.
    pub fn metas(&self) -> &[std::result::Result<Meta, MetaProblem>; 2] {
        &self.metas
    }

    /// Problems of the metas that an open survived (a damaged older meta): LMDB itself
    /// refuses such a file, this reader reads the valid one.
    pub fn meta_warnings(&self) -> Vec<String> {
        self.metas
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                m.as_ref()
                    .err()
                    .map(|p| format!("meta page {i}: {}", describe(&Err(p.clone()))))
            })
            .collect()
    }

    /// Page size.
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Pages of the snapshot (last page + 1).
    pub fn pages(&self) -> u64 {
        self.npages
    }

    /// Bytes of the data file.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }

    /// The data file.
    pub fn data_path(&self) -> &Path {
        &self.data_path
    }

    /// The lock file (which may not exist).
    pub fn lock_path(&self) -> &Path {
        &self.lock_path
    }

    /// The map size LMDB would open this environment with when none is set: the recorded one,
    /// raised to cover every page in use (what `mdb_dump` prints as `mapsize=`).
    pub fn map_size(&self) -> u64 {
        self.meta
            .map_size
            .max(self.npages.saturating_mul(self.page_size as u64))
    }

    /// The reader table size LMDB would use: the lock file's, when one of at least the
    /// default size exists, else the default 126 (what `mdb_dump` prints as `maxreaders=`).
    pub fn max_readers(&self) -> u32 {
        crate::lock::max_readers(&self.lock_path)
    }

    /// The main database's record.
    pub fn main_db(&self) -> DbRecord {
        self.meta.main
    }

    /// The free-page database's record.
    pub fn free_db(&self) -> DbRecord {
        self.meta.free
    }

    /// The named databases: the main database's records flagged as databases, in key order.
    /// Their records are checked (flags, root, depth) here.
    pub fn named_dbs(&self) -> Result<Vec<NamedDb>> {
        let main = self.meta.main;
        let mut out = Vec::new();
        if main.is_empty() || main.db_flags() & format::DUPSORT != 0 {
            return Ok(out);
        }
        let mut seen = Seen::new(self.npages);
        let mut walk = Walk::new(&main, false);
        while walk.next(self, &mut seen)? {
            let (page, node) = walk.leaf_node()?;
            if node.flags & (format::F_SUBDATA | format::F_DUPDATA) != format::F_SUBDATA {
                continue;
            }
            let buf = walk.leaf_bytes();
            let (ks, ke) = node.key;
            let end = (node.data_start + node.data_size as usize).min(buf.len());
            let data = buf.get(node.data_start..end).unwrap_or(&[]);
            let record = self.named_record(page, &buf[ks..ke], node.data_size as usize, data)?;
            out.push(NamedDb {
                name: buf[ks..ke].to_vec(),
                record,
            });
        }
        Ok(out)
    }

    /// A named database's record `data` (of `size` bytes by its node) under `name`, found on
    /// page `page`, decoded and checked (size, flags, root, depth).
    pub(crate) fn named_record(
        &self,
        page: u64,
        name: &[u8],
        size: usize,
        data: &[u8],
    ) -> Result<DbRecord> {
        let label = || String::from_utf8_lossy(name).into_owned();
        if size != format::DB_RECORD || data.len() < format::DB_RECORD {
            return Err(Error::corrupt(
                page,
                format!("database record of {size} bytes for {:?}", label()),
            ));
        }
        let record = DbRecord::decode(data).expect("48 bytes");
        format::check_db_flags(record.flags)
            .and_then(|()| format::check_record_shape(&record, self.meta.last_pgno))
            .map_err(|w| Error::corrupt(page, format!("named database {:?}: {w}", label())))?;
        Ok(record)
    }

    /// The named database called `name`, if there is one.
    pub fn named_db(&self, name: &[u8]) -> Result<Option<NamedDb>> {
        Ok(self.named_dbs()?.into_iter().find(|d| d.name == name))
    }

    /// Every key/value pair of the database `db` in its order, duplicates one pair each.
    /// Pairs of the main database that are named databases' records come out as their raw
    /// 48-byte records, as LMDB's cursors show them.
    pub fn pairs(&self, db: &DbRecord) -> Pairs<'_> {
        Pairs::new(self, db, false)
    }

    /// As [`Self::pairs`], for the main database (whose records may name databases).
    pub fn main_pairs(&self) -> Pairs<'_> {
        Pairs::new(self, &self.meta.main, true)
    }

    /// Reads page `pgno` (`buf.len()` bytes from its start: one page, or the start of an
    /// overflow run). The caller checked `pgno` against the snapshot.
    pub(crate) fn read_at(&self, pgno: u64, offset: usize, buf: &mut [u8]) -> Result<()> {
        let off = pgno * self.page_size as u64 + offset as u64;
        if off + buf.len() as u64 > self.file_len {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "{} bytes at offset {off} run past the end of the file ({} bytes)",
                    buf.len(),
                    self.file_len
                ),
            ));
        }
        let io = |source| Error::Io {
            what: format!("reading page {pgno} of {}", self.data_path.display()),
            source,
        };
        if (off % CHUNK as u64) as usize + buf.len() > CHUNK {
            return self.file.read_exact_at(buf, off).map_err(io);
        }
        let r = self.cached(pgno, off, buf.len())?;
        buf.copy_from_slice(&r);
        Ok(())
    }

    /// Page `pgno` (checked against the snapshot by the caller), read through the cache.
    pub(crate) fn page(&self, pgno: u64) -> Result<PageRef> {
        let off = pgno * self.page_size as u64;
        if off + self.page_size as u64 > self.file_len {
            return Err(Error::corrupt(
                pgno,
                format!(
                    "{} bytes at offset {off} run past the end of the file ({} bytes)",
                    self.page_size, self.file_len
                ),
            ));
        }
        self.cached(pgno, off, self.page_size)
    }

    /// `len` bytes at `off` (inside one extent, inside the file as opened) through the cache.
    fn cached(&self, pgno: u64, off: u64, len: usize) -> Result<PageRef> {
        let io = |source| Error::Io {
            what: format!("reading page {pgno} of {}", self.data_path.display()),
            source,
        };
        let ext = off / CHUNK as u64;
        let at = (off % CHUNK as u64) as usize;
        // A poisoned lock only means another thread panicked mid-read: the cache is then
        // dropped and refilled.
        let mut c = self.cache.lock().unwrap_or_else(|p| {
            let mut g = p.into_inner();
            g.slots.clear();
            g
        });
        c.clock += 1;
        let now = c.clock;
        let slot = match c.slots.iter().position(|s| s.0 == ext) {
            Some(i) => i,
            None => {
                let i = if c.slots.len() < CHUNKS {
                    c.slots.push((u64::MAX, 0, Arc::new(Vec::new())));
                    c.slots.len() - 1
                } else {
                    (0..CHUNKS).min_by_key(|&i| c.slots[i].1).unwrap_or(0)
                };
                let s = &mut c.slots[i];
                s.0 = u64::MAX;
                let want = (self.file_len - ext * CHUNK as u64).min(CHUNK as u64) as usize;
                // The old bytes are reused unless a walk still holds a page of them.
                if Arc::get_mut(&mut s.2).is_none() {
                    s.2 = Arc::new(Vec::new());
                }
                let v = Arc::get_mut(&mut s.2).expect("not shared");
                v.resize(want, 0);
                let got = read_upto(&self.file, v, ext * CHUNK as u64).map_err(io)?;
                v.truncate(got);
                s.0 = ext;
                i
            }
        };
        let s = &mut c.slots[slot];
        s.1 = now;
        if at + len > s.2.len() {
            // The file shrank since it was opened.
            return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
        }
        Ok(PageRef {
            ext: Arc::clone(&s.2),
            at,
            len,
        })
    }
}

/// Reads into `buf` from `off` until it is full or the file ends; the bytes read. Bounded:
/// every call reads at least one byte or ends the loop.
fn read_upto(file: &File, buf: &mut [u8], off: u64) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], off + n as u64) {
            Ok(0) => break,
            Ok(r) => n += r,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

fn describe(m: &std::result::Result<Meta, MetaProblem>) -> String {
    match m {
        Ok(m) => format!("valid (txn {})", m.txnid),
        Err(MetaProblem::NoMagic) => "no LMDB magic".into(),
        Err(MetaProblem::BigEndian) => "a big-endian machine's meta".into(),
        Err(MetaProblem::Version(v)) => format!("data format version {v}"),
        Err(MetaProblem::Damaged(w)) => w.clone(),
    }
}
