//! Index definitions (the catalog), declaring and dropping indexes, and the bounded build of
//! an index declared on a collection that already holds documents.
//!
//! Invariants (docs/doc.md, "Index build"):
//! - A definition lives under the catalog key `index/NAME` as JSON; its database is
//!   `doc:COLL:ix:NAME` (sorted duplicates: encoded value -> ids). Both are created and
//!   dropped in one transaction.
//! - A Building index has a build cursor: unset before the first step, then the greatest id
//!   the builder has indexed. Writers maintain the index for ids <= the cursor; each build
//!   step indexes the next ids above it in id order and advances it, in one transaction, so
//!   a crash between steps resumes where the last committed step stopped, and no id is
//!   indexed twice or skipped.
//! - A step that finds a second id under one value of a unique index, or a value too long
//!   for a key, indexes nothing of its batch and turns the index Failed (kept until dropped,
//!   no longer maintained, refused by queries).

use crate::collection::{add_entry, doc_id, Collection};
use crate::key;
use crate::{Error, ReadTxn, Result};
use cairn::{Database, DbFlags, PutFlags, RwTxn};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

const PREFIX: &[u8] = b"index/";

/// What an index indexes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexSpec {
    /// A JSON pointer (RFC 6901): "/user/age". Documents whose value there is missing, null,
    /// an array or an object have no entry.
    pub path: String,
    /// At most one document per value.
    pub unique: bool,
}

impl IndexSpec {
    /// A non-unique index on `path`.
    pub fn new(path: &str) -> IndexSpec {
        IndexSpec {
            path: path.to_string(),
            unique: false,
        }
    }

    /// The same, unique.
    pub fn unique(mut self) -> IndexSpec {
        self.unique = true;
        self
    }
}

/// Where an index stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexState {
    /// Complete and maintained by every write: queries run.
    Ready,
    /// Being built ([`Collection::build_step`]); queries are refused until it is Ready.
    Building {
        /// Documents the builder has indexed.
        done: u64,
        /// Documents in the collection now (at least `done`).
        total: u64,
    },
    /// The build met a second document under one value of a unique index (or a value too
    /// long for a key). Drop the index, fix the data, declare it again.
    Failed {
        /// What was met.
        reason: String,
    },
}

/// An index: its name, definition and state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexInfo {
    /// Its name.
    pub name: String,
    /// What it indexes.
    pub spec: IndexSpec,
    /// Where it stands.
    pub state: IndexState,
}

/// The stored stage of an index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Stage {
    Ready,
    Building { cursor: Option<String>, done: u64 },
    Failed(String),
}

/// A stored definition.
#[derive(Clone, Debug)]
pub(crate) struct Def {
    pub name: String,
    pub spec: IndexSpec,
    pub stage: Stage,
}

impl Def {
    /// Whether writers keep this index's entries for `id` (module invariants).
    pub fn maintained(&self, id: &str) -> bool {
        match &self.stage {
            Stage::Ready => true,
            Stage::Building { cursor, .. } => cursor.as_deref().is_some_and(|c| id <= c),
            Stage::Failed(_) => false,
        }
    }

    fn to_json(&self) -> Value {
        let (state, cursor, done, reason) = match &self.stage {
            Stage::Ready => ("ready", None, 0, None),
            Stage::Building { cursor, done } => ("building", cursor.clone(), *done, None),
            Stage::Failed(r) => ("failed", None, 0, Some(r.clone())),
        };
        json!({"path": self.spec.path, "unique": self.spec.unique, "state": state,
               "cursor": cursor, "done": done, "reason": reason})
    }

    fn from_json(name: &str, raw: &[u8]) -> Result<Def> {
        let bad = |w: &str| Error::Inconsistent(format!("index {name:?} definition: {w}"));
        let v: Value = serde_json::from_slice(raw).map_err(|e| bad(&e.to_string()))?;
        let stage = match v["state"].as_str() {
            Some("ready") => Stage::Ready,
            Some("building") => Stage::Building {
                cursor: v["cursor"].as_str().map(str::to_string),
                done: v["done"].as_u64().unwrap_or(0),
            },
            Some("failed") => Stage::Failed(v["reason"].as_str().unwrap_or("").to_string()),
            _ => return Err(bad("no state")),
        };
        Ok(Def {
            name: name.to_string(),
            spec: IndexSpec {
                path: v["path"]
                    .as_str()
                    .ok_or_else(|| bad("no path"))?
                    .to_string(),
                unique: v["unique"].as_bool().unwrap_or(false),
            },
            stage,
        })
    }

