//! State-machine extensions (src/ext.rs): a compare-and-set register as a toy extension,
//! replicated on three in-process nodes. Applied entries change every replica alike and
//! answer the proposer; a refusal drops what the extension wrote before refusing, on every
//! replica; a node that lacks the extension stops instead of skipping the entry.

use cairn::{PutFlags, RwTxn};
use cairn_raft::ext::Extension;
use cairn_raft::{Node, Op, Request};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

mod support;

const WAIT: Duration = Duration::from_secs(20);

/// `{"key", "expect", "new"}`: sets `key` of database `cas` to `new` if it holds `expect`
/// (`null`: absent); answers the value it replaced. It first writes a `touched` marker, so
/// that a refusal that kept anything would show.
struct Cas;

impl Extension for Cas {
    fn name(&self) -> &str {
        "cas"
    }

    fn apply(&self, txn: &mut RwTxn<'_>, payload: &[u8]) -> cairn::Result<Result<Vec<u8>, String>> {
        let Ok(p) = serde_json::from_slice::<Value>(payload) else {
            return Ok(Err("not JSON".into()));
        };
        let (Some(key), Some(new)) = (p["key"].as_str(), p["new"].as_str()) else {
            return Ok(Err("key and new are strings".into()));
        };
        let d = txn.create_db(Some("cas"), cairn::DbFlags::CREATE)?;
        txn.put(d, b"touched", b"1", PutFlags::empty())?;
        let current = txn.get(d, key.as_bytes())?.map(<[u8]>::to_vec);
        if current.as_deref() != p["expect"].as_str().map(str::as_bytes) {
            return Ok(Err(format!("{key}: expected {}", p["expect"])));
        }
        txn.put(d, key.as_bytes(), new.as_bytes(), PutFlags::empty())?;
        Ok(Ok(current.unwrap_or_default()))
    }
}

fn cas(key: &str, expect: Option<&str>, new: &str) -> Request {
    Request::Ext {
        name: "cas".into(),
        payload: json!({ "key": key, "expect": expect, "new": new })
            .to_string()
            .into_bytes(),
    }
}

async fn cluster(dir: &std::path::Path, ids: &[u64], ext: bool) -> (BTreeMap<u64, Node>, u64) {
    let x = || ext.then(|| Arc::new(Cas) as Arc<dyn Extension>);
    let (_, nodes) = support::start(dir, ids, x).await;
    let leader = nodes[&ids[0]].wait_leader(WAIT).await.unwrap();
    (nodes, leader)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn extension_entries_apply_alike_on_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, l) = cluster(dir.path(), &[1, 2, 3], true).await;
    let leader = &nodes[&l];

    let first = leader.propose(cas("k", None, "a")).await.unwrap();
    assert_eq!((first.response.error, first.response.data), (None, vec![]));
    // Refused: the register holds "a".
    let refused = leader.propose(cas("k", None, "b")).await.unwrap();
    assert!(refused.response.error.is_some(), "{refused:?}");
    let last = leader.propose(cas("k", Some("a"), "c")).await.unwrap();
    assert_eq!(last.response.error, None);
    assert_eq!(last.response.data, b"a");
    let bad = leader
        .propose(Request::Ext {
            name: "cas".into(),
            payload: b"{".to_vec(),
        })
        .await
        .unwrap();
    assert_eq!(bad.response.error.as_deref(), Some("not JSON"));

    let index = bad.index.unwrap();
    for node in nodes.values() {
        node.wait_applied(index, WAIT).await.unwrap();
        let s = node.storage();
        assert_eq!(s.get("cas", b"k").unwrap().as_deref(), Some(&b"c"[..]));
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_keeps_nothing_the_extension_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, l) = cluster(dir.path(), &[1, 2, 3], true).await;
    let leader = &nodes[&l];
    leader.propose(cas("k", None, "a")).await.unwrap();
    leader
        .write(vec![Op::delete("cas", "touched")])
        .await
        .unwrap();
    let refused = leader.propose(cas("k", Some("zzz"), "b")).await.unwrap();
    assert!(refused.response.error.is_some(), "{refused:?}");
    let index = refused.index.unwrap();
    for node in nodes.values() {
        node.wait_applied(index, WAIT).await.unwrap();
        let s = node.storage();
        assert_eq!(s.get("cas", b"k").unwrap().as_deref(), Some(&b"a"[..]));
        assert_eq!(s.get("cas", b"touched").unwrap(), None, "node {}", node.id);
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_node_without_the_extension_stops_rather_than_skip_an_entry() {
    let dir = tempfile::tempdir().unwrap();
    let (nodes, l) = cluster(dir.path(), &[1], false).await;
    let node = &nodes[&l];
    node.write(vec![Op::put("kv", "before", "1")])
        .await
        .unwrap();
    let r = tokio::time::timeout(WAIT, node.propose(cas("k", None, "a")))
        .await
        .expect("an answer");
    assert!(r.is_err(), "applied without the extension: {r:?}");
    assert_eq!(node.storage().get("cas", b"k").unwrap(), None);
    // The node has stopped: it takes no more writes.
    let after = tokio::time::timeout(WAIT, node.write(vec![Op::put("kv", "after", "1")]))
        .await
        .expect("an answer");
    assert!(after.is_err(), "{after:?}");
}
