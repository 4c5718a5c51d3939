//! The HTTP client both systems are driven with: one HTTP/1.1 connection, kept alive across
//! requests, with hyper's own client.
//!
//! Invariants:
//! - A [`Conn`] has at most one request in flight (a client of the benchmark is closed-loop:
//!   it sends its next put when the previous one is answered).
//! - After any transport failure the connection is dropped and the next request opens a new
//!   one, so a failure is counted once and never poisons the following requests.
//! - Every exchange, connecting included, is bounded by the connection's timeout.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use std::time::Duration;

/// An answer: status code and the whole body.
pub struct Answer {
    pub status: u16,
    pub body: Bytes,
}

/// One keep-alive connection to `addr` (host:port).
pub struct Conn {
    addr: String,
    send: Option<SendRequest<Full<Bytes>>>,
    timeout: Duration,
}

impl Conn {
    /// A connection to `addr`, opened at the first request.
    pub fn new(addr: &str, timeout: Duration) -> Conn {
        Conn {
            addr: addr.to_string(),
            send: None,
            timeout,
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, String> {
        let stream = tokio::net::TcpStream::connect(&self.addr)
            .await
            .map_err(|e| format!("connecting to {}: {e}", self.addr))?;
        // Small requests, one at a time: Nagle would hold each for the peer's delayed ACK.
        let _ = stream.set_nodelay(true);
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake with {}: {e}", self.addr))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(send)
    }

    /// Sends `POST path` with a JSON `body` (or `GET path` when `body` is `None`) and reads
    /// the whole answer.
    pub async fn call(&mut self, path: &str, body: Option<Vec<u8>>) -> Result<Answer, String> {
        let timeout = self.timeout;
        match tokio::time::timeout(timeout, self.exchange(path, body)).await {
            Ok(Ok(a)) => Ok(a),
            Ok(Err(e)) => {
                self.send = None;
                Err(e)
            }
            Err(_) => {
                self.send = None;
                Err(format!("{}{path}: timed out after {timeout:?}", self.addr))
            }
        }
    }

    async fn exchange(&mut self, path: &str, body: Option<Vec<u8>>) -> Result<Answer, String> {
        let mut send = match self.send.take() {
            Some(s) if !s.is_closed() => s,
            _ => self.connect().await?,
        };
        send.ready()
            .await
            .map_err(|e| format!("{}: connection: {e}", self.addr))?;
        let b = hyper::Request::builder()
            .uri(path)
            .header(hyper::header::HOST, &self.addr);
        let req = match body {
            Some(body) => b
                .method(hyper::Method::POST)
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body))),
            None => b.method(hyper::Method::GET).body(Full::new(Bytes::new())),
        }
        .map_err(|e| format!("{}{path}: {e}", self.addr))?;
        let resp = send
            .send_request(req)
            .await
            .map_err(|e| format!("{}{path}: {e}", self.addr))?;
        let status = resp.status().as_u16();
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{}{path}: reading the answer: {e}", self.addr))?
            .to_bytes();
        self.send = Some(send);
        Ok(Answer { status, body })
    }
}

/// One request on a connection of its own (set-up and discovery calls, not the load).
pub async fn once(addr: &str, path: &str, body: Option<Vec<u8>>) -> Result<Answer, String> {
    Conn::new(addr, Duration::from_secs(5))
        .call(path, body)
        .await
}
