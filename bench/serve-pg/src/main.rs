//! The PostgreSQL peer of `make bench-serve` (bench/serve/run.py, docs/bench/serve/README.md):
//! the same two routes as `cairn serve` under load, over one JSONB table, on the same HTTP
//! stack (axum on hyper/tokio).
//!
//! - `POST /{collection}`: a JSON object in; stored under a new sortable id in its own
//!   (autocommit) transaction; 201 with `Location` and `{"id": ...}` once PostgreSQL has
//!   committed it (the cluster runs with `synchronous_commit = on`: the WAL is flushed).
//! - `GET /{collection}/{id}`: the document, or 404.
//! - `PUT /{collection}/_index/{name}` and `GET /{collection}?where=PATH&gte=..&lt=..`: a btree
//!   expression index and range queries on it, mirroring `cairn serve`'s (module `index`).
//!
//! Usage: `cairn-bench-serve-pg LISTEN CONNINFO POOL` (e.g. `127.0.0.1:0
//! "host=/tmp/x dbname=bench" 8`); prints `listening on ADDR` once ready. The pool is POOL
//! PostgreSQL connections, taken round-robin; tokio-postgres pipelines the statements of the
//! requests that share one.

mod index;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use tokio_postgres::types::Json;
use tokio_postgres::{Client, NoTls, Statement};

struct Conn {
    client: Client,
    insert: Statement,
    select: Statement,
    /// The queries' statements (module `index`).
    statements: index::Statements,
}

struct Pool {
    conns: Vec<Conn>,
    next: AtomicUsize,
    /// Ids: microseconds since the epoch at start-up, then +1 per document, as 16 hex digits
    /// (sortable, unique for this process).
    id: AtomicU64,
    /// Indexed JSON pointers and their text-array literals (module `index`).
    paths: Mutex<HashMap<String, String>>,
}

impl Pool {
    fn conn(&self) -> &Conn {
        &self.conns[self.next.fetch_add(1, Ordering::Relaxed) % self.conns.len()]
    }
}

fn error(status: StatusCode, msg: impl std::fmt::Display) -> Response {
    let body = serde_json::json!({ "error": msg.to_string() }).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn create(
    State(pool): State<Arc<Pool>>,
    Path(coll): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
    {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "content-type must be application/json",
        );
    }
    let doc: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the document must be a JSON object",
            )
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let id = format!("{:016x}", pool.id.fetch_add(1, Ordering::Relaxed));
    let c = pool.conn();
    match c
        .client
        .execute(&c.insert, &[&coll, &id, &Json(&doc)])
        .await
    {
        Ok(_) => {
            let loc = format!("/{coll}/{id}");
            let body = serde_json::json!({ "id": id }).to_string();
            (
                StatusCode::CREATED,
                [
                    (header::LOCATION, loc),
                    (header::CONTENT_TYPE, "application/json".to_string()),
                ],
                body,
            )
                .into_response()
        }
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

async fn read(State(pool): State<Arc<Pool>>, Path((coll, id)): Path<(String, String)>) -> Response {
    let c = pool.conn();
    match c.client.query_opt(&c.select, &[&coll, &id]).await {
        // The JSONB column read as text: PostgreSQL's own rendering of the stored document.
        Ok(Some(row)) => {
            let doc: String = row.get(0);
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, "application/json")],
                doc,
            )
                .into_response()
        }
        Ok(None) => error(StatusCode::NOT_FOUND, "no such document"),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 4 {
        eprintln!("usage: cairn-bench-serve-pg LISTEN CONNINFO POOL");
        std::process::exit(2);
    }
    let size: usize = args[3].parse().expect("POOL: a number");
    let mut conns = Vec::with_capacity(size);
    for _ in 0..size {
        let (client, conn) = tokio_postgres::connect(&args[2], NoTls)
            .await
            .expect("connect");
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                eprintln!("postgres connection: {e}");
            }
        });
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS docs (coll text NOT NULL, id text NOT NULL, \
                 doc jsonb NOT NULL, PRIMARY KEY (coll, id))",
            )
            .await
            .expect("create table");
        let insert = client
            .prepare("INSERT INTO docs (coll, id, doc) VALUES ($1, $2, $3)")
            .await
            .expect("prepare");
        let select = client
            .prepare("SELECT doc::text FROM docs WHERE coll = $1 AND id = $2")
            .await
            .expect("prepare");
        conns.push(Conn {
            client,
            insert,
            select,
            statements: Default::default(),
        });
    }
    let start = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let pool = Arc::new(Pool {
        conns,
        next: AtomicUsize::new(0),
        id: AtomicU64::new(start),
        paths: Mutex::default(),
    });
    let app = Router::new()
        .route("/{coll}", post(create).get(index::query))
        .route("/{coll}/_index/{name}", put(index::put_index))
        .route("/{coll}/{id}", get(read))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(&args[1]).await.expect("bind");
    println!("listening on {}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.expect("serve");
}
