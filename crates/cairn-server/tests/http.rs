//! The HTTP API against a real server on a loopback port: every route, every error, and
//! concurrent writers checked afterwards.

mod common;

use common::{Conn, TestServer};
use serde_json::{json, Value};
use std::time::Duration;

#[test]
fn health_and_stats() {
    let s = TestServer::start();
    let mut c = s.conn();
    let r = c.get("/_health");
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["status"], "ok");
    assert_eq!(c.put("/a/1", "{}").status, 201);
    assert_eq!(c.put("/a/2", "{}").status, 201);
    assert_eq!(c.put("/b/1", "{}").status, 201);
    let st = c.get("/_stats").json();
    assert_eq!(st["collections"]["a"]["documents"], 2);
    assert_eq!(st["collections"]["b"]["documents"], 1);
    // The default: durable through the commit log.
    assert_eq!(st["env"]["durability"], "logged");
    assert!(st["env"]["max_key_size"].as_u64().unwrap() > 100);
}

#[test]
fn put_get_replace_delete() {
    let s = TestServer::start();
    let mut c = s.conn();
    let doc = r#"{"name": "Ada", "langs": ["en", "fr"], "n": 1.5}"#;
    let r = c.put("/users/ada", &format!("  {doc}\n"));
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("/users/ada"));
    let v1 = r.header("etag").unwrap().to_string();
    assert_eq!(r.json()["id"], "ada");
    assert_eq!(format!("\"{}\"", r.json()["version"].as_str().unwrap()), v1);

    let r = c.get("/users/ada");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.body,
        doc.as_bytes(),
        "the stored bytes are the client's, trimmed"
    );
    assert_eq!(r.header("etag"), Some(v1.as_str()));
    assert_eq!(r.header("content-type"), Some("application/json"));

    let r = c.put("/users/ada", r#"{"name": "Ada L."}"#);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("location"), None);
    let v2 = r.header("etag").unwrap().to_string();
    assert_ne!(v1, v2);
    assert_eq!(c.get("/users/ada").json()["name"], "Ada L.");

    // Ids are path segments, percent-decoded; Location encodes them again.
    let r = c.put("/users/a%20b%2Fc", "{}");
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("/users/a%20b%2Fc"));
    assert_eq!(c.get("/users/a%20b%2Fc").status, 200);

    assert_eq!(c.delete("/users/ada").status, 204);
    c.get("/users/ada").assert_error(404);
    c.delete("/users/ada").assert_error(404);
    c.delete("/nobody/ada").assert_error(404);
}

