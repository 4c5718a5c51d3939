//! The one error type of the HTTP layer, and how it becomes a response.
//!
//! Invariant: every response with a status of 400 or more has a JSON body
//! `{"error": "...", "detail": ...}`. Errors raised by this crate's handlers are `ApiError`s;
//! the ones raised by the middleware (a timeout's 408, the body limit's 413, load shedding's
//! 503, axum's own 404/405 and extractor rejections) are rewritten into the same shape by
//! [`json_errors`], the outermost layer, so no other body can leave the server.

use axum::body::Body;
use axum::http::{header, HeaderValue, Response, StatusCode};
use axum::response::IntoResponse;
use serde_json::{json, Value};

/// The message of the engine's `DbsFull` (507): no room for another collection's databases.
pub const TOO_MANY_COLLECTIONS: &str = "too many collections";

/// An error answered to the client: a status, a short message and optional detail.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// What went wrong, one line.
    pub error: String,
    /// Anything structured the client can use (line and column, the limit, ...); null if none.
    pub detail: Value,
}

impl ApiError {
    /// An error with no detail.
    pub fn new(status: StatusCode, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            error: error.into(),
            detail: Value::Null,
        }
    }

    /// Adds structured detail.
    pub fn with_detail(mut self, detail: Value) -> ApiError {
        self.detail = detail;
        self
    }

    /// 400.
    pub fn bad_request(msg: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, msg)
    }

    /// 404.
    pub fn not_found(msg: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, msg)
    }

    /// 412.
    pub fn precondition(msg: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::PRECONDITION_FAILED, msg)
    }

    /// 500, for what should not happen (a failed blocking task, an engine bug).
    pub fn internal(msg: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, msg)
    }

    /// The JSON body.
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&json!({"error": self.error, "detail": self.detail}))
            .unwrap_or_else(|_| br#"{"error":"unprintable error","detail":null}"#.to_vec())
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.error)
    }
}

impl From<cairn::Error> for ApiError {
    /// The engine's errors that a client can cause or must know about get their own status;
    /// the rest are the server's fault (500) and keep the engine's message as detail.
    fn from(e: cairn::Error) -> ApiError {
        use cairn::Error as E;
        let msg = e.to_string();
        let (status, error) = match &e {
            E::MapFull { .. } => (StatusCode::INSUFFICIENT_STORAGE, "the database is full"),
            E::DbsFull { .. } => (StatusCode::INSUFFICIENT_STORAGE, TOO_MANY_COLLECTIONS),
            E::ValueTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "document too large"),
            E::KeyTooLarge { .. } => (StatusCode::BAD_REQUEST, "id too long"),
            E::ReadersFull { .. } => (StatusCode::SERVICE_UNAVAILABLE, "too many readers"),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "storage error"),
        };
        ApiError::new(status, error).with_detail(Value::String(msg))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> axum::response::Response {
        let mut r = Response::new(Body::from(self.body()));
        *r.status_mut() = self.status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r.into_response()
    }
}

/// Rewrites an error response that is not JSON (from the middleware or the router) into
/// `{"error": <reason phrase>, "detail": <its text, if any>}`. Runs on every response, so it
/// only inspects headers on the success path.
pub async fn json_errors<B>(resp: Response<B>) -> axum::response::Response
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let resp = resp.map(Body::new);
    let status = resp.status();
    if status.as_u16() < 400 {
        return resp;
    }
    let is_json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if is_json {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    // The bodies rewritten here are the middleware's short texts; 4 KiB bounds the read.
    let text = match axum::body::to_bytes(body, 4096).await {
        Ok(b) if !b.is_empty() => Value::String(String::from_utf8_lossy(&b).into_owned()),
        _ => Value::Null,
    };
    let reason = status.canonical_reason().unwrap_or("error").to_lowercase();
    let mut e = ApiError::new(status, reason).with_detail(text);
    if status == StatusCode::UNSUPPORTED_MEDIA_TYPE {
        e.error = "the body must be application/json".into();
    }
    let mut r = e.into_response();
    // Keep what the middleware said besides the body (Allow on a 405, for instance).
    for (k, v) in parts.headers.iter() {
        if k != header::CONTENT_TYPE && k != header::CONTENT_LENGTH {
            r.headers_mut().insert(k.clone(), v.clone());
        }
    }
    r
}
