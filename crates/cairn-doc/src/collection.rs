//! A collection: documents keyed by id, the write path that keeps the collection's indexes
//! and feed in step with them, and the checker of that agreement.
//!
//! Invariants (the crate's, docs/doc.md "Index maintenance"):
//! - A document's stored value is `version (u64 BE) | seq (u64 BE) | JSON text`: `version`
//!   counts the writes of this id since it was last absent (1 for a new document), `seq` is
//!   the feed sequence number of the write that stored it.
//! - Every put or delete runs in a nested transaction: the old document's index entries go,
//!   the new one's come, the document and its feed record are written, all or nothing.
//! - An index is maintained for `id` exactly when [`Def::maintained`] says so (Ready: always;
//!   Building: ids up to the build cursor; Failed: never), so the builder and the writers
//!   never both add an id's entry, and neither misses one.

use crate::feed;
use crate::index::{self, Def};
use crate::key::{self, check_id};
use crate::{DocText, Error, ReadTxn, Result};
use cairn::{Database, DbFlags, Env, PutFlags, RwTxn};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

/// A collection of one environment: the handles of its databases. Cheap to clone; valid
/// while the environment it was opened on stays open (reopen it with the environment).
#[derive(Clone, Debug)]
pub struct Collection {
    pub(crate) name: String,
    pub(crate) docs: Database,
    pub(crate) meta: Database,
    pub(crate) feed: Database,
    /// The index definitions last parsed (shared by clones).
    pub(crate) defs: Arc<index::DefCache>,
}

/// A stored document.
#[derive(Clone, Debug, PartialEq)]
pub struct Doc {
    /// Its id.
    pub id: String,
    /// Writes of this id since it was last absent: 1 for a new document (an ETag).
    pub version: u64,
    /// Sequence number of the write that stored it (its record in the change feed).
    pub seq: u64,
    /// The document.
    pub body: Value,
}

/// Bytes before the JSON text of a stored document.
const DOC_HEADER: usize = 16;

pub(crate) fn decode_doc(id: &str, raw: &[u8]) -> Result<Doc> {
    let (version, seq, text) = split_doc(id, raw)?;
    let body = serde_json::from_slice(text)
        .map_err(|e| Error::Inconsistent(format!("document {id:?}: {e}")))?;
    Ok(Doc {
        id: id.to_string(),
        version,
        seq,
        body,
    })
}

/// A stored document's version, seq and JSON text.
pub(crate) fn split_doc<'r>(id: &str, raw: &'r [u8]) -> Result<(u64, u64, &'r [u8])> {
    if raw.len() < DOC_HEADER {
        return Err(Error::Inconsistent(format!(
            "document {id:?}: stored value of {} bytes",
            raw.len()
        )));
    }
    let version = u64::from_be_bytes(raw[..8].try_into().expect("8 bytes"));
    let seq = u64::from_be_bytes(raw[8..16].try_into().expect("8 bytes"));
    Ok((version, seq, &raw[DOC_HEADER..]))
}

/// The version in a stored document's header.
fn doc_version(id: &str, raw: &[u8]) -> Result<u64> {
    raw.get(..8)
        .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
        .ok_or_else(|| {
            Error::Inconsistent(format!(
                "document {id:?}: stored value of {} bytes",
                raw.len()
            ))
        })
}

impl Collection {
    /// Opens the collection `name` of `env`, creating its databases (in a write transaction
    /// of its own) if they do not exist yet. Do not call it while this thread holds a write
    /// transaction of `env`; use [`Collection::create`] inside one.
    pub fn open(env: &Env, name: &str) -> Result<Collection> {
        key::check_name("collection", name)?;
        {
            let r = env.read_txn()?;
            let open = |n: String| r.open_db(Some(&n));
            if let (Ok(docs), Ok(meta), Ok(feed)) = (
                open(key::docs_db(name)),
                open(key::meta_db(name)),
                open(key::feed_db(name)),
            ) {
                return Ok(Collection {
                    name: name.to_string(),
                    docs,
                    meta,
                    feed,
                    defs: Arc::default(),
                });
            }
        }
        let mut w = env.write_txn()?;
        let c = Collection::create(&mut w, name)?;
        w.commit()?;
        Ok(c)
    }