    fn info(&self, total: u64) -> IndexInfo {
        IndexInfo {
            name: self.name.clone(),
            spec: self.spec.clone(),
            state: match &self.stage {
                Stage::Ready => IndexState::Ready,
                Stage::Building { done, .. } => IndexState::Building {
                    done: *done,
                    total: total.max(*done),
                },
                Stage::Failed(r) => IndexState::Failed { reason: r.clone() },
            },
        }
    }
}

fn def_key(name: &str) -> Vec<u8> {
    [PREFIX, name.as_bytes()].concat()
}

/// Every index definition of a collection, in name order.
pub(crate) fn load_all(txn: &impl ReadTxn, meta: Database) -> Result<Vec<Def>> {
    let mut c = txn.cursor_raw(meta)?;
    let mut e = c.set_range(PREFIX)?;
    let mut out = Vec::new();
    while let Some((k, v)) = e {
        let Some(name) = k.strip_prefix(PREFIX) else {
            break;
        };
        out.push(Def::from_json(doc_id(name)?, v)?);
        e = c.next()?;
    }
    Ok(out)
}

/// The parsed definitions of a collection, kept with the catalog bytes they were parsed
/// from: a write walks the catalog (in its own transaction, so it sees what that
/// transaction sees) and reuses the parse when the bytes are the same, which they are but
/// after a declare, drop or build step. A cache keyed by content cannot go stale.
#[derive(Debug, Default)]
pub(crate) struct DefCache(Mutex<Option<Parsed>>);

/// The catalog bytes (length-prefixed keys and values) and what they parse to.
type Parsed = (Vec<u8>, Arc<Vec<Def>>);

/// [`load_all`] through the collection's cache.
pub(crate) fn load_all_cached(txn: &impl ReadTxn, c: &Collection) -> Result<Arc<Vec<Def>>> {
    let mut raw = Vec::new();
    {
        let mut cur = txn.cursor_raw(c.meta)?;
        let mut e = cur.set_range(PREFIX)?;
        while let Some((k, v)) = e {
            if !k.starts_with(PREFIX) {
                break;
            }
            for part in [k, v] {
                raw.extend_from_slice(&(part.len() as u32).to_be_bytes());
                raw.extend_from_slice(part);
            }
            e = cur.next()?;
        }
    }
    let mut g = c.defs.0.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((bytes, defs)) = g.as_ref() {
        if *bytes == raw {
            return Ok(defs.clone());
        }
    }
    let defs = Arc::new(load_all(txn, c.meta)?);
    *g = Some((raw, defs.clone()));
    Ok(defs)
}

fn load(txn: &impl ReadTxn, meta: Database, name: &str) -> Result<Option<Def>> {
    match txn.get_raw(meta, &def_key(name))? {
        Some(raw) => Def::from_json(name, raw).map(Some),
        None => Ok(None),
    }
}

fn store(txn: &mut RwTxn<'_>, meta: Database, def: &Def) -> Result<()> {
    let v = def.to_json().to_string();
    txn.put(meta, &def_key(&def.name), v.as_bytes(), PutFlags::empty())?;
    Ok(())
}

impl Collection {
    /// Declares an index. On an empty collection it is Ready at once; otherwise it is
    /// Building until [`Collection::build_step`] (or [`crate::spawn_build`]) has covered every
    /// document. Declaring it again with the same spec changes nothing; with another spec is
    /// [`Error::IndexExists`]. Returns its state.
    pub fn declare_index(
        &self,
        txn: &mut RwTxn<'_>,
        name: &str,
        spec: IndexSpec,
    ) -> Result<IndexState> {
        key::check_name("index", name)?;
        if !(spec.path.is_empty() || spec.path.starts_with('/')) {
            return Err(Error::Invalid(format!(
                "index path {:?}: a JSON pointer starts with '/'",
                spec.path
            )));
        }
        if let Some(def) = load(txn, self.meta, name)? {
            if def.spec != spec {
                return Err(Error::IndexExists(name.to_string()));
            }
            return Ok(def.info(self.len(txn)?).state);
        }
        let mut n = txn.nested()?;
        n.create_db(
            Some(&key::index_db(&self.name, name)),
            DbFlags::CREATE | DbFlags::DUP_SORT,
        )?;
        let stage = if self.is_empty(&*n)? {
            Stage::Ready
        } else {
            Stage::Building {
                cursor: None,
                done: 0,
            }
        };
        let def = Def {
            name: name.to_string(),
            spec,
            stage,
        };
        store(&mut n, self.meta, &def)?;
        let total = self.len(&*n)?;
        n.commit()?;
        Ok(def.info(total).state)
    }

