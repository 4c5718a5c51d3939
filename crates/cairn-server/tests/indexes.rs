//! Issue 24's HTTP routes against a real server on a loopback port: index declaration, state
//! and drop; equality and range queries with continuation (against a brute-force filter);
//! unique violations that leave nothing written; background builds; the change feed as JSON
//! lines, long poll and SSE (resumed with Last-Event-ID), across a server restart.

mod common;

use common::{Conn, TestServer};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn put_json(c: &mut Conn, path: &str, v: &Value) -> common::Resp {
    c.put(path, &v.to_string())
}

/// The changes of a JSON-lines body.
fn lines(body: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(body)
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Percent-encodes a query-string value.
fn q(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// All ids of an index query, page after page (`limit` per page).
fn query_all(c: &mut Conn, coll: &str, params: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("/{coll}?{params}&limit={limit}");
        if let Some(t) = &cursor {
            url.push_str(&format!("&cursor={t}"));
        }
        let r = c.get(&url);
        assert_eq!(r.status, 200, "{url}: {}", String::from_utf8_lossy(&r.body));
        let v = r.json();
        let items = v["items"].as_array().unwrap();
        assert!(items.len() <= limit);
        ids.extend(items.iter().map(|i| i["id"].as_str().unwrap().to_string()));
        match v["next"].as_str() {
            Some(t) => cursor = Some(t.to_string()),
            None => return ids,
        }
    }
}

#[test]
fn declare_query_drop_and_errors() {
    let s = TestServer::start();
    let mut c = s.conn();
    // Declared on a collection that does not exist yet: created, empty, so Ready at once.
    let r = put_json(&mut c, "/u/_index/age", &json!({"path": "/age"}));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["state"], "ready");
    for (id, age) in [("a", 30), ("b", 41), ("c", 30), ("d", 25)] {
        assert_eq!(
            put_json(&mut c, &format!("/u/{id}"), &json!({"age": age})).status,
            201
        );
    }
    assert_eq!(
        put_json(&mut c, "/u/e", &json!({"name": "no age"})).status,
        201
    );
    let r = c.get("/u?where=/age&eq=30");
    assert_eq!(r.status, 200);
    let v = r.json();
    let ids: Vec<&str> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "c"]);
    assert_eq!(v["items"][0]["doc"]["age"], 30);
    // The version shown is the document's ETag.
    let etag = c.get("/u/a").header("etag").unwrap().to_string();
    assert_eq!(
        format!("\"{}\"", v["items"][0]["version"].as_str().unwrap()),
        etag
    );
    // A replace moves the entry.
    assert_eq!(put_json(&mut c, "/u/a", &json!({"age": 26})).status, 200);
    assert_eq!(query_all(&mut c, "u", "where=/age&eq=30", 10), ["c"]);
    assert_eq!(
        query_all(&mut c, "u", "where=/age&gte=25&lt=30&reverse=true", 10),
        ["a", "d"]
    );
    // A delete removes it.
    assert_eq!(c.delete("/u/d").status, 204);
    assert_eq!(query_all(&mut c, "u", "where=/age&lte=26", 10), ["a"]);

    let st = c.get("/u/_index/age").json();
    assert_eq!(
        st,
        json!({"name": "age", "path": "/age", "unique": false, "state": "ready"})
    );
    // The same declaration again is no change; another definition under the name is 409.
    assert_eq!(
        put_json(&mut c, "/u/_index/age", &json!({"path": "/age"})).status,
        200
    );
    put_json(&mut c, "/u/_index/age", &json!({"path": "/other"})).assert_error(409);

    // Malformed queries and definitions: 400.
    c.get("/u?where=/age&eq=abc").assert_error(400); // strings must be quoted
    c.get("/u?where=/age&eq=[1]").assert_error(400);
    c.get("/u?where=/age&eq=1&gte=0").assert_error(400);
    c.get("/u?where=/age&gt=1&gte=0").assert_error(400);
    c.get("/u?where=/age&eq=1&limit=0").assert_error(400);
    c.get("/u?where=/age&eq=1&cursor=zz").assert_error(400);
    put_json(&mut c, "/u/_index/x", &json!({"unique": true})).assert_error(400);
    put_json(&mut c, "/u/_index/x", &json!({"path": "no-slash"})).assert_error(400);
    put_json(&mut c, "/u/_index/bad%20name", &json!({"path": "/a"})).assert_error(400);
    // Unknown index, path or collection: 404.
    c.get("/u/_index/nope").assert_error(404);
    c.get("/u?where=/name&eq=%22x%22").assert_error(404);
    c.get("/nocoll?where=/age&eq=1").assert_error(404);
    c.get("/nocoll/_index/age").assert_error(404);

    assert_eq!(c.delete("/u/_index/age").status, 204);
    c.get("/u/_index/age").assert_error(404);
    c.get("/u?where=/age&eq=30").assert_error(404);
    c.delete("/u/_index/age").assert_error(404);
    c.delete("/nocoll/_index/age").assert_error(404);
    // Declared again on the documents there: built, then the same answers.
    let r = put_json(&mut c, "/u/_index/age2", &json!({"path": "/age"}));
    assert!(r.status == 200 || r.status == 202);
    wait_ready(&mut c, "/u/_index/age2");
    assert_eq!(
        query_all(&mut c, "u", "where=/age&gte=0", 1),
        ["a", "c", "b"]
    );
}

