//! Queries on an index: equality and ranges, both directions, pages with continuation.
//!
//! Invariants:
//! - Results come in index order: by encoded value, then by id (the sorted duplicates of one
//!   value are ids in byte order); reversed, the exact reverse.
//! - A continuation token names the last (value, id) pair returned; the next page starts
//!   strictly after it in the query's direction, in whatever transaction it runs, so pages
//!   never repeat an entry, and an entry present throughout is never skipped, even when
//!   the pair of the token was deleted in between.
//! - Queries read only Ready indexes (a Building or Failed one is an error, never a partial
//!   answer).

use crate::collection::{decode_doc, doc_id, split_doc, Collection, Doc};
use crate::key::{self, hex, unhex};
use crate::{Error, Result};
use cairn::{Cursor, RoTxn};
use serde_json::Value;
use std::ops::Bound;

/// An opaque continuation token: pass it to [`Query::after`] to read the next page. Its text
/// ([`Token::as_str`]) is URL-safe and may be kept across transactions and restarts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token(String);

impl Token {
    /// The token's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A token from its text (checked when used).
    pub fn from_text(s: &str) -> Token {
        Token(s.to_string())
    }

    fn new(k: &[u8], id: &[u8]) -> Token {
        let mut b = Vec::with_capacity(2 + k.len() + id.len());
        b.extend_from_slice(&(k.len() as u16).to_be_bytes());
        b.extend_from_slice(k);
        b.extend_from_slice(id);
        Token(hex(&b))
    }

    fn parts(&self) -> Result<(Vec<u8>, Vec<u8>)> {
        let bad = || Error::Invalid(format!("continuation token {:?}", self.0));
        let b = unhex(&self.0).ok_or_else(bad)?;
        if b.len() < 2 {
            return Err(bad());
        }
        let n = u16::from_be_bytes([b[0], b[1]]) as usize;
        if b.len() < 2 + n {
            return Err(bad());
        }
        Ok((b[2..2 + n].to_vec(), b[2 + n..].to_vec()))
    }
}

/// A query on one index: the values between two bounds (each inclusive, exclusive or
/// open), in index order or reversed, at most `limit` documents from where a token left off.
#[derive(Clone, Debug)]
pub struct Query {
    lower: Bound<Value>,
    upper: Bound<Value>,
    reverse: bool,
    limit: usize,
    after: Option<Token>,
}

impl Query {
    /// Documents whose indexed value equals `v`.
    pub fn eq(v: Value) -> Query {
        Query::bounds(Bound::Included(v.clone()), Bound::Included(v))
    }

    /// Documents whose value lies in `[lo, hi]`.
    pub fn range(lo: Value, hi: Value) -> Query {
        Query::bounds(Bound::Included(lo), Bound::Included(hi))
    }

    /// Documents whose value lies between two bounds of any kind.
    pub fn bounds(lower: Bound<Value>, upper: Bound<Value>) -> Query {
        Query {
            lower,
            upper,
            reverse: false,
            limit: usize::MAX,
            after: None,
        }
    }

    /// Every document the index holds.
    pub fn all() -> Query {
        Query::bounds(Bound::Unbounded, Bound::Unbounded)
    }

    /// Highest values first.
    pub fn reverse(mut self, yes: bool) -> Query {
        self.reverse = yes;
        self
    }

    /// At most `n` documents per page.
    pub fn limit(mut self, n: usize) -> Query {
        self.limit = n;
        self
    }

    /// Continues after the page that returned `t`.
    pub fn after(mut self, t: Option<Token>) -> Query {
        self.after = t;
        self
    }
}

/// One page of a query's answer.
#[derive(Clone, Debug)]
pub struct QueryPage {
    /// The documents, in index order (reversed for a reverse query).
    pub docs: Vec<Doc>,
    /// Where the next page starts; `None` when this page ends the answer.
    pub next: Option<Token>,
}

fn enc_bound(b: &Bound<Value>) -> Result<Bound<Vec<u8>>> {
    let enc = |v: &Value| {
        key::encode(v).ok_or_else(|| {
            Error::Invalid(format!(
                "query bound {v}: only booleans, numbers and strings are indexed"
            ))
        })
    };
    Ok(match b {
        Bound::Included(v) => Bound::Included(enc(v)?),
        Bound::Excluded(v) => Bound::Excluded(enc(v)?),
        Bound::Unbounded => Bound::Unbounded,
    })
}

