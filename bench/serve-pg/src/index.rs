//! Secondary indexes and range queries of the PostgreSQL peer, mirroring `cairn serve`'s
//! (docs/server.md, `PUT /{collection}/_index/{name}` and `GET /{collection}?where=`) for
//! `make bench-index-peers` (docs/bench/index).
//!
//! - `PUT /{collection}/_index/{name}` with `{"path": "/a/b", "unique": false}`: a btree
//!   expression index on `(coll, (doc #> '{a,b}'), id)` (unique: on `(coll, doc #> '{a,b}')`),
//!   created at once (`CREATE INDEX`, which holds writers off while it reads the table), then
//!   `ANALYZE`; 200 with `{"name", "path", "state": "ready", "unique"}`.
//! - `GET /{collection}?where=/a/b&gte=V&lt=W&limit=N[&reverse=true][&cursor=T]`: the documents
//!   whose value at the path lies between the bounds (`eq`, `gte`/`gt`, `lte`/`lt`, JSON
//!   literals as in Cairn), ordered by (value, id), at most `limit` (1 to 1,000, default 100):
//!   `{"items": [{"id", "doc"}...], "next": token-or-null}`. The comparison is jsonb's, which
//!   orders numbers and strings as Cairn's index keys do within one type (across types the two
//!   orders differ; the benchmark's bounds are numbers). No `version` (the table has none).
//!
//! Invariants:
//! - SQL text never holds a client's bytes: names and path segments are checked against
//!   `[A-Za-z0-9_]` (400 otherwise) before they are spliced in as identifiers and text-array
//!   literals; values travel as bound jsonb parameters.
//! - A query names a path some index of this process was declared on (404 otherwise, as
//!   Cairn answers), so the planner has the expression index to use, never a table scan by
//!   surprise.
//! - Prepared statements are cached per connection and per query shape (path, bounds,
//!   direction, cursor), so a query is one round trip, as a Cairn query is one transaction.

use crate::{error, Pool};
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use tokio_postgres::types::{Json, ToSql};

/// `[A-Za-z0-9_]+`, at most 63 bytes (PostgreSQL's identifier length).
fn plain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 63 && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A JSON pointer's segments as a PostgreSQL text-array literal (`'{a,b}'`), or `None` if it
/// is not a pointer of plain segments.
fn path_literal(p: &str) -> Option<String> {
    let segs: Vec<&str> = p.strip_prefix('/')?.split('/').collect();
    segs.iter()
        .all(|s| plain(s))
        .then(|| format!("'{{{}}}'", segs.join(",")))
}