fn wait_ready(c: &mut Conn, path: &str) -> Vec<Value> {
    let t = Instant::now();
    let mut seen = Vec::new();
    loop {
        let v = c.get(path).json();
        if v["state"] == "ready" {
            return seen;
        }
        assert_eq!(v["state"], "building", "{v}");
        seen.push(v);
        assert!(t.elapsed() < Duration::from_secs(10), "build too slow");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn unique_violation_leaves_nothing_written() {
    let s = TestServer::start();
    let mut c = s.conn();
    let r = put_json(
        &mut c,
        "/p/_index/email",
        &json!({"path": "/email", "unique": true}),
    );
    assert_eq!(r.json()["unique"], true);
    assert_eq!(
        put_json(&mut c, "/p/a", &json!({"email": "x@y"})).status,
        201
    );
    let e = put_json(&mut c, "/p/b", &json!({"email": "x@y", "n": 1})).assert_error(409);
    assert_eq!(e["detail"]["existing_id"], "a");
    assert_eq!(e["detail"]["index"], "email");
    c.get("/p/b").assert_error(404);
    // A replace of the holder keeps its value.
    assert_eq!(
        put_json(&mut c, "/p/a", &json!({"email": "x@y", "v": 2})).status,
        200
    );
    // In a bulk request, the violating item alone fails, and leaves nothing.
    let body = json!([
        {"id": "c", "doc": {"email": "c@y"}},
        {"id": "d", "doc": {"email": "x@y"}},
        {"id": "e", "doc": {"email": "e@y"}},
    ]);
    let r = c.post("/p/_bulk", &body.to_string());
    assert_eq!(r.status, 200);
    let st: Vec<u64> = r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["status"].as_u64().unwrap())
        .collect();
    assert_eq!(st, [201, 409, 201]);
    c.get("/p/d").assert_error(404);
    // The feed has one record per write that landed, none for the refused ones.
    let ch = lines(&c.get("/p/_changes?since=0").body);
    let ids: Vec<&str> = ch.iter().map(|x| x["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "a", "c", "e"]);
    let seqs: Vec<u64> = ch.iter().map(|x| x["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(
        query_all(&mut c, "p", "where=/email&eq=%22x%40y%22", 5),
        ["a"]
    );
    // Once the holder lets the value go, another document may take it.
    assert_eq!(c.delete("/p/a").status, 204);
    assert_eq!(
        put_json(&mut c, "/p/b", &json!({"email": "x@y"})).status,
        201
    );
    assert_eq!(
        query_all(&mut c, "p", "where=/email&eq=%22x%40y%22", 5),
        ["b"]
    );
    // A unique index declared over duplicates fails to build, and says why.
    assert_eq!(put_json(&mut c, "/p/f", &json!({"k": 1})).status, 201);
    assert_eq!(put_json(&mut c, "/p/g", &json!({"k": 1})).status, 201);
    put_json(
        &mut c,
        "/p/_index/k",
        &json!({"path": "/k", "unique": true}),
    );
    let t = Instant::now();
    let v = loop {
        let v = c.get("/p/_index/k").json();
        if v["state"] != "building" {
            break v;
        }
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(v["state"], "failed");
    assert!(v["reason"].is_string());
    c.get("/p?where=/k&eq=1").assert_error(409);
}

/// A small deterministic generator.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

/// Brute force: the ids whose `n` passes `keep`, by (n, id), reversed if asked.
fn brute(docs: &[(String, Option<f64>)], keep: impl Fn(f64) -> bool, rev: bool) -> Vec<String> {
    let mut v: Vec<(f64, &String)> = docs
        .iter()
        .filter_map(|(id, n)| n.filter(|&x| keep(x)).map(|x| (x, id)))
        .collect();
    v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(b.1)));
    let mut ids: Vec<String> = v.into_iter().map(|(_, id)| id.clone()).collect();
    if rev {
        ids.reverse();
    }
    ids
}

/// Bulk-writes `count` documents with a numeric `n` (a few without); returns the model.
fn fill(c: &mut Conn, coll: &str, count: usize, seed: u64) -> Vec<(String, Option<f64>)> {
    let mut g = Lcg(seed);
    let mut model = Vec::new();
    let mut items = Vec::new();
    for i in 0..count {
        let id = format!("d{:04}", g.next() % 10_000);
        if model.iter().any(|(m, _): &(String, Option<f64>)| *m == id) {
            continue;
        }
        let n = match g.next() % 10 {
            0 => None,
            1 => Some(-((g.next() % 50) as f64) - 0.5),
            _ => Some((g.next() % 40) as f64),
        };
        let doc = match n {
            Some(x) => json!({"n": x, "i": i}),
            None => json!({"i": i}),
        };
        items.push(json!({"id": id, "doc": doc}));
        model.push((id, n));
    }
    let r = c.post(&format!("/{coll}/_bulk"), &Value::Array(items).to_string());
    assert_eq!(r.status, 200);
    model
}

#[test]
fn range_queries_with_continuation_match_brute_force() {
    let s = TestServer::start();
    let mut c = s.conn();
    put_json(&mut c, "/r/_index/n", &json!({"path": "/n"}));
    let model = fill(&mut c, "r", 300, 7);
    type Keep = Box<dyn Fn(f64) -> bool>;
    let cases: Vec<(&str, Keep)> = vec![
        ("eq=7", Box::new(|x| x == 7.0)),
        ("gte=10&lt=20", Box::new(|x| (10.0..20.0).contains(&x))),
        ("gt=10&lte=20", Box::new(|x| x > 10.0 && x <= 20.0)),
        ("gt=-10.5", Box::new(|x| x > -10.5)),
        ("lt=0", Box::new(|x| x < 0.0)),
        ("gte=-100", Box::new(|_| true)),
        ("gte=30&lte=5", Box::new(|_| false)),
        ("gte=%22a%22", Box::new(|_| false)), // strings sort after every number
        ("lte=true", Box::new(|_| false)),    // booleans before every number
    ];
    for (params, keep) in &cases {
        for rev in [false, true] {
            let want = brute(&model, keep, rev);
            for limit in [1, 7, 1000] {
                let p = format!("where={}&{params}&reverse={rev}", q("/n"));
                assert_eq!(query_all(&mut c, "r", &p, limit), want, "{p} limit {limit}");
            }
        }
    }
    // A continuation survives writes between pages: no entry present throughout is skipped
    // or repeated.
    let p = format!("where={}&gte=0", q("/n"));
    let first = c.get(&format!("/r?{p}&limit=10")).json();
    let token = first["next"].as_str().unwrap().to_string();
    let got_first: Vec<String> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(c.delete(&format!("/r/{}", got_first[9])).status, 204);
    let mut rest = Vec::new();
    let mut cursor = Some(token);
    while let Some(t) = cursor {
        let v = c.get(&format!("/r?{p}&limit=50&cursor={t}")).json();
        rest.extend(
            v["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["id"].as_str().unwrap().to_string()),
        );
        cursor = v["next"].as_str().map(str::to_string);
    }
    let want = brute(&model, |x| x >= 0.0, false);
    assert_eq!([got_first, rest].concat(), want);
}

#[test]
fn background_build_then_query() {
    let s = TestServer::start_with(|c| c.build_batch = 10, common::app);
    let mut c = s.conn();
    let mut model = fill(&mut c, "bg", 400, 11);
    let r = put_json(&mut c, "/bg/_index/n", &json!({"path": "/n"}));
    assert_eq!(r.status, 202, "{}", String::from_utf8_lossy(&r.body));
    assert_eq!(r.json()["state"], "building");
    // Writes go on during the build, on both sides of its cursor.
    for (i, id) in ["d0000", "d5000", "d9999"].iter().enumerate() {
        let n = 100.0 + i as f64;
        assert!(put_json(&mut c, &format!("/bg/{id}"), &json!({"n": n})).status < 300);
        model.retain(|(m, _)| m != id);
        model.push((id.to_string(), Some(n)));
    }
    // Queries during the build are refused with the progress, never answered partially.
    let r = c.get("/bg?where=/n&gte=0");
    if r.status != 200 {
        let e = r.assert_error(409);
        assert!(e["detail"]["done"].as_u64().unwrap() <= e["detail"]["total"].as_u64().unwrap());
    }
    let seen = wait_ready(&mut c, "/bg/_index/n");
    for v in &seen {
        assert!(v["done"].as_u64().unwrap() <= v["total"].as_u64().unwrap());
    }
    for limit in [13, 1000] {
        assert_eq!(
            query_all(&mut c, "bg", "where=/n&gte=-1000", limit),
            brute(&model, |_| true, false)
        );
    }
    assert_eq!(
        query_all(&mut c, "bg", "where=/n&gte=100", 5),
        ["d0000", "d5000", "d9999"]
    );
}

/// A server-sent-events reader over a plain socket.
struct Sse {
    r: BufReader<TcpStream>,
}

impl Sse {
    fn open(addr: SocketAddr, path: &str, last_event_id: Option<u64>) -> Sse {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\n");
        if let Some(id) = last_event_id {
            req.push_str(&format!("Last-Event-ID: {id}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut r = BufReader::new(s);
        let mut status = String::new();
        r.read_line(&mut status).unwrap();
        assert!(status.contains(" 200 "), "{status}");
        let mut ct = false;
        loop {
            let mut h = String::new();
            r.read_line(&mut h).unwrap();
            if h.trim().is_empty() {
                break;
            }
            ct |= h.to_ascii_lowercase().contains("text/event-stream");
        }
        assert!(ct, "content type");
        Sse { r }
    }

    /// The next event: (id, data).
    fn next(&mut self) -> (u64, Value) {
        let (mut id, mut data) = (None, None);
        loop {
            let mut l = String::new();
            assert!(self.r.read_line(&mut l).unwrap() > 0, "stream ended");
            let l = l.trim_end_matches(['\r', '\n']);
            if let Some(v) = l.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            } else if let Some(v) = l.strip_prefix("data: ") {
                data = Some(serde_json::from_str(v).unwrap());
            } else if l.is_empty() {
                if let (Some(i), Some(d)) = (id, data.take()) {
                    return (i, d);
                }
            }
            // Anything else: chunk sizes of the transfer encoding, comments.
        }
    }
}

#[test]
fn feed_lines_longpoll_and_sse() {
    let s = TestServer::start();
    let mut c = s.conn();
    c.get("/f/_changes").assert_error(404);
    for i in 0..3 {
        put_json(&mut c, &format!("/f/k{i}"), &json!({"i": i}));
    }
    assert_eq!(c.delete("/f/k1").status, 204);
    let r = c.get("/f/_changes?since=0");
    assert_eq!(r.header("content-type"), Some("application/x-ndjson"));
    let ch = lines(&r.body);
    assert_eq!(ch.len(), 4);
    assert_eq!(
        ch[3],
        json!({"seq": 4, "id": "k1", "kind": "delete", "version": null, "time_ms": ch[3]["time_ms"]})
    );
    assert_eq!(ch[0]["kind"], "put");
    let etag = c.get("/f/k0").header("etag").unwrap().to_string();
    assert_eq!(format!("\"{}\"", ch[0]["version"].as_str().unwrap()), etag);
    assert_eq!(
        lines(&c.get("/f/_changes?since=2&limit=1").body)[0]["seq"],
        3
    );
    assert!(c.get("/f/_changes?since=4").body.is_empty());
    c.get("/f/_changes?since=x").assert_error(400);
    c.get("/f/_changes?feed=bogus").assert_error(400);
    c.get("/f/_changes?limit=0").assert_error(400);

    // Long poll: nothing after 4 yet; a write 150 ms later answers it at once.
    let t = Instant::now();
    let r = c.get("/f/_changes?since=4&feed=longpoll&timeout=100");
    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
    assert!(t.elapsed() >= Duration::from_millis(100));
    let addr = s.addr;
    let w = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(150));
        let mut c = Conn::connect(addr);
        put_json(&mut c, "/f/late", &json!({}));
    });
    let t = Instant::now();
    let r = c.get("/f/_changes?since=4&feed=longpoll&timeout=5000");
    let took = t.elapsed();
    w.join().unwrap();
    let ch = lines(&r.body);
    assert_eq!(ch.len(), 1);
    assert_eq!(
        (ch[0]["seq"].as_u64(), ch[0]["id"].as_str()),
        (Some(5), Some("late"))
    );
    assert!(took < Duration::from_secs(2), "{took:?}");

    // SSE: the history after `since`, then writes as they commit.
    let mut sse = Sse::open(s.addr, "/f/_changes?feed=sse&since=2", None);
    assert_eq!(sse.next().0, 3);
    assert_eq!(sse.next().0, 4);
    assert_eq!(sse.next().0, 5);
    let t = Instant::now();
    put_json(&mut c, "/f/live", &json!({"x": 1}));
    let (id, d) = sse.next();
    assert_eq!((id, d["id"].as_str()), (6, Some("live")));
    assert!(t.elapsed() < Duration::from_secs(2));
    drop(sse);
    // Resumed with Last-Event-ID (it wins over `since`): from 5 on.
    let mut sse = Sse::open(s.addr, "/f/_changes?feed=sse&since=0", Some(5));
    assert_eq!(sse.next().0, 6);
    put_json(&mut c, "/f/more", &json!({}));
    assert_eq!(sse.next().0, 7);
    drop(sse);
    c.send(
        "GET",
        "/f/_changes?feed=sse",
        &[("Last-Event-ID", "x")],
        b"",
    )
    .unwrap()
    .assert_error(400);
}

/// A reader that follows the feed through a server restart gets every committed write
/// exactly once, in order: sequence numbers 1..=n with no gap and no repeat, each the write
/// it names.
#[test]
fn feed_never_skips_or_repeats_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let mut written: Vec<String> = Vec::new();
    let mut got: Vec<(u64, String)> = Vec::new();
    let mut since = 0;
    for round in 0..3 {
        let p = path.clone();
        let s = TestServer::start_with(move |c| c.path = p, common::app);
        let mut c = s.conn();
        let first = format!("start{round}");
        assert!(put_json(&mut c, &format!("/rs/{first}"), &json!({})).status < 300);
        written.push(first);
        let mut sse = Sse::open(
            s.addr,
            &format!("/rs/_changes?feed=sse&since={since}"),
            None,
        );
        // A writer on another connection while the stream follows.
        let addr = s.addr;
        let w = std::thread::spawn(move || {
            let mut c = Conn::connect(addr);
            let mut ids = Vec::new();
            for i in 0..40 {
                let id = format!("r{round}-{}", i % 25);
                if i % 7 == 6 {
                    let _ = c.delete(&format!("/rs/{id}"));
                }
                assert!(put_json(&mut c, &format!("/rs/{id}"), &json!({"i": i})).status < 300);
                ids.push(id);
            }
            ids
        });
        let ids = w.join().unwrap();
        // The deletes that found a document are writes too: read what the feed says with the
        // JSON-lines route and check the stream against it.
        let all = lines(&c.get(&format!("/rs/_changes?since={since}")).body);
        assert!(all.len() >= ids.len());
        for want in &all {
            let (id, d) = sse.next();
            assert_eq!(id, want["seq"].as_u64().unwrap());
            assert_eq!(d, *want);
            got.push((id, d["id"].as_str().unwrap().to_string()));
            since = id;
        }
        written.extend(ids);
        drop(sse);
        drop(s); // stops the server; the next round reopens the same directory
    }
    let seqs: Vec<u64> = got.iter().map(|g| g.0).collect();
    assert_eq!(seqs, (1..=got.len() as u64).collect::<Vec<_>>());
    // Every put written is in the feed, in order (deletes interleaved).
    let mut it = got.iter().map(|g| &g.1);
    for w in &written {
        assert!(it.any(|g| g == w), "{w} missing or out of order");
    }
    // And a server started again still numbers on from the last.
    let p = path.clone();
    let s = TestServer::start_with(move |c| c.path = p, common::app);
    let mut c = s.conn();
    put_json(&mut c, "/rs/after", &json!({}));
    let ch = lines(&c.get(&format!("/rs/_changes?since={since}")).body);
    assert_eq!(ch.len(), 1);
    assert_eq!(ch[0]["seq"].as_u64(), Some(since + 1));
}

/// Concurrent writers racing for one value of a unique index: exactly one wins, the others
/// get 409 and leave nothing.
#[test]
fn unique_under_concurrent_writers() {
    let s = TestServer::start();
    let mut c = s.conn();
    put_json(
        &mut c,
        "/cu/_index/v",
        &json!({"path": "/v", "unique": true}),
    );
    for round in 0..5 {
        let addr = s.addr;
        let ts: Vec<_> = (0..8)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut c = Conn::connect(addr);
                    put_json(&mut c, &format!("/cu/t{t}-r{round}"), &json!({"v": round})).status
                })
            })
            .collect();
        let st: Vec<u16> = ts.into_iter().map(|t| t.join().unwrap()).collect();
        assert_eq!(st.iter().filter(|&&x| x == 201).count(), 1, "{st:?}");
        assert_eq!(st.iter().filter(|&&x| x == 409).count(), 7, "{st:?}");
        let held = query_all(&mut c, "cu", &format!("where=/v&eq={round}"), 10);
        assert_eq!(held.len(), 1);
    }
    let all = c.get("/cu?limit=1000").json();
    assert_eq!(all["items"].as_array().unwrap().len(), 5);
    assert_eq!(lines(&c.get("/cu/_changes").body).len(), 5);
}

/// A build cut by a server stop resumes when the server starts again, and ends right.
#[test]
fn build_resumes_after_restart() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().to_path_buf();
    let s = TestServer::start_with(move |c| (c.path, c.build_batch) = (p, 2), common::app);
    let mut c = s.conn();
    let model = fill(&mut c, "rb", 300, 5);
    let r = put_json(&mut c, "/rb/_index/n", &json!({"path": "/n"}));
    assert_eq!(r.status, 202);
    drop(c);
    drop(s);
    // The builder stops at its next step; let it let go of the environment.
    std::thread::sleep(Duration::from_millis(300));
    let p = dir.path().to_path_buf();
    let s = TestServer::start_with(move |c| (c.path, c.build_batch) = (p, 50), common::app);
    let mut c = s.conn();
    wait_ready(&mut c, "/rb/_index/n");
    assert_eq!(
        query_all(&mut c, "rb", "where=/n&gte=-1000", 1000),
        brute(&model, |_| true, false)
    );
}
