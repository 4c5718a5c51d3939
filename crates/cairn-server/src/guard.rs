//! The server's guard: the one middleware every request of the document routes passes
//! through. It bounds the requests in flight (503 beyond), refuses a declared body over the
//! limit (413), bounds a request's time (408), turns a handler's panic into a 500 and makes
//! every error response JSON (module `error`), in one service and one future per request.
//!
//! Why one service and not the tower and tower-http layers it replaces (a global concurrency
//! limit with load shedding, a body limit, a timeout, panic catching and a response map):
//! axum wraps each route in each layer separately, so every layer cost a boxed service clone
//! and a boxed future per request, and the panic catcher and the response map boxed the body
//! again. The five layers were 5,100 of the ~32,000 instructions of a GET by id
//! (callgrind over 22,000 GETs; docs/bench/serve/README.md "The guard").
//!
//! Invariants:
//! - A request is counted in flight from the call until its response head is ready (not
//!   while its body streams, as tower's limit counted); past `max_in_flight`, 503 at once.
//! - A declared `Content-Length` over `max_body` is 413 before any handler runs; a body
//!   without one (chunked) is bounded by the handlers' reads (`routes::read_body`).
//! - The handler's future (the body's reading included) is dropped at `request_timeout`
//!   and the client gets 408.
//! - A panic in the handler's call or future answers 500 without detail; the connection and
//!   the server go on.
//! - Every response of status 400 or more leaving the guard has a JSON body
//!   (`error::json_errors`); the success path only looks at the status.

use crate::error::{json_errors, ApiError};
use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::sync::Semaphore;

/// The limits the guard enforces, shared by every route's copy of it.
#[derive(Debug)]
struct Limits {
    in_flight: Arc<Semaphore>,
    max_body: u64,
    timeout: Duration,
}

/// The guard as a layer: `Router::layer(GuardLayer::new(..))`.
#[derive(Clone, Debug)]
pub struct GuardLayer(Arc<Limits>);

impl GuardLayer {
    /// At most `max_in_flight` requests at once (at least 1), declared bodies of at most
    /// `max_body` bytes, `timeout` per request.
    pub fn new(max_in_flight: usize, max_body: usize, timeout: Duration) -> GuardLayer {
        GuardLayer(Arc::new(Limits {
            in_flight: Arc::new(Semaphore::new(max_in_flight.max(1))),
            max_body: max_body as u64,
            timeout,
        }))
    }
}

impl<S> tower::Layer<S> for GuardLayer {
    type Service = Guard<S>;

    fn layer(&self, inner: S) -> Guard<S> {
        Guard {
            inner,
            limits: self.0.clone(),
        }
    }
}

/// The guard around one service: [`crate::Server`]'s whole router, or each route of one
/// ([`crate::with_layers`]).
#[derive(Clone, Debug)]
pub struct Guard<S> {
    inner: S,
    limits: Arc<Limits>,
}

type GuardFuture = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

impl<S, B> tower::Service<Request<B>> for Guard<S>
where
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
    S: tower::Service<Request<Body>, Response = Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = GuardFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Readiness is decided per request in `call` (a full server answers 503 at once
        // rather than holding the connection); the inner service is made ready there.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> GuardFuture {
        let req = req.map(Body::new);
        if declared_length(&req).is_some_and(|n| n > self.limits.max_body) {
            let e = crate::routes::too_large(self.limits.max_body);
            return Box::pin(std::future::ready(Ok(e.into_response())));
        }
        let Ok(permit) = self.limits.in_flight.clone().try_acquire_owned() else {
            let e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server busy, retry later");
            return Box::pin(std::future::ready(Ok(e.into_response())));
        };
        // The clone is the one that was not made ready; `oneshot` makes it ready, so the
        // router's own readiness (always) is respected.
        let inner = self.inner.clone();
        let timeout = self.limits.timeout;
        Box::pin(async move {
            let _permit = permit;
            // `Oneshot` makes the service ready and calls it on its first poll, so a panic
            // in the call is caught here as one in the future is.
            let mut handled = std::pin::pin!(tower::ServiceExt::oneshot(inner, req));
            let caught = std::future::poll_fn(|cx| {
                match catch_unwind(AssertUnwindSafe(|| handled.as_mut().poll(cx))) {
                    Ok(Poll::Pending) => Poll::Pending,
                    Ok(Poll::Ready(Ok(resp))) => Poll::Ready(Some(resp)),
                    Ok(Poll::Ready(Err(never))) => match never {},
                    // The message went to stderr through the panic hook; the client gets
                    // no detail of the server's internals.
                    Err(_) => Poll::Ready(None),
                }
            });
            let resp = match tokio::time::timeout(timeout, caught).await {
                Ok(Some(resp)) => resp,
                Ok(None) => ApiError::internal("the server failed on this request").into_response(),
                Err(_) => {
                    ApiError::new(StatusCode::REQUEST_TIMEOUT, "request timeout").into_response()
                }
            };
            if resp.status().as_u16() < 400 {
                return Ok(resp);
            }
            Ok(json_errors(resp).await)
        })
    }
}

