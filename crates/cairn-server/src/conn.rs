//! A client's TCP connection as the HTTP layer reads and writes it: the stream, put back into
//! delayed-ACK ("ping-pong") mode after a response written `GAP` or more after the previous
//! one.
//!
//! Why: a request that waits in the server longer than the kernel's delayed-ACK timeout (40
//! ms; at 4,000 connections in a closed loop a request waits ~55-65 ms) takes the socket out of
//! ping-pong mode, and from then on the server's read of each request sends a pure ACK of its
//! own before the response: a second segment through the loopback's whole TCP path, paid on
//! the server's core (docs/bench/serve/README.md, "Session 20": 13.6% of the server's CPU at
//! 4,000 connections, one pure ACK a request; none at 1,000). `TCP_QUICKACK` set to 0 puts
//! the socket back into ping-pong mode, so the read acknowledges nothing and the response
//! carries the ACK.
//!
//! Invariants:
//! - Bytes pass through unchanged; only the socket's ACK timing is touched.
//! - A failed `setsockopt` is ignored: the connection works as it would without it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Writes this far apart may have left a request waiting past the delayed-ACK timeout (40 ms
/// on Linux, its least): only after such a gap is the socket put back (module docs). Closer
/// writes answer requests that waited less than the gap (a client sends its next request after
/// the previous answer), so the kernel keeps ping-pong mode by itself and no system call is made.
const GAP: Duration = Duration::from_millis(20);

/// A server-side connection (module docs).
pub(crate) struct Conn {
    stream: TcpStream,
    /// When bytes were last written.
    wrote: Option<Instant>,
}

impl Conn {
    pub(crate) fn new(stream: TcpStream) -> Conn {
        Conn {
            stream,
            wrote: None,
        }
    }

    /// Back to delayed ACKs once a response's bytes are on their way, if the last ones went
    /// out `GAP` ago or more (module docs).
    fn quiet(&mut self, r: &Poll<io::Result<usize>>) {
        if !matches!(r, Poll::Ready(Ok(n)) if *n > 0) {
            return;
        }
        let now = Instant::now();
        if self.wrote.is_none_or(|t| now.duration_since(t) >= GAP) {
            let _ = socket2::SockRef::from(&self.stream).set_tcp_quickack(false);
        }
        self.wrote = Some(now);
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.quiet(&r);
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.quiet(&r);
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Whether the kernel has the socket in ping-pong (delayed-ACK) mode: Linux answers
    /// `TCP_QUICKACK` with the opposite.
    fn delayed_acks(c: &Conn) -> bool {
        !socket2::SockRef::from(&c.stream).tcp_quickack().unwrap()
    }

    #[tokio::test]
    async fn a_write_after_a_gap_restores_delayed_acks_and_bytes_pass_unchanged() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let mut conn = Conn::new(listener.accept().await.unwrap().0);
        let quick = |c: &Conn| socket2::SockRef::from(&c.stream).set_tcp_quickack(true);

        // The first response on a connection: put back.
        quick(&conn).unwrap();
        assert!(!delayed_acks(&conn));
        conn.write_all(b"first").await.unwrap();
        assert!(delayed_acks(&conn), "the first write restores delayed ACKs");

        // A write right after another: no system call, the socket left as it is.
        quick(&conn).unwrap();
        conn.write_all(b" second").await.unwrap();
        assert!(
            !delayed_acks(&conn),
            "a write within GAP of the last makes no call"
        );

        // After GAP: put back again.
        tokio::time::sleep(GAP + Duration::from_millis(5)).await;
        conn.write_all(b" third").await.unwrap();
        assert!(
            delayed_acks(&conn),
            "a write after GAP restores delayed ACKs"
        );

        let mut got = vec![0u8; 18];
        client.read_exact(&mut got).await.unwrap();
        assert_eq!(got, b"first second third");
        client.write_all(b"request").await.unwrap();
        let mut req = vec![0u8; 7];
        conn.read_exact(&mut req).await.unwrap();
        assert_eq!(req, b"request");
    }
}