/// `PUT /{collection}/_index/{name}`.
pub async fn put_index(
    State(pool): State<Arc<Pool>>,
    Path((_coll, name)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let spec: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let Some(path) = spec.get("path").and_then(Value::as_str) else {
        return error(StatusCode::BAD_REQUEST, "the index needs a \"path\"");
    };
    let unique = spec.get("unique").and_then(Value::as_bool).unwrap_or(false);
    let (Some(lit), true) = (path_literal(path), plain(&name)) else {
        return error(
            StatusCode::BAD_REQUEST,
            "name and path segments: [A-Za-z0-9_]",
        );
    };
    let sql = if unique {
        format!("CREATE UNIQUE INDEX IF NOT EXISTS ix_{name} ON docs (coll, (doc #> {lit}))")
    } else {
        format!("CREATE INDEX IF NOT EXISTS ix_{name} ON docs (coll, (doc #> {lit}), id)")
    };
    let c = pool.conn();
    if let Err(e) = c
        .client
        .batch_execute(&format!("{sql}; ANALYZE docs"))
        .await
    {
        return error(StatusCode::INTERNAL_SERVER_ERROR, e);
    }
    pool.paths
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(path.to_string(), lit);
    let body = json!({"name": name, "path": path, "state": "ready", "unique": unique});
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The parameters of a query (Cairn's names).
#[derive(serde::Deserialize, Default)]
pub struct RangeQuery {
    #[serde(rename = "where")]
    where_: Option<String>,
    eq: Option<String>,
    gte: Option<String>,
    gt: Option<String>,
    lte: Option<String>,
    lt: Option<String>,
    limit: Option<i64>,
    #[serde(default)]
    reverse: bool,
    cursor: Option<String>,
}

/// A refused query: its status and message (made a JSON error answer by `query`).
type Fail = (StatusCode, String);

fn bad(msg: impl std::fmt::Display) -> Fail {
    (StatusCode::BAD_REQUEST, msg.to_string())
}

/// A query parameter as a JSON literal: a number, a quoted string or a boolean.
fn literal(name: &str, s: &str) -> Result<Value, Fail> {
    match serde_json::from_str::<Value>(s) {
        Ok(v @ (Value::Number(_) | Value::String(_) | Value::Bool(_))) => Ok(v),
        _ => Err(bad(format!(
            "{name}: a JSON number, quoted string or boolean"
        ))),
    }
}

/// The comparison of one bound, and its value.
fn side(
    incl: (&'static str, &Option<String>),
    excl: (&'static str, &Option<String>),
    ops: (&'static str, &'static str),
) -> Result<Option<(&'static str, Value)>, Fail> {
    match (incl.1, excl.1) {
        (Some(_), Some(_)) => Err(bad(format!("{} and {} together", incl.0, excl.0))),
        (Some(v), None) => Ok(Some((ops.0, literal(incl.0, v)?))),
        (None, Some(v)) => Ok(Some((ops.1, literal(excl.0, v)?))),
        (None, None) => Ok(None),
    }
}

/// A continuation token: the hex of the JSON `[value, id]` of the last item returned.
fn token(v: &Value, id: &str) -> String {
    json!([v, id])
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn untoken(t: &str) -> Option<(Value, String)> {
    if !t.len().is_multiple_of(2) {
        return None;
    }
    let b: Option<Vec<u8>> = (0..t.len())
        .step_by(2)
        .map(|i| t.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok()))
        .collect();
    match serde_json::from_slice::<Value>(&b?).ok()? {
        Value::Array(mut a) if a.len() == 2 => {
            let id = a.pop()?.as_str()?.to_string();
            Some((a.pop()?, id))
        }
        _ => None,
    }
}

/// `GET /{collection}?where=...`.
pub async fn query(
    State(pool): State<Arc<Pool>>,
    Path(coll): Path<String>,
    Query(q): Query<RangeQuery>,
) -> Response {
    match run_query(&pool, &coll, &q).await {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err((status, msg)) => error(status, msg),
    }
}

async fn run_query(pool: &Pool, coll: &str, q: &RangeQuery) -> Result<String, Fail> {
    let Some(path) = &q.where_ else {
        return Err(bad("only where= queries here"));
    };
    let Some(expr) = pool
        .paths
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(path)
        .map(|lit| format!("(doc #> {lit})"))
    else {
        return Err((StatusCode::NOT_FOUND, "no index on that path".to_string()));
    };
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(bad("limit must be 1 to 1000"));
    }
    let (lo, hi) = match &q.eq {
        Some(v) if [&q.gte, &q.gt, &q.lte, &q.lt].iter().all(|b| b.is_none()) => {
            let v = literal("eq", v)?;
            (Some((">=", v.clone())), Some(("<=", v)))
        }
        Some(_) => return Err(bad("eq and a range bound together")),
        None => (
            side(("gte", &q.gte), ("gt", &q.gt), (">=", ">"))?,
            side(("lte", &q.lte), ("lt", &q.lt), ("<=", "<"))?,
        ),
    };
    let after = match &q.cursor {
        Some(t) => Some(untoken(t).ok_or_else(|| bad("bad cursor"))?),
        None => None,
    };
    // The statement: $1 the collection, then the bounds' values, the cursor's, the limit.
    let mut sql = format!("SELECT id, doc::text, {expr} FROM docs WHERE coll = $1");
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(coll.to_string())];
    for (op, v) in [lo, hi].into_iter().flatten() {
        params.push(Box::new(Json(v)));
        sql += &format!(" AND {expr} {op} ${}", params.len());
    }
    if let Some((v, id)) = after {
        params.push(Box::new(Json(v)));
        params.push(Box::new(id));
        let op = if q.reverse { "<" } else { ">" };
        let n = params.len();
        sql += &format!(" AND ({expr}, id) {op} (${}, ${n})", n - 1);
    }
    let dir = if q.reverse { "DESC" } else { "ASC" };
    // One row past the page says whether there is a next one.
    params.push(Box::new(limit + 1));
    sql += &format!(" ORDER BY {expr} {dir}, id {dir} LIMIT ${}", params.len());
    let c = pool.conn();
    let stmt = c
        .statement(&sql)
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref() as _).collect();
    let rows = c
        .client
        .query(&stmt, &refs)
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let mut body = String::from("{\"items\":[");
    let mut next = None;
    for (n, row) in rows.iter().enumerate() {
        if n as i64 == limit {
            let prev = &rows[n - 1];
            let v: Json<Value> = prev.get(2);
            next = Some(token(&v.0, prev.get(0)));
            break;
        }
        let id: &str = row.get(0);
        let doc: &str = row.get(1);
        if n > 0 {
            body.push(',');
        }
        body += "{\"id\":";
        body += &Value::from(id).to_string();
        body += ",\"doc\":";
        body += doc;
        body.push('}');
    }
    body += "],\"next\":";
    body += &next.map_or("null".to_string(), |t| format!("\"{t}\""));
    body.push('}');
    Ok(body)
}

/// Prepared statements of one connection, by SQL text.
#[derive(Default)]
pub struct Statements(std::sync::Mutex<HashMap<String, tokio_postgres::Statement>>);

impl crate::Conn {
    /// The prepared statement of `sql` on this connection (prepared on first use).
    async fn statement(
        &self,
        sql: &str,
    ) -> Result<tokio_postgres::Statement, tokio_postgres::Error> {
        let cached = self
            .statements
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sql)
            .cloned();
        if let Some(s) = cached {
            return Ok(s);
        }
        let s = self.client.prepare(sql).await?;
        self.statements
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sql.to_string(), s.clone());
        Ok(s)
    }
}