    /// Opens or creates the collection `name` inside the caller's write transaction. The
    /// handles are good once that transaction commits (not if it is aborted).
    pub fn create(txn: &mut RwTxn<'_>, name: &str) -> Result<Collection> {
        key::check_name("collection", name)?;
        Ok(Collection {
            name: name.to_string(),
            docs: txn.create_db(Some(&key::docs_db(name)), DbFlags::CREATE)?,
            meta: txn.create_db(Some(&key::meta_db(name)), DbFlags::CREATE)?,
            feed: txn.create_db(Some(&key::feed_db(name)), DbFlags::CREATE)?,
            defs: Arc::default(),
        })
    }

    /// The collection's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The document `id`, with its version.
    pub fn get(&self, txn: &impl ReadTxn, id: &str) -> Result<Option<Doc>> {
        match txn.get_raw(self.docs, id.as_bytes())? {
            Some(raw) => decode_doc(id, raw).map(Some),
            None => Ok(None),
        }
    }

    /// The document `id` as stored: its version, seq and JSON text, borrowed from the
    /// transaction (no parsing, no copy: what a server answers a read by id with).
    pub fn get_text<'t>(&self, txn: &'t impl ReadTxn, id: &'t str) -> Result<Option<DocText<'t>>> {
        match txn.get_raw(self.docs, id.as_bytes())? {
            Some(raw) => {
                let (version, seq, text) = split_doc(id, raw)?;
                Ok(Some(DocText {
                    id,
                    version,
                    seq,
                    text,
                }))
            }
            None => Ok(None),
        }
    }

    /// Number of documents.
    pub fn len(&self, txn: &impl ReadTxn) -> Result<u64> {
        Ok(txn.stat_raw(self.docs)?.entries)
    }

    /// Whether the collection holds no document.
    pub fn is_empty(&self, txn: &impl ReadTxn) -> Result<bool> {
        Ok(self.len(txn)? == 0)
    }

    /// Up to `limit` documents in id order, starting after `after` (exclusive).
    pub fn scan(&self, txn: &impl ReadTxn, after: Option<&str>, limit: usize) -> Result<Vec<Doc>> {
        let mut c = txn.cursor_raw(self.docs)?;
        let mut e = match after {
            Some(a) => match c.set_range(a.as_bytes())? {
                Some((k, _)) if k == a.as_bytes() => c.next()?,
                other => other,
            },
            None => c.first()?,
        };
        let mut out = Vec::new();
        while let Some((k, v)) = e {
            if out.len() >= limit {
                break;
            }
            let id = doc_id(k)?;
            out.push(decode_doc(id, v)?);
            e = c.next()?;
        }
        Ok(out)
    }

    /// Stores `doc` under `id` (replacing any document there) with its index entries and feed
    /// record; returns the new version. On any error nothing of this write is kept (a
    /// [`Error::UniqueViolation`] included), and the transaction can go on.
    pub fn put(&self, txn: &mut RwTxn<'_>, id: &str, doc: &Value) -> Result<u64> {
        self.put_if(txn, id, doc, None)
    }

    /// [`Collection::put`] if the stored version is `expected` (`Some(0)`: the document must
    /// not exist), else [`Error::VersionMismatch`] and nothing written; `None`: always. What
    /// an HTTP If-Match needs.
    pub fn put_if(
        &self,
        txn: &mut RwTxn<'_>,
        id: &str,
        doc: &Value,
        expected: Option<u64>,
    ) -> Result<u64> {
        self.put_text_at(txn, id, doc, None, expected, feed::now_ms())
    }

