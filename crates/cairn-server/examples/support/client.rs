//! A minimal HTTP/1.1 keep-alive client for the measuring examples (included by path): one
//! blocking connection, one request at a time, the answer's status, ETag and body.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};

/// One keep-alive connection.
pub struct Conn(pub BufReader<TcpStream>);

/// An answer: status, ETag (the hex version, as a number; 0 if none), body.
pub struct Answer {
    pub status: u16,
    #[allow(dead_code)]
    pub etag: u64,
    #[allow(dead_code)]
    pub body: Vec<u8>,
}

impl Conn {
    /// Connects (no Nagle delay: small requests go out at once).
    pub fn new(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        Ok(Conn(BufReader::new(s)))
    }

    /// Sends `method path` with a JSON body and reads the answer.
    pub fn send(&mut self, method: &str, path: &str, body: &str) -> std::io::Result<Answer> {
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        self.0.get_mut().write_all(req.as_bytes())?;
        let bad = |w: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, w.to_string());
        let mut line = String::new();
        self.0.read_line(&mut line)?;
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("status line"))?;
        let (mut len, mut etag) = (0, 0);
        // A response head is a few lines; 100 bounds a broken server's.
        for _ in 0..100 {
            let mut h = String::new();
            self.0.read_line(&mut h)?;
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.trim().parse().map_err(|_| bad("content-length"))?;
                } else if k.eq_ignore_ascii_case("etag") {
                    etag = u64::from_str_radix(v.trim().trim_matches('"'), 16)
                        .map_err(|_| bad("etag"))?;
                }
            }
        }
        let mut body = vec![0; len];
        self.0.read_exact(&mut body)?;
        Ok(Answer { status, etag, body })
    }

    /// `send("PUT", ...)`, the status alone; panics on a transport error (the examples measure a
    /// server on loopback, where one is a bug).
    #[allow(dead_code)]
    pub fn put(&mut self, path: &str, body: &str) -> u16 {
        self.send("PUT", path, body).unwrap().status
    }
}
