//! `cairn serve` as a user runs it: the binary binds, prints its address, answers HTTP, and on
//! SIGTERM finishes and exits 0 with what it acknowledged on disk. (The server's own tests
//! are in crates/cairn-server/tests.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn request(addr: &str, req: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_answers_and_stops_on_sigterm() {
    // The default mode is durable through the commit log; each flag names its mode.
    serve_once(&[], "logged");
    serve_once(&["--flush-pages"], "durable");
    serve_once(&["--lazy"], "lazy");
}

#[test]
fn serve_refuses_two_modes() {
    let dir = tempfile::tempdir().unwrap();
    for flags in [["--logged", "--flush-pages"], ["--lazy", "--flush-pages"]] {
        let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(flags)
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flags:?}: a usage error");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("cannot be used with"),
            "{flags:?}"
        );
    }
}

/// Serves a fresh environment with `flags`, writes and reads a document, checks that
/// `/_stats` names `durability`, stops the server with SIGTERM and finds the document.
fn serve_once(flags: &[&str], durability: &str) {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(flags)
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .to_string();
    let body = r#"{"a":1}"#;
    let put = request(
        &addr,
        &format!(
            "PUT /c/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(put.starts_with("HTTP/1.1 201"), "{put}");
    let get = request(
        &addr,
        "GET /c/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(
        get.starts_with("HTTP/1.1 200") && get.ends_with(body),
        "{get}"
    );
    let stats = request(
        &addr,
        "GET /_stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(
        stats.contains(&format!("\"durability\":\"{durability}\"")),
        "{flags:?}: {stats}"
    );

    let st = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    assert!(child.wait().unwrap().success(), "exits 0 on SIGTERM");
    // The document is in the environment, for any other tool.
    let out = Command::new(env!("CARGO_BIN_EXE_cairn"))
        .args(["stat", "--json", "-a"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // Collection `c` is cairn-doc's databases `doc:c:*` (docs/doc.md), its documents in
    // `doc:c:docs`.
    assert!(
        out.status.success() && text.contains("\"doc:c:docs\""),
        "{text}"
    );
}