    /// Drops an index and its entries; false if there was none.
    pub fn drop_index(&self, txn: &mut RwTxn<'_>, name: &str) -> Result<bool> {
        if load(txn, self.meta, name)?.is_none() {
            return Ok(false);
        }
        let mut n = txn.nested()?;
        let db = n.create_db(Some(&key::index_db(&self.name, name)), DbFlags::DUP_SORT)?;
        n.drop_db(db)?;
        n.delete(self.meta, &def_key(name))?;
        n.commit()?;
        Ok(true)
    }

    /// The collection's indexes, in name order.
    pub fn indexes(&self, txn: &impl ReadTxn) -> Result<Vec<IndexInfo>> {
        let total = self.len(txn)?;
        Ok(load_all(txn, self.meta)?
            .iter()
            .map(|d| d.info(total))
            .collect())
    }

    /// One index, if declared.
    pub fn index(&self, txn: &impl ReadTxn, name: &str) -> Result<Option<IndexInfo>> {
        let total = self.len(txn)?;
        Ok(load(txn, self.meta, name)?.map(|d| d.info(total)))
    }

    /// The index `name` for a query: its definition if Ready, else the error a query gets.
    pub(crate) fn ready_def(&self, txn: &impl ReadTxn, name: &str) -> Result<Def> {
        let def = load(txn, self.meta, name)?.ok_or_else(|| Error::NoIndex(name.to_string()))?;
        match &def.stage {
            Stage::Ready => Ok(def),
            Stage::Building { done, .. } => Err(Error::IndexBuilding {
                index: name.to_string(),
                done: *done,
                total: self.len(txn)?.max(*done),
            }),
            Stage::Failed(r) => Err(Error::IndexFailed {
                index: name.to_string(),
                reason: r.clone(),
            }),
        }
    }

    /// One bounded step of an index build, in the caller's write transaction (commit it, and
    /// call again until the state is not Building): indexes the next `batch` documents above
    /// the build cursor and advances it. Returns the state after the step. Writers between
    /// steps keep the index right for the ids already passed.
    pub fn build_step(&self, txn: &mut RwTxn<'_>, name: &str, batch: usize) -> Result<IndexState> {
        let mut def =
            load(txn, self.meta, name)?.ok_or_else(|| Error::NoIndex(name.to_string()))?;
        let Stage::Building { cursor, done } = def.stage.clone() else {
            return Ok(def.info(self.len(txn)?).state);
        };
        let batch = batch.max(1);
        // The next ids above the cursor with their encoded values, read before writing.
        let mut todo: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        {
            let mut c = txn.cursor(self.docs)?;
            let mut e = match &cursor {
                Some(a) => match c.set_range(a.as_bytes())? {
                    Some((k, _)) if k == a.as_bytes() => c.next()?,
                    other => other,
                },
                None => c.first()?,
            };
            while let Some((k, v)) = e {
                if todo.len() >= batch {
                    break;
                }
                let id = doc_id(k)?;
                let d = crate::collection::decode_doc(id, v)?;
                todo.push((id.to_string(), key::encode_at(&d.body, &def.spec.path)));
                e = c.next()?;
            }
        }
        let db = txn.create_db(Some(&key::index_db(&self.name, name)), DbFlags::DUP_SORT)?;
        let mut n = txn.nested()?;
        let mut failed = None;
        for (id, k) in &todo {
            if let Some(k) = k {
                match add_entry(&mut n, db, &def, k, id) {
                    Ok(()) => {}
                    Err(e @ (Error::UniqueViolation { .. } | Error::IndexValueTooLarge { .. })) => {
                        failed = Some(format!("document {id:?}: {e}"));
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        def.stage = match failed {
            Some(reason) => {
                n.abort();
                Stage::Failed(reason)
            }
            None => {
                n.commit()?;
                match todo.last() {
                    Some(_) if todo.len() == batch => Stage::Building {
                        cursor: todo.last().map(|t| t.0.clone()),
                        done: done + todo.len() as u64,
                    },
                    _ => Stage::Ready,
                }
            }
        };
        store(txn, self.meta, &def)?;
        Ok(def.info(self.len(txn)?).state)
    }
}
