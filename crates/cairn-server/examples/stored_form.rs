//! The measurement behind the stored form (docs/server.md, "Stored form"): the issue's
//! document stored as the client's JSON bytes or as MessagePack, and what each costs on the
//! two hot paths. A PUT must validate the body either way; JSON then stores it as is, while
//! MessagePack parses it into a value and encodes that. A GET answers JSON: JSON copies the
//! stored bytes, MessagePack decodes and serializes again.
//!
//! `cargo run --release -p cairn-server --example stored_form`

use std::hint::black_box;
use std::time::Instant;

const DOC: &str = r#"{"position":{"lat":52.520008,"lon":13.404954},"radius":25,"cidr":"192.168.100.0/22","country_code":"DE","nearest_city":"Berlin","timestamp":"2026-11-27T12:00:00Z","software_source_version":"cairn-bench 0.1.0 (a1b2c3d)"}"#;

fn per_op(n: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..n / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(n)
}

fn main() {
    const N: u32 = 200_000;
    let body = DOC.as_bytes();
    let value: serde_json::Value = serde_json::from_slice(body).unwrap();
    let packed = rmp_serde::to_vec_named(&value).unwrap();

    let json_put = per_op(N, || {
        black_box(cairn_server::decode::document(black_box(body)).unwrap());
    });
    let mp_put = per_op(N, || {
        let doc = cairn_server::decode::document(black_box(body)).unwrap();
        let v: serde_json::Value = serde_json::from_slice(doc).unwrap();
        black_box(rmp_serde::to_vec_named(&v).unwrap());
    });
    let json_get = per_op(N, || {
        black_box(black_box(body).to_vec());
    });
    let mp_get = per_op(N, || {
        let v: serde_json::Value = rmp_serde::from_slice(black_box(&packed)).unwrap();
        black_box(serde_json::to_vec(&v).unwrap());
    });
    println!(
        "document: {} bytes as JSON, {} bytes as MessagePack",
        body.len(),
        packed.len()
    );
    println!(
        "PUT path (validate + form to store): JSON {json_put:.0} ns, MessagePack {mp_put:.0} ns"
    );
    println!(
        "GET path (stored form to JSON body): JSON {json_get:.0} ns, MessagePack {mp_get:.0} ns"
    );
}