/// Whether `k` is on the inner side of `b` taken as a lower bound.
fn above(k: &[u8], b: &Bound<Vec<u8>>) -> bool {
    match b {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    }
}

/// Whether `k` is on the inner side of `b` taken as an upper bound.
fn below(k: &[u8], b: &Bound<Vec<u8>>) -> bool {
    match b {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    }
}

type Entry<'t> = Option<(&'t [u8], &'t [u8])>;

/// The first pair strictly after (k, id) in (key, id) order.
fn after_pair<'t>(c: &mut Cursor<'t>, k: &[u8], id: &[u8]) -> cairn::Result<Entry<'t>> {
    match c.get_both_range(k, id)? {
        Some((_, v)) if v == id => c.next(),
        Some(e) => Ok(Some(e)),
        // Every id under k is below id (or k is gone): the first pair of the next key.
        None => match c.set(k)? {
            Some(_) => c.next_nodup(),
            None => c.set_range(k),
        },
    }
}

/// The last pair strictly before (k, id).
fn before_pair<'t>(c: &mut Cursor<'t>, k: &[u8], id: &[u8]) -> cairn::Result<Entry<'t>> {
    match c.get_both_range(k, id)? {
        Some(_) => c.prev(),
        None => match c.set(k)? {
            Some(_) => c.last_dup(),
            // No key k: the pair before the first key above it (an unset cursor's prev is
            // the last pair).
            None => {
                c.set_range(k)?;
                c.prev()
            }
        },
    }
}

/// The first pair inside a lower bound.
fn first_in<'t>(c: &mut Cursor<'t>, lo: &Bound<Vec<u8>>) -> cairn::Result<Entry<'t>> {
    match lo {
        Bound::Unbounded => c.first(),
        Bound::Included(l) => c.set_range(l),
        Bound::Excluded(l) => match c.set_range(l)? {
            Some((k, _)) if k == l.as_slice() => c.next_nodup(),
            e => Ok(e),
        },
    }
}

/// The last pair inside an upper bound.
fn last_in<'t>(c: &mut Cursor<'t>, hi: &Bound<Vec<u8>>) -> cairn::Result<Entry<'t>> {
    match hi {
        Bound::Unbounded => c.last(),
        Bound::Included(h) => match c.set_range(h)? {
            Some((k, _)) if k == h.as_slice() => c.last_dup(),
            Some(_) => c.prev(),
            None => c.last(),
        },
        Bound::Excluded(h) => match c.set_range(h)? {
            Some(_) => c.prev(),
            None => c.last(),
        },
    }
}

/// A stored document as its bytes, as [`Collection::query_text`] hands it over: no parsing,
/// no copy (a server writes `text` into its answer as it is).
#[derive(Clone, Copy, Debug)]
pub struct DocText<'t> {
    /// Its id.
    pub id: &'t str,
    /// Writes of this id since it was last absent (see [`Doc::version`]).
    pub version: u64,
    /// Sequence number of the write that stored it.
    pub seq: u64,
    /// The document's JSON text, as stored.
    pub text: &'t [u8],
}

impl Collection {
    /// The index a query on `path` (what the HTTP API's `where=PATH` names) runs on: a Ready
    /// one if there is one (indexes of one path hold the same entries, so their tokens are
    /// interchangeable); else the first one, whose state the query reports; [`Error::NoIndex`]
    /// if no index is declared on `path`.
    fn index_on(&self, txn: &RoTxn<'_>, path: &str) -> Result<String> {
        let on: Vec<_> = self
            .indexes(txn)?
            .into_iter()
            .filter(|i| i.spec.path == path)
            .collect();
        let pick = on
            .iter()
            .find(|i| i.state == crate::IndexState::Ready)
            .or(on.first())
            .ok_or_else(|| Error::NoIndex(format!("(none on path {path:?})")))?;
        Ok(pick.name.clone())
    }

    /// Runs `q` on an index declared on `path` (see [`Collection::query`]; which index:
    /// a Ready one of the path, else the error of the first, [`Error::IndexBuilding`] or
    /// [`Error::IndexFailed`]; [`Error::NoIndex`] if none is declared on `path`).
    pub fn query_path(&self, txn: &RoTxn<'_>, path: &str, q: &Query) -> Result<QueryPage> {
        self.query(txn, &self.index_on(txn, path)?, q)
    }

