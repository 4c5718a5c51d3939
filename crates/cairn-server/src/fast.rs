//! The read of one document by id, served without the router.
//!
//! Why: a GET by id is most of what a reading client sends, and axum's path to its handler
//! (the route table's match, the path parameters percent-decoded into two new strings, the
//! request's headers cloned for the handler, the handler's future boxed and its response
//! mapped) was about a tenth of the instructions of such a GET (docs/bench/serve/README.md,
//! "Session 18"). [`FastGet`] sits between the guard and the router, recognises a plain
//! `GET /{collection}/{id}` and answers it with the handler's own function
//! ([`crate::routes::read_doc`]); every other request goes to the router.
//!
//! Invariants:
//! - It answers exactly what the router's `GET /{collection}/{id}` route would: it takes
//!   only requests that route matches with nothing to decode (no `%` in the path, no query,
//!   the method GET, neither segment empty or starting with `_`, the server's own routes'
//!   mark), and runs the same function on the same arguments. Anything else, even a request
//!   the route would match, goes to the router.
//! - It adds no limit of its own: the guard around it bounds and times every request.

use crate::routes::DocAddr;
use crate::AppState;
use axum::body::Body;
use axum::http::{Method, Request};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// The router, with GETs by id taken before it (module docs).
#[derive(Clone)]
pub(crate) struct FastGet {
    state: Arc<AppState>,
    router: Router,
}

impl FastGet {
    pub(crate) fn new(state: Arc<AppState>, router: Router) -> FastGet {
        FastGet { state, router }
    }
}

type FastFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl tower::Service<Request<Body>> for FastGet {
    type Response = Response;
    type Error = Infallible;
    type Future = FastFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request<Body>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, req: Request<Body>) -> FastFuture {
        let Some(split) = doc_address(&req) else {
            return Box::pin(self.router.call(req));
        };
        let state = self.state.clone();
        let (parts, _) = req.into_parts();
        Box::pin(async move {
            // The path lives in the request's URI (shared bytes): the read takes the URI,
            // not two new strings.
            let addr = DocAddr::InPath(parts.uri, split);
            let r = crate::routes::read_doc(state, addr, &parts.headers).await;
            Ok(r.unwrap_or_else(IntoResponse::into_response))
        })
    }
}

/// Where the collection ends in the path of a request [`FastGet`] answers (the index of the
/// `/` between the two segments, after the leading one), or None for any other request.
fn doc_address<B>(req: &Request<B>) -> Option<usize> {
    if req.method() != Method::GET || req.uri().query().is_some() {
        return None;
    }
    let p = req.uri().path().strip_prefix('/')?;
    let split = p.find('/')?;
    let (coll, id) = (&p[..split], &p[split + 1..]);
    let plain = |s: &str| !s.is_empty() && !s.starts_with('_') && !s.contains(['/', '%']);
    (plain(coll) && plain(id)).then_some(split)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(method: Method, uri: &str) -> Option<(String, String)> {
        let req = Request::builder().method(method).uri(uri).body(()).unwrap();
        let split = doc_address(&req)?;
        let a = DocAddr::InPath(req.uri().clone(), split);
        let (c, i) = a.parts();
        Some((c.to_string(), i.to_string()))
    }

    #[test]
    fn takes_only_plain_gets_by_id() {
        let some = |c: &str, i: &str| Some((c.to_string(), i.to_string()));
        assert_eq!(addr(Method::GET, "/users/abc"), some("users", "abc"));
        assert_eq!(addr(Method::GET, "/u.v-w/0:1~x"), some("u.v-w", "0:1~x"));
        for uri in [
            "/users/abc?x=1", // a query: the router's
            "/users/a%20b",   // to decode
            "/us%65rs/abc",
            "/users/",          // the empty id's own route
            "/users",           // the collection's list
            "/users/abc/",      // three segments
            "/users/abc/def",   //
            "/users/_changes",  // the server's routes
            "/users/_bulk",     //
            "/_stats/x",        //
            "/users//abc",      // an empty segment
            "/",                //
            "/users/_index/ix", //
        ] {
            assert_eq!(addr(Method::GET, uri), None, "{uri}");
        }
        for m in [Method::HEAD, Method::PUT, Method::DELETE, Method::POST] {
            assert_eq!(addr(m.clone(), "/users/abc"), None, "{m}");
        }
    }
}