/// A plain `GET /{collection}/{id}` is answered without the router (the server's module
/// `fast`); the same read spelled with a percent-encoded character goes through the router.
/// Both must answer alike, successes and errors.
#[test]
fn reads_by_id_answer_alike_with_and_without_the_router() {
    let s = TestServer::start();
    let mut c = s.conn();
    let r = c.put("/users/abc", r#"{"name": "Ada"}"#);
    assert_eq!(r.status, 201);
    let etag = r.header("etag").unwrap().to_string();
    let long = "k".repeat(3000);
    let same = |c: &mut Conn, plain: &str, encoded: &str, headers: &[(&str, &str)]| {
        let a = c.send("GET", plain, headers, b"").unwrap();
        let b = c.send("GET", encoded, headers, b"").unwrap();
        let mut ha: Vec<_> = a.headers.iter().filter(|(k, _)| k != "date").collect();
        let mut hb: Vec<_> = b.headers.iter().filter(|(k, _)| k != "date").collect();
        ha.sort();
        hb.sort();
        assert_eq!(
            (a.status, &ha, &a.body),
            (b.status, &hb, &b.body),
            "{plain}"
        );
        a.status
    };
    assert_eq!(same(&mut c, "/users/abc", "/users/ab%63", &[]), 200);
    let inm = [("If-None-Match", etag.as_str())];
    assert_eq!(same(&mut c, "/users/abc", "/users/ab%63", &inm), 304);
    let other = [("If-None-Match", "\"ffffff\"")];
    assert_eq!(same(&mut c, "/users/abc", "/users/ab%63", &other), 200);
    assert_eq!(same(&mut c, "/users/abd", "/users/ab%64", &[]), 404);
    assert_eq!(same(&mut c, "/nobody/abc", "/nobod%79/abc", &[]), 404);
    let (plain, encoded) = (
        format!("/users/{long}"),
        format!("/users/k%6B{}", &long[2..]),
    );
    assert_eq!(same(&mut c, &plain, &encoded, &[]), 400);
    assert_eq!(same(&mut c, "/us~ers/abc", "/us%7Eers/abc", &[]), 400);
}

#[test]
fn reads_after_a_restart_before_any_write() {
    // A server that has not written a collection since it started reads it by name first,
    // then through its kept handle: both give the stored document and its ETag.
    let dir = tempfile::tempdir().unwrap();
    let etag = {
        let p = dir.path().to_path_buf();
        let s = TestServer::start_with(move |c| c.path = p, common::app);
        let mut c = s.conn();
        assert_eq!(c.put("/r/a", r#"{"n":1}"#).status, 201);
        assert_eq!(c.put("/r/b", r#"{"n":2}"#).status, 201);
        c.get("/r/a").header("etag").unwrap().to_string()
    };
    let p = dir.path().to_path_buf();
    let s = TestServer::start_with(move |c| c.path = p, common::app);
    let mut c = s.conn();
    for _ in 0..3 {
        let r = c.get("/r/a");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("etag"), Some(etag.as_str()));
        assert_eq!(
            serde_json::from_slice::<Value>(&r.body).unwrap(),
            json!({"n": 1})
        );
        c.get("/r/zz").assert_error(404);
        c.get("/nope/a").assert_error(404);
    }
    assert_eq!(c.get("/r/b").status, 200);
}

#[test]
fn post_assigns_sortable_ids() {
    let s = TestServer::start();
    let mut c = s.conn();
    let mut ids = Vec::new();
    for i in 0..50 {
        let r = c.post("/events", &format!(r#"{{"i": {i}}}"#));
        assert_eq!(r.status, 201);
        let id = r.json()["id"].as_str().unwrap().to_string();
        assert_eq!(r.header("location").unwrap(), format!("/events/{id}"));
        assert!(r.header("etag").is_some());
        ids.push(id);
    }
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(ids, sorted, "ids sort in creation order");
    let list = c.get("/events?limit=1000").json();
    let listed: Vec<i64> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| it["doc"]["i"].as_i64().unwrap())
        .collect();
    assert_eq!(listed, (0..50).collect::<Vec<_>>());
}

#[test]
fn conditional_requests() {
    let s = TestServer::start();
    let mut c = s.conn();
    let json_ct = ("Content-Type", "application/json");
    // If-None-Match: * makes a PUT create-only.
    let r = c
        .send(
            "PUT",
            "/c/x",
            &[json_ct, ("If-None-Match", "*")],
            b"{\"v\":1}",
        )
        .unwrap();
    assert_eq!(r.status, 201);
    let v1 = r.header("etag").unwrap().to_string();
    let r = c
        .send(
            "PUT",
            "/c/x",
            &[json_ct, ("If-None-Match", "*")],
            b"{\"v\":2}",
        )
        .unwrap();
    r.assert_error(412);
    assert_eq!(
        c.get("/c/x").json()["v"],
        1,
        "a failed condition writes nothing"
    );

    // If-Match: the current version passes, another fails.
    let r = c
        .send(
            "PUT",
            "/c/x",
            &[json_ct, ("If-Match", "\"99\"")],
            b"{\"v\":3}",
        )
        .unwrap();
    let e = r.assert_error(412);
    assert_eq!(
        format!("\"{}\"", e["detail"]["version"].as_str().unwrap()),
        v1
    );
    let r = c
        .send(
            "PUT",
            "/c/x",
            &[json_ct, ("If-Match", &format!("\"1\", {v1}"))],
            b"{\"v\":4}",
        )
        .unwrap();
    assert_eq!(r.status, 200);
    let v2 = r.header("etag").unwrap().to_string();
    // If-Match on a missing document fails, and does not create the collection.
    c.send("PUT", "/fresh/x", &[json_ct, ("If-Match", "*")], b"{}")
        .unwrap()
        .assert_error(412);
    c.get("/fresh").assert_error(404);

    // GET with a matching If-None-Match: 304 with the ETag, no body.
    let r = c
        .send("GET", "/c/x", &[("If-None-Match", &v2)], b"")
        .unwrap();
    assert_eq!(r.status, 304);
    assert_eq!(r.header("etag"), Some(v2.as_str()));
    assert!(r.body.is_empty());
    let r = c
        .send("GET", "/c/x", &[("If-None-Match", &v1)], b"")
        .unwrap();
    assert_eq!(r.status, 200);

    // DELETE with If-Match.
    c.send("DELETE", "/c/x", &[("If-Match", &v1)], b"")
        .unwrap()
        .assert_error(412);
    let r = c.send("DELETE", "/c/x", &[("If-Match", &v2)], b"").unwrap();
    assert_eq!(r.status, 204);

    // A document deleted and created again never gets back an earlier ETag.
    let r = c.put("/c/x", "{}");
    let v3 = r.header("etag").unwrap().to_string();
    assert!(v3 != v1 && v3 != v2);
}

#[test]
fn bulk_writes_in_one_transaction() {
    let s = TestServer::start();
    let mut c = s.conn();
    assert_eq!(c.put("/b/keep", r#"{"k":0}"#).status, 201);
    let etag = c.get("/b/keep").header("etag").unwrap().to_string();
    let body = json!([
        {"id": "one", "doc": {"n": 1}},
        {"doc": {"n": 2}},
        {"id": "keep", "op": "create", "doc": {"n": 3}},
        {"id": "keep", "if_match": "ffff", "doc": {"n": 4}},
        {"id": "keep", "if_match": etag, "doc": {"n": 5}},
        {"id": "ghost", "op": "delete"},
        {"id": "one", "op": "delete"},
        {"id": "_bad", "doc": {}},
    ]);
    let r = c.post("/b/_bulk", &body.to_string());
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let res = r.json()["results"].as_array().unwrap().clone();
    let statuses: Vec<u64> = res.iter().map(|x| x["status"].as_u64().unwrap()).collect();
    assert_eq!(statuses, [201, 201, 412, 412, 200, 404, 200, 400]);
    assert_eq!(res[1]["id"].as_str().unwrap().len(), 26, "an assigned id");
    // Versions are the collection's feed sequence numbers: the items written get consecutive
    // ones, in order (keep was 1; one, the assigned id and keep again are 2, 3, 4).
    let ver = |v: &Value| u64::from_str_radix(v.as_str().unwrap(), 16).unwrap();
    assert_eq!(
        [
            ver(&res[0]["version"]),
            ver(&res[1]["version"]),
            ver(&res[4]["version"])
        ],
        [2, 3, 4]
    );
    assert_eq!(c.get("/b/keep").json()["n"], 5);
    c.get("/b/one").assert_error(404);
    let assigned = res[1]["id"].as_str().unwrap();
    assert_eq!(c.get(&format!("/b/{assigned}")).json()["n"], 2);

    // A malformed item fails the whole request, and nothing of it is written.
    let bad = json!([{"id": "new1", "doc": {}}, {"id": "x", "op": "frobnicate"}]);
    let e = c.post("/b/_bulk", &bad.to_string()).assert_error(400);
    assert_eq!(e["detail"]["index"], 1);
    c.get("/b/new1").assert_error(404);
    let bad = json!([{"id": "new2", "doc": []}]);
    c.post("/b/_bulk", &bad.to_string()).assert_error(400);
    c.post("/b/_bulk", "{}").assert_error(400);
    c.post("/b/_bulk", "[1,").assert_error(400);
}

#[test]
fn listing_with_ranges_and_cursor() {
    let s = TestServer::start();
    let mut c = s.conn();
    for i in 0..25 {
        assert_eq!(
            c.put(&format!("/l/k{i:02}"), &format!(r#"{{"i":{i}}}"#))
                .status,
            201
        );
    }
    let ids = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = c.get("/l").json();
    assert_eq!(ids(&all).len(), 25);
    assert!(all["next"].is_null());
    assert_eq!(all["items"][3]["doc"]["i"], 3);
    assert!(all["items"][3]["version"].is_string());

    // Pages of 10 with the cursor, forward and backward.
    for reverse in [false, true] {
        let mut got = Vec::new();
        let mut url = format!("/l?limit=10&reverse={reverse}");
        let mut pages = 0;
        loop {
            let p = c.get(&url).json();
            got.extend(ids(&p));
            pages += 1;
            match p["next"].as_str() {
                Some(n) => url = format!("/l?limit=10&reverse={reverse}&cursor={n}"),
                None => break,
            }
        }
        assert_eq!(pages, 3);
        let mut want: Vec<String> = (0..25).map(|i| format!("k{i:02}")).collect();
        if reverse {
            want.reverse();
        }
        assert_eq!(got, want);
    }
    // start inclusive, end exclusive, both ways.
    assert_eq!(
        ids(&c.get("/l?start=k05&end=k08").json()),
        ["k05", "k06", "k07"]
    );
    assert_eq!(
        ids(&c.get("/l?start=k05&end=k08&reverse=true").json()),
        ["k07", "k06", "k05"]
    );
    let p = c.get("/l?start=k05&end=k08&limit=2").json();
    let n = p["next"].as_str().unwrap();
    assert_eq!(
        ids(&c
            .get(&format!("/l?start=k05&end=k08&limit=2&cursor={n}"))
            .json()),
        ["k07"]
    );
    assert!(ids(&c.get("/l?start=k09&end=k03").json()).is_empty());

    c.get("/l?limit=0").assert_error(400);
    c.get("/l?limit=5000").assert_error(400);
    c.get("/l?limit=x").assert_error(400);
    c.get("/l?cursor=zz").assert_error(400);
    c.get("/nothing").assert_error(404);
}

#[test]
fn bad_input_is_a_json_error_and_changes_nothing() {
    let s = TestServer::start_with(|c| c.max_body = 4096, common::app);
    let mut c = s.conn();
    // Malformed JSON: 400 with line and column.
    let e = c
        .put("/e/x", "{\n  \"a\": 1,\n  \"b\" 2\n}")
        .assert_error(400);
    assert_eq!(
        (e["detail"]["line"].as_u64(), e["detail"]["column"].as_u64()),
        (Some(3), Some(7))
    );
    c.put("/e/x", "[1, 2]").assert_error(400);
    c.put("/e/x", "").assert_error(400);
    c.put("/e/x", r#"{"a": 1, "a": 2}"#).assert_error(400);
    c.put("/e/x", &("[".repeat(1000) + &"]".repeat(1000)))
        .assert_error(400);
    let r = c
        .send(
            "PUT",
            "/e/x",
            &[("Content-Type", "application/json")],
            b"{\"a\":\"\xff\xfe\"}",
        )
        .unwrap();
    r.assert_error(400);
    // Over the limit: 413 (declared length, and a chunked body that grows past it).
    let big = format!(r#"{{"a":"{}"}}"#, "x".repeat(5000));
    let e = c.put("/e/x", &big).assert_error(413);
    let mut c = s.conn();
    let chunk = "x".repeat(3000);
    let body = format!(
        "{:x}\r\n{chunk}\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len(),
        chunk.len()
    );
    c.write_raw(
        format!("POST /e HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n{body}")
            .as_bytes(),
    )
    .unwrap();
    c.read_response(false).unwrap().assert_error(413);
    drop(e);
    let mut c = s.conn();
    // Ids: empty, too long, reserved.
    c.put("/e/", "{}").assert_error(400);
    c.get("/e/").assert_error(400);
    let long = "k".repeat(3000);
    let e = c.put(&format!("/e/{long}"), "{}").assert_error(400);
    assert_eq!(e["error"], "id too long");
    c.get(&format!("/e/{long}")).assert_error(400);
    c.put("/e/_x", "{}").assert_error(400);
    // Collection names.
    c.put("/_x/1", "{}").assert_error(400);
    c.put("/a%20b/1", "{}").assert_error(400);
    c.put(&format!("/{}/1", "c".repeat(65)), "{}")
        .assert_error(400);
    c.get("/.hidden").assert_error(400);
    // Content type: missing or wrong is 415; a charset parameter or a +json type is fine.
    c.send("PUT", "/e/x", &[], b"{}").unwrap().assert_error(415);
    c.send("PUT", "/e/x", &[("Content-Type", "text/plain")], b"{}")
        .unwrap()
        .assert_error(415);
    c.send("POST", "/e", &[("Content-Type", "text/json")], b"{}")
        .unwrap()
        .assert_error(415);
    let r = c
        .send(
            "PUT",
            "/e/ok",
            &[("Content-Type", "application/json; charset=utf-8")],
            b"{}",
        )
        .unwrap();
    assert_eq!(r.status, 201);
    let r = c
        .send(
            "PUT",
            "/e/ok2",
            &[("Content-Type", "application/merge-patch+json")],
            b"{}",
        )
        .unwrap();
    assert_eq!(r.status, 201);
    // Unknown collection and document, unknown route, wrong method.
    c.get("/nope/x").assert_error(404);
    c.get("/e/nope").assert_error(404);
    c.get("/a/b/c").assert_error(404);
    let r = c.send("PATCH", "/e/x", &[], b"").unwrap();
    r.assert_error(405);
    c.send("DELETE", "/e", &[], b"").unwrap().assert_error(405);
    // Nothing of the refused requests was written.
    let list = c.get("/e").json();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    // The connection still works after all these (keep-alive through errors).
    assert_eq!(c.get("/_health").status, 200);
}

#[test]
fn a_panicking_handler_answers_500_json() {
    fn app(
        state: std::sync::Arc<cairn_server::AppState>,
        _: &cairn_server::Config,
    ) -> axum::Router {
        cairn_server::routes(state).route(
            "/_panic",
            axum::routing::get(|| async {
                if std::hint::black_box(true) {
                    panic!("a handler's bug");
                }
                "unreachable"
            }),
        )
    }
    let s = TestServer::start_with(|_| {}, app);
    let mut c = s.conn();
    c.get("/_panic").assert_error(500);
    let mut c = s.conn();
    assert_eq!(c.get("/_health").status, 200, "the server lives on");
}

#[test]
fn idle_and_slow_clients_are_timed_out() {
    let s = TestServer::start_with(
        |c| {
            c.header_timeout = Duration::from_millis(300);
            c.request_timeout = Duration::from_millis(500);
        },
        common::app,
    );
    // An idle keep-alive connection is closed.
    let mut c = s.conn();
    assert_eq!(c.get("/_health").status, 200);
    assert!(c.closed_within(Duration::from_secs(3)));
    // A head sent byte by byte too slowly is cut off.
    let mut c = s.conn();
    c.write_raw(b"GET /_health HTTP/1.1\r\n").unwrap();
    assert!(c.closed_within(Duration::from_secs(3)));
    // A body that never finishes: 408, as JSON.
    let mut c = s.conn();
    c.write_raw(b"PUT /t/x HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"a\":")
        .unwrap();
    c.read_response(false).unwrap().assert_error(408);
    let mut c = s.conn();
    c.get("/t/x").assert_error(404);
}

#[test]
fn a_burst_beyond_capacity_gets_503_not_a_collapse() {
    let s = TestServer::start_with(
        |c| {
            c.max_in_flight = 2;
            c.request_timeout = Duration::from_secs(10);
        },
        common::app,
    );
    // Two requests whose bodies never come hold both places.
    let hold = || {
        let mut c = s.conn();
        c.write_raw(b"PUT /t/x HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{")
            .unwrap();
        c
    };
    let mut holders: Vec<Conn> = (0..2).map(|_| hold()).collect();
    // They take their places once the server has read their heads: poll until it is full
    // (on a loaded machine that may take a moment). A poll can race a holder's head to the
    // server and take its place, and then that holder is the one answered 503: send it again.
    let mut c = s.conn();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let r = loop {
        let r = c.get("/_health");
        if r.status != 200 || std::time::Instant::now() > deadline {
            break r;
        }
        for h in &mut holders {
            if h.has_answer() {
                assert_eq!(h.read_response(false).unwrap().status, 503);
                *h = hold();
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let e = r.assert_error(503);
    assert!(e["error"].as_str().unwrap().contains("busy"));
    // Finishing them frees the places.
    for h in &mut holders {
        h.write_raw(b"\"a\":1}    ").unwrap();
        assert!(matches!(h.read_response(false).unwrap().status, 200 | 201));
    }
    assert_eq!(c.get("/_health").status, 200);
}

#[test]
fn backup_is_a_consistent_copy_taken_while_writes_go_on() {
    let s = TestServer::start();
    let mut c = s.conn();
    for i in 0..200 {
        assert_eq!(
            c.put(&format!("/bk/{i:04}"), &format!(r#"{{"i":{i}}}"#))
                .status,
            201
        );
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (addr, stop) = (s.addr, stop.clone());
        std::thread::spawn(move || {
            let mut c = Conn::connect(addr);
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                assert!(c.put(&format!("/live/{n}"), r#"{"x":1}"#).status < 300);
                n += 1;
            }
            n
        })
    };
    let r = c.get("/_backup");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("data.cairn"), &r.body).unwrap();
    let env = cairn::Env::open(dir.path()).unwrap();
    let txn = env.read_txn().unwrap();
    let db = txn.open_db(Some("doc:bk:docs")).unwrap();
    assert_eq!(txn.stat(db).unwrap().entries, 200);
    let v = txn.get(db, b"0123").unwrap().unwrap();
    assert_eq!(&v[cairn_server::store::HEADER..], br#"{"i":123}"#);
    // The copy holds a prefix of the live writes (one snapshot), no more than were made.
    let live = match txn.open_db(Some("doc:live:docs")) {
        Ok(db) => txn.stat(db).unwrap().entries,
        Err(_) => 0,
    };
    assert!(live <= written as u64);
    // The checker finds the copy sound.
    let report = txn.check().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}

#[test]
fn concurrent_writers_all_land() {
    let s = TestServer::start();
    const THREADS: usize = 16;
    const EACH: usize = 40;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let addr = s.addr;
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                let mut posted = Vec::new();
                for i in 0..EACH {
                    let body = format!(r#"{{"t":{t},"i":{i}}}"#);
                    assert_eq!(c.put(&format!("/cw/{t}-{i}"), &body).status, 201);
                    let r = c.post("/cwp", &body);
                    assert_eq!(r.status, 201);
                    // Everyone updates one shared document: the last write wins, whole.
                    assert_eq!(c.put("/cw/shared", &body).status / 100, 2);
                    posted.push((r.json()["id"].as_str().unwrap().to_string(), body));
                }
                posted
            })
        })
        .collect();
    let posted: Vec<(String, String)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let mut c = s.conn();
    let st = c.get("/_stats").json();
    assert_eq!(st["collections"]["cw"]["documents"], THREADS * EACH + 1);
    assert_eq!(st["collections"]["cwp"]["documents"], THREADS * EACH);
    for t in 0..THREADS {
        for i in 0..EACH {
            let r = c.get(&format!("/cw/{t}-{i}"));
            assert_eq!(r.json(), json!({"t": t, "i": i}));
        }
    }
    let mut ids: Vec<&str> = posted.iter().map(|(id, _)| id.as_str()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), THREADS * EACH, "assigned ids are unique");
    for (id, body) in posted.iter().step_by(7) {
        assert_eq!(c.get(&format!("/cwp/{id}")).body, body.as_bytes());
    }
    let shared = c.get("/cw/shared").json();
    assert!(shared["t"].is_u64() && shared["i"] == EACH - 1);
}

#[test]
fn lazy_mode_serves_and_says_so() {
    let s = TestServer::start_with(|c| c.lazy = true, common::app);
    let mut c = s.conn();
    assert_eq!(c.put("/z/1", r#"{"a":1}"#).status, 201);
    assert_eq!(c.get("/z/1").json()["a"], 1);
    assert_eq!(c.get("/_stats").json()["env"]["durability"], "lazy");
}

#[test]
fn page_flushing_mode_serves_and_says_so() {
    let s = TestServer::start_with(|c| c.logged = false, common::app);
    let mut c = s.conn();
    for i in 0..20 {
        assert_eq!(c.put(&format!("/z/{i}"), r#"{"a":1}"#).status, 201);
    }
    assert_eq!(c.get("/z/7").json()["a"], 1);
    assert_eq!(c.get("/_stats").json()["env"]["durability"], "durable");
}

#[test]
fn many_requests_on_one_connection() {
    let s = TestServer::start();
    let mut c = s.conn();
    for i in 0..300 {
        assert_eq!(c.put(&format!("/ka/{i}"), "{}").status, 201);
        assert_eq!(c.get(&format!("/ka/{i}")).status, 200);
    }
    // Pipelined: two requests written at once, two responses in order.
    c.write_raw(b"GET /ka/1 HTTP/1.1\r\nHost: t\r\n\r\nGET /ka/nope HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(c.read_response(false).unwrap().status, 200);
    assert_eq!(c.read_response(false).unwrap().status, 404);
}

#[test]
fn without_group_commit_each_write_commits_alone() {
    let s = TestServer::start_with(|c| c.group_commit = false, common::app);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let addr = s.addr;
            std::thread::spawn(move || {
                let mut c = Conn::connect(addr);
                for i in 0..25 {
                    assert_eq!(c.put(&format!("/ng/{t}-{i}"), "{}").status, 201);
                }
                // A refused write rolls back alone.
                c.put("/ng/x", "{\"a\":1,\"a\":2}").assert_error(400);
                c.send(
                    "PUT",
                    &format!("/ng/{t}-0"),
                    &[("Content-Type", "application/json"), ("If-None-Match", "*")],
                    b"{}",
                )
                .unwrap()
                .assert_error(412);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let mut c = s.conn();
    assert_eq!(
        c.get("/_stats").json()["collections"]["ng"]["documents"],
        100
    );
}