    /// [`Collection::query_path`], each document handed to `f` as its stored bytes
    /// ([`Collection::query_text`]).
    pub fn query_path_text(
        &self,
        txn: &RoTxn<'_>,
        path: &str,
        q: &Query,
        f: impl FnMut(DocText<'_>) -> Result<()>,
    ) -> Result<Option<Token>> {
        self.query_text(txn, &self.index_on(txn, path)?, q, f)
    }

    /// Runs `q` on the Ready index `index`. [`Error::IndexBuilding`] while it is built,
    /// [`Error::IndexFailed`] if its build failed, [`Error::NoIndex`] if there is none.
    pub fn query(&self, txn: &RoTxn<'_>, index: &str, q: &Query) -> Result<QueryPage> {
        let mut docs = Vec::new();
        let next = self.walk(txn, index, q, |id, raw| {
            docs.push(decode_doc(id, raw)?);
            Ok(())
        })?;
        Ok(QueryPage { docs, next })
    }

    /// [`Collection::query`] without parsing the documents: `f` gets each one's stored
    /// bytes, in index order; returns the next page's token. What a server that answers
    /// with the stored text needs (parsing and serializing again cost it most of a query).
    pub fn query_text(
        &self,
        txn: &RoTxn<'_>,
        index: &str,
        q: &Query,
        mut f: impl FnMut(DocText<'_>) -> Result<()>,
    ) -> Result<Option<Token>> {
        self.walk(txn, index, q, |id, raw| {
            let (version, seq, text) = split_doc(id, raw)?;
            f(DocText {
                id,
                version,
                seq,
                text,
            })
        })
    }

    /// The query's walk: each document in the page (its id and stored value) to `f`, at most
    /// `q.limit` of them (the walk is bounded by the page); the next page's token.
    fn walk(
        &self,
        txn: &RoTxn<'_>,
        index: &str,
        q: &Query,
        mut f: impl FnMut(&str, &[u8]) -> Result<()>,
    ) -> Result<Option<Token>> {
        self.ready_def(txn, index)?;
        let db = txn.open_db(Some(&key::index_db(&self.name, index)))?;
        let lo = enc_bound(&q.lower)?;
        let hi = enc_bound(&q.upper)?;
        let after = q.after.as_ref().map(Token::parts).transpose()?;
        let mut c = txn.cursor(db)?;
        // A token outside the bounds (from another query) is ignored: the bound decides.
        let mut e = match (&after, q.reverse) {
            (Some((k, id)), false) if above(k, &lo) => after_pair(&mut c, k, id)?,
            (Some((k, id)), true) if below(k, &hi) => before_pair(&mut c, k, id)?,
            (_, false) => first_in(&mut c, &lo)?,
            (_, true) => last_in(&mut c, &hi)?,
        };
        let mut n = 0;
        let mut last: Option<(&[u8], &[u8])> = None;
        while let Some((k, id)) = e {
            if !(above(k, &lo) && below(k, &hi)) {
                break;
            }
            if n >= q.limit {
                // Another entry in range: the page ends on a token of its last entry.
                return Ok(last.map(|(k, id)| Token::new(k, id)));
            }
            let id_s = doc_id(id)?;
            let raw = txn.get(self.docs, id)?.ok_or_else(|| {
                Error::Inconsistent(format!(
                    "index {index:?}: entry for missing document {id_s:?}"
                ))
            })?;
            f(id_s, raw)?;
            n += 1;
            last = Some((k, id));
            e = if q.reverse { c.prev()? } else { c.next()? };
        }
        Ok(None)
    }
}

/// The JSON text of an encoded value (error messages).
pub(crate) fn describe(k: &[u8]) -> String {
    match k.first() {
        Some(&key::TAG_FALSE) => "false".into(),
        Some(&key::TAG_TRUE) => "true".into(),
        Some(&key::TAG_NUMBER) if k.len() == 9 => {
            let b = u64::from_be_bytes(k[1..9].try_into().expect("8 bytes"));
            let bits = if b >> 63 == 1 { b & !(1 << 63) } else { !b };
            serde_json::Number::from_f64(f64::from_bits(bits))
                .map_or_else(|| "?".into(), |n| n.to_string())
        }
        Some(&key::TAG_STRING) => {
            let mut s = Vec::new();
            let mut i = 1;
            while i < k.len() {
                if k[i] == 0 {
                    if k.get(i + 1) == Some(&0xFF) {
                        s.push(0);
                        i += 2;
                        continue;
                    }
                    break;
                }
                s.push(k[i]);
                i += 1;
            }
            Value::String(String::from_utf8_lossy(&s).into_owned()).to_string()
        }
        _ => format!("{k:?}"),
    }
}