    /// [`Collection::put_if`], storing `text` as the document's JSON text instead of `doc`
    /// serialized again (a server keeps the bytes its client sent). `text` must be the JSON
    /// text of `doc`: the indexes are computed from `doc`, reads parse `text`.
    pub fn put_text(
        &self,
        txn: &mut RwTxn<'_>,
        id: &str,
        doc: &Value,
        text: &[u8],
        expected: Option<u64>,
    ) -> Result<u64> {
        self.put_text_at(txn, id, doc, Some(text), expected, feed::now_ms())
    }

    /// The put every other put calls: [`Collection::put_if`] (with `text: None`) or
    /// [`Collection::put_text`], its feed record stamped `at_ms` (milliseconds since the
    /// Unix epoch) and the feed trimmed as of `at_ms`, instead of this process's clock. A
    /// replicated writer passes the time its leader took, so every replica writes the same.
    pub fn put_text_at(
        &self,
        txn: &mut RwTxn<'_>,
        id: &str,
        doc: &Value,
        text: Option<&[u8]>,
        expected: Option<u64>,
        at_ms: u64,
    ) -> Result<u64> {
        check_id(id)?;
        let mut n = txn.nested()?;
        let v = self.write(&mut n, id, Some(doc), text, expected, at_ms)?;
        n.commit()?;
        v.ok_or_else(|| Error::Inconsistent("a put wrote no version".into()))
    }

    /// Deletes the document `id` with its index entries, appending a delete record to the
    /// feed; returns the version the delete gave it (its last version + 1), or `None` (and
    /// nothing written, no feed record) if there was no such document.
    pub fn delete(&self, txn: &mut RwTxn<'_>, id: &str) -> Result<Option<u64>> {
        self.delete_at(txn, id, feed::now_ms())
    }

    /// [`Collection::delete`], its feed record stamped `at_ms` and the feed trimmed as of
    /// `at_ms` (see [`Collection::put_text_at`]).
    pub fn delete_at(&self, txn: &mut RwTxn<'_>, id: &str, at_ms: u64) -> Result<Option<u64>> {
        check_id(id)?;
        let mut n = txn.nested()?;
        let v = self.write(&mut n, id, None, None, None, at_ms)?;
        n.commit()?;
        Ok(v)
    }

    /// The write path: `new` is the document to store, `None` to delete. Returns the version
    /// written (None: a delete of nothing); `expected` not met is `VersionMismatch`. `at_ms`
    /// stamps the feed record: nothing here reads a clock.
    fn write(
        &self,
        txn: &mut RwTxn<'_>,
        id: &str,
        new: Option<&Value>,
        text: Option<&[u8]>,
        expected: Option<u64>,
        at_ms: u64,
    ) -> Result<Option<u64>> {
        let defs = index::load_all_cached(txn, self)?;
        // The old version from the header; the old body parsed only if an index needs it.
        let old: Option<(u64, Option<Value>)> = match txn.get(self.docs, id.as_bytes())? {
            None => None,
            Some(raw) if defs.iter().any(|d| d.maintained(id)) => {
                let d = decode_doc(id, raw)?;
                Some((d.version, Some(d.body)))
            }
            Some(raw) => Some((doc_version(id, raw)?, None)),
        };
        let found = old.as_ref().map_or(0, |o| o.0);
        if let Some(want) = expected {
            if found != want {
                return Err(Error::VersionMismatch {
                    id: id.to_string(),
                    expected: want,
                    found,
                });
            }
        }
        if new.is_none() && old.is_none() {
            return Ok(None);
        }
        let version = found + 1;
        let old_body = old.as_ref().and_then(|o| o.1.as_ref());
        for def in defs.iter() {
            if !def.maintained(id) {
                continue;
            }
            let before = old_body.and_then(|d| key::encode_at(d, &def.spec.path));
            let after = new.and_then(|d| key::encode_at(d, &def.spec.path));
            if before == after {
                continue;
            }
            let db = txn.create_db(
                Some(&key::index_db(&self.name, &def.name)),
                DbFlags::DUP_SORT,
            )?;
            if let Some(b) = &before {
                txn.delete_pair(db, b, id.as_bytes())?;
            }
            if let Some(a) = &after {
                add_entry(txn, db, def, a, id)?;
            }
        }
        let kind = if new.is_some() {
            feed::ChangeKind::Put
        } else {
            feed::ChangeKind::Delete
        };
        let seq = feed::append(txn, self, id, kind, version, at_ms)?;
        match new {
            Some(doc) => {
                let mut val = Vec::with_capacity(DOC_HEADER + 64);
                val.extend_from_slice(&version.to_be_bytes());
                val.extend_from_slice(&seq.to_be_bytes());
                match text {
                    Some(t) => val.extend_from_slice(t),
                    None => serde_json::to_writer(&mut val, doc)
                        .map_err(|e| Error::Invalid(e.to_string()))?,
                }
                txn.put(self.docs, id.as_bytes(), &val, PutFlags::empty())?;
            }
            None => {
                txn.delete(self.docs, id.as_bytes())?;
            }
        }
        Ok(Some(version))
    }

