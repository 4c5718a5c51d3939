//! What the server's tests share: a server on an ephemeral loopback port in this process, and
//! a small blocking HTTP/1.1 client over a plain socket (so tests can also send what no
//! well-behaved client would: partial heads, slow bodies, wrong lengths).
#![allow(dead_code)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A server running on its own runtime thread; stopped (and its environment closed) on drop.
pub struct TestServer {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The application a test server serves: the server's routes (the server guards them).
pub fn app(
    state: std::sync::Arc<cairn_server::AppState>,
    _: &cairn_server::Config,
) -> axum::Router {
    cairn_server::routes(state)
}

impl TestServer {
    /// A server with the default configuration but for the port.
    pub fn start() -> TestServer {
        TestServer::start_with(|_| {}, app)
    }

    /// A server whose configuration `tweak` changes, with the application `app` builds.
    pub fn start_with(
        tweak: impl FnOnce(&mut cairn_server::Config),
        app: fn(std::sync::Arc<cairn_server::AppState>, &cairn_server::Config) -> axum::Router,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = cairn_server::Config::new(dir.path());
        cfg.listen = "127.0.0.1:0".parse().unwrap();
        tweak(&mut cfg);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = cairn_server::Server::bind_with(cfg, app).await.unwrap();
                addr_tx.send(server.local_addr()).unwrap();
                server
                    .run(async move {
                        let _ = stop_rx.await;
                    })
                    .await
                    .unwrap();
            });
        });
        let addr = addr_rx.recv_timeout(Duration::from_secs(20)).unwrap();
        TestServer {
            addr,
            dir,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// A new keep-alive connection.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    /// A header's value (names compared without case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// Asserts an error response: the status, a JSON body with "error" and "detail".
    pub fn assert_error(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.body)
        );
        assert_eq!(self.header("content-type"), Some("application/json"));
        let v = self.json();
        assert!(v["error"].is_string(), "{v}");
        assert!(v.get("detail").is_some(), "{v}");
        v
    }
}

/// One HTTP/1.1 connection.
pub struct Conn {
    r: BufReader<TcpStream>,
}

impl Conn {
    pub fn connect(addr: SocketAddr) -> Conn {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s.set_nodelay(true).unwrap();
        Conn {
            r: BufReader::new(s),
        }
    }

    pub fn try_connect(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(20)))?;
        s.set_nodelay(true)?;
        Ok(Conn {
            r: BufReader::new(s),
        })
    }

    /// Writes raw bytes.
    pub fn write_raw(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.r.get_mut().write_all(b)
    }

    /// Sends a request and reads its response.
    pub fn send(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> std::io::Result<Resp> {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        if !body.is_empty() || matches!(method, "PUT" | "POST") {
            req.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        req.push_str("\r\n");
        let mut bytes = req.into_bytes();
        bytes.extend_from_slice(body);
        self.write_raw(&bytes)?;
        self.read_response(method == "HEAD")
    }

    pub fn get(&mut self, path: &str) -> Resp {
        self.send("GET", path, &[], b"").unwrap()
    }

    pub fn delete(&mut self, path: &str) -> Resp {
        self.send("DELETE", path, &[], b"").unwrap()
    }

    /// A JSON PUT.
    pub fn put(&mut self, path: &str, body: &str) -> Resp {
        self.send(
            "PUT",
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .unwrap()
    }

    /// A JSON POST.
    pub fn post(&mut self, path: &str, body: &str) -> Resp {
        self.send(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
        .unwrap()
    }

    /// Reads one response.
    pub fn read_response(&mut self, head_only: bool) -> std::io::Result<Resp> {
        let mut line = String::new();
        if self.r.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            let mut h = String::new();
            self.r.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let find = |n: &str| {
            headers
                .iter()
                .find(|(k, _): &&(String, String)| k.eq_ignore_ascii_case(n))
                .map(|(_, v)| v.clone())
        };
        let mut body = Vec::new();
        if head_only || status == 204 || status == 304 {
        } else if let Some(n) = find("content-length") {
            let n: usize = n.parse().unwrap();
            body.resize(n, 0);
            self.r.read_exact(&mut body)?;
        } else if find("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
            loop {
                let mut sz = String::new();
                self.r.read_line(&mut sz)?;
                let n = usize::from_str_radix(sz.trim(), 16).map_err(std::io::Error::other)?;
                let mut chunk = vec![0; n + 2];
                self.r.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            self.r.read_to_end(&mut body)?;
        }
        Ok(Resp {
            status,
            headers,
            body,
        })
    }

    /// Whether the server closed the connection (reads EOF or a reset within `wait`).
    pub fn closed_within(&mut self, wait: Duration) -> bool {
        self.r.get_ref().set_read_timeout(Some(wait)).unwrap();
        let mut b = [0u8; 1];
        let r = self.r.read(&mut b);
        matches!(r, Ok(0))
            || matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }

    /// Whether the server has sent something (a response) that is waiting to be read,
    /// without blocking.
    pub fn has_answer(&mut self) -> bool {
        if !self.r.buffer().is_empty() {
            return true;
        }
        let s = self.r.get_ref();
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let r = s.peek(&mut b);
        s.set_nonblocking(false).unwrap();
        matches!(r, Ok(n) if n > 0)
    }
}