/// The `Content-Length` a request declares, if any and readable.
fn declared_length(req: &Request<Body>) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    fn request(len: Option<&str>) -> Request<Body> {
        let mut b = Request::builder().uri("/c/x");
        if let Some(l) = len {
            b = b.header(header::CONTENT_LENGTH, l);
        }
        b.body(Body::empty()).unwrap()
    }

    async fn json_of(r: Response) -> serde_json::Value {
        let b = axum::body::to_bytes(r.into_body(), 1 << 16).await.unwrap();
        serde_json::from_slice(&b).expect("a JSON body")
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    #[test]
    fn a_declared_body_over_the_limit_is_refused_before_the_handler() {
        runtime().block_on(async {
            let called = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let c = called.clone();
            let svc = tower::service_fn(move |_: Request<Body>| {
                c.store(true, std::sync::atomic::Ordering::SeqCst);
                async { Ok::<_, Infallible>(Response::new(Body::empty())) }
            });
            let g = GuardLayer::new(4, 100, Duration::from_secs(5));
            let r = tower::Layer::layer(&g, svc.clone())
                .oneshot(request(Some("101")))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
            assert_eq!(json_of(r).await["detail"]["max"], 100);
            assert!(!called.load(std::sync::atomic::Ordering::SeqCst));
            // At the limit, and with an unreadable length (hyper refuses those itself), the
            // handler runs.
            for len in ["100", "x"] {
                let r = tower::Layer::layer(&g, svc.clone())
                    .oneshot(request(Some(len)))
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::OK);
            }
            assert!(called.load(std::sync::atomic::Ordering::SeqCst));
        });
    }

    #[test]
    fn panics_in_the_call_and_in_the_future_answer_500_and_free_their_place() {
        runtime().block_on(async {
            let g = GuardLayer::new(1, 100, Duration::from_secs(5));
            let in_call = tower::service_fn(
                |_: Request<Body>| -> std::future::Ready<Result<Response, Infallible>> {
                    panic!("a bug in the call")
                },
            );
            let in_future = tower::service_fn(|_: Request<Body>| async {
                if std::hint::black_box(true) {
                    panic!("a bug in the future");
                }
                Ok::<Response, Infallible>(Response::new(Body::empty()))
            });
            for _ in 0..2 {
                let r = tower::Layer::layer(&g, in_call)
                    .oneshot(request(None))
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
                assert!(json_of(r).await["error"].is_string());
                let r = tower::Layer::layer(&g, in_future)
                    .oneshot(request(None))
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
            }
        });
    }

    #[test]
    fn in_flight_bound_timeout_and_json_errors() {
        runtime().block_on(async {
            let g = GuardLayer::new(1, 100, Duration::from_millis(200));
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let rx = Arc::new(tokio::sync::Mutex::new(Some(rx)));
            // Holds its place until told, then answers a plain-text 405.
            let slow = tower::service_fn(move |_: Request<Body>| {
                let rx = rx.clone();
                async move {
                    if let Some(rx) = rx.lock().await.take() {
                        let _ = rx.await;
                    }
                    let mut r = Response::new(Body::from("method not allowed"));
                    *r.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
                    r.headers_mut()
                        .insert(header::ALLOW, "GET".parse().unwrap());
                    Ok::<_, Infallible>(r)
                }
            });
            let held = tokio::spawn(tower::Layer::layer(&g, slow.clone()).oneshot(request(None)));
            // Let the first take the only place.
            tokio::time::sleep(Duration::from_millis(20)).await;
            let r = tower::Layer::layer(&g, slow.clone())
                .oneshot(request(None))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert!(json_of(r).await["error"].as_str().unwrap().contains("busy"));
            // Never told: the first times out, 408 as JSON, and its place is free again.
            let r = held.await.unwrap().unwrap();
            assert_eq!(r.status(), StatusCode::REQUEST_TIMEOUT);
            assert_eq!(json_of(r).await["error"], "request timeout");
            drop(tx);
            // The inner's own plain-text error becomes JSON, its other headers kept.
            let r = tower::Layer::layer(&g, slow)
                .oneshot(request(None))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
            assert_eq!(r.headers()[header::ALLOW], "GET");
            assert_eq!(json_of(r).await["detail"], "method not allowed");
        });
    }
}
