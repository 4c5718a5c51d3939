//! Shared by the tests: a seeded generator, random documents and the brute-force answer of a
//! query over an in-memory model.
#![allow(dead_code)]

use cairn_doc::key::encode_at;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ops::Bound;

/// xorshift64*: deterministic, so a failing seed replays.
pub struct Rng(pub u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

/// Values the random documents draw from: few enough to collide, across every type, with
/// the awkward ones (-0.0, strings with NUL, a prefix and its extension).
pub fn pool() -> Vec<Value> {
    vec![
        json!(false),
        json!(true),
        json!(-2.5),
        json!(-1),
        json!(-0.0),
        json!(0),
        json!(1),
        json!(3.5),
        json!(10),
        json!(""),
        json!("a"),
        json!("a\u{0}"),
        json!("ab"),
        json!("b"),
        json!(null),
        json!([1, 2]),
    ]
}

/// A random document: fields a, b (any pool value or missing), c (bool), u.v (number), k (a
/// small integer: the unique index's field, colliding often).
pub fn random_doc(rng: &mut Rng) -> Value {
    let p = pool();
    let mut d = serde_json::Map::new();
    for f in ["a", "b"] {
        if rng.below(5) != 0 {
            d.insert(f.into(), rng.pick(&p).clone());
        }
    }
    d.insert("c".into(), json!(rng.below(2) == 0));
    if rng.below(3) != 0 {
        d.insert("u".into(), json!({"v": rng.below(6)}));
    }
    if rng.below(4) != 0 {
        d.insert("k".into(), json!(rng.below(40)));
    }
    d.insert("n".into(), json!(rng.next() % 1000));
    Value::Object(d)
}

/// A random bound drawn from the pool's indexable values.
pub fn random_bound(rng: &mut Rng) -> Bound<Value> {
    let p: Vec<Value> = pool()
        .into_iter()
        .filter(|v| cairn_doc::key::encode(v).is_some())
        .collect();
    match rng.below(5) {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(rng.pick(&p).clone()),
        _ => Bound::Excluded(rng.pick(&p).clone()),
    }
}

fn enc_bound(b: &Bound<Value>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(v) => Bound::Included(cairn_doc::key::encode(v).unwrap()),
        Bound::Excluded(v) => Bound::Excluded(cairn_doc::key::encode(v).unwrap()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The ids a query must return, by scanning every document.
pub fn brute_force(
    docs: &BTreeMap<String, Value>,
    path: &str,
    lo: &Bound<Value>,
    hi: &Bound<Value>,
    reverse: bool,
) -> Vec<String> {
    let (lo, hi) = (enc_bound(lo), enc_bound(hi));
    let mut hits: Vec<(Vec<u8>, String)> = docs
        .iter()
        .filter_map(|(id, d)| encode_at(d, path).map(|k| (k, id.clone())))
        .filter(|(k, _)| {
            let ok_lo = match &lo {
                Bound::Included(l) => k >= l,
                Bound::Excluded(l) => k > l,
                Bound::Unbounded => true,
            };
            let ok_hi = match &hi {
                Bound::Included(h) => k <= h,
                Bound::Excluded(h) => k < h,
                Bound::Unbounded => true,
            };
            ok_lo && ok_hi
        })
        .collect();
    hits.sort();
    if reverse {
        hits.reverse();
    }
    hits.into_iter().map(|(_, id)| id).collect()
}

/// Runs a query page by page (`limit` each, a read transaction per page) and returns every
/// id, checking each document against the model.
pub fn paged_ids(
    env: &cairn::Env,
    coll: &cairn_doc::Collection,
    index: &str,
    q: cairn_doc::Query,
    limit: usize,
    docs: &BTreeMap<String, Value>,
) -> cairn_doc::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let r = env.read_txn()?;
        let page = coll.query(&r, index, &q.clone().limit(limit).after(token.clone()))?;
        assert!(page.docs.len() <= limit);
        // The unparsed form of the same page (what the server answers with): the same
        // documents in the same order, bytes that parse to them, the same token.
        let mut text = Vec::new();
        let next = coll.query_text(&r, index, &q.clone().limit(limit).after(token), |d| {
            let body: Value = serde_json::from_slice(d.text).expect("stored JSON text");
            text.push((d.id.to_string(), d.version, d.seq, body));
            Ok(())
        })?;
        let parsed: Vec<_> = page
            .docs
            .iter()
            .map(|d| (d.id.clone(), d.version, d.seq, d.body.clone()))
            .collect();
        assert_eq!(text, parsed, "query_text and query differ");
        assert_eq!(next, page.next, "query_text and query end differently");
        for d in &page.docs {
            assert_eq!(Some(&d.body), docs.get(&d.id), "document {} differs", d.id);
            out.push(d.id.clone());
        }
        match page.next {
            Some(t) => token = Some(t),
            None => return Ok(out),
        }
    }
}