    /// Checks the crate's invariants on this collection (module docs of the crate): every
    /// index against the documents, the feed against its counters and the documents.
    /// Returns the first contradiction found as [`Error::Inconsistent`].
    pub fn verify(&self, txn: &cairn::RoTxn<'_>) -> Result<()> {
        let docs = self.scan(txn, None, usize::MAX)?;
        for def in index::load_all(txn, self.meta)? {
            let mut want = BTreeSet::new();
            for d in &docs {
                if def.maintained(&d.id) {
                    if let Some(k) = key::encode_at(&d.body, &def.spec.path) {
                        want.insert((k, d.id.clone().into_bytes()));
                    }
                }
            }
            if matches!(def.stage, index::Stage::Failed(_)) {
                continue; // not maintained any more; queries refuse it
            }
            let db = txn.open_db(Some(&key::index_db(&self.name, &def.name)))?;
            let mut got = BTreeSet::new();
            let mut last: Option<Vec<u8>> = None;
            for e in txn.iter(db)? {
                let (k, v) = e?;
                if def.spec.unique && last.as_deref() == Some(k) {
                    return Err(Error::Inconsistent(format!(
                        "unique index {:?}: two ids under one value",
                        def.name
                    )));
                }
                last = Some(k.to_vec());
                got.insert((k.to_vec(), v.to_vec()));
            }
            if got != want {
                let extra = got.difference(&want).next();
                let missing = want.difference(&got).next();
                return Err(Error::Inconsistent(format!(
                    "index {:?}: entry not backed by a document {extra:?}, missing entry {missing:?}",
                    def.name
                )));
            }
        }
        feed::verify(txn, self, &docs)
    }
}

/// Adds `(k, id)` to an index, refusing a second id under one value of a unique index and a
/// value too long for a key.
pub(crate) fn add_entry(
    txn: &mut RwTxn<'_>,
    db: Database,
    def: &Def,
    k: &[u8],
    id: &str,
) -> Result<()> {
    if def.spec.unique {
        let mut it = txn.iter_dup(db, k)?;
        if let Some(held) = it.next() {
            let held = held?;
            if held != id.as_bytes() {
                return Err(Error::UniqueViolation {
                    index: def.name.clone(),
                    value: crate::query::describe(k),
                    existing_id: String::from_utf8_lossy(held).into_owned(),
                });
            }
        }
    }
    match txn.put(db, k, id.as_bytes(), PutFlags::empty()) {
        Err(cairn::Error::KeyTooLarge { .. }) => Err(Error::IndexValueTooLarge {
            index: def.name.clone(),
            len: k.len(),
        }),
        r => Ok(r?),
    }
}

/// A stored id as text (ids are written from `&str` only).
pub(crate) fn doc_id(k: &[u8]) -> Result<&str> {
    std::str::from_utf8(k).map_err(|_| Error::Inconsistent(format!("document id {k:?} not UTF-8")))
}
