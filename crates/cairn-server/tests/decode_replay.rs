//! The fuzz target's properties (tests/support) over hostile inputs and a few thousand
//! mutations of valid bodies, so `make test` checks them without a fuzzer.

mod support;

const SEEDS: &[&str] = &[
    r#"{"position":{"lat":52.52,"lon":13.4},"radius":25,"cidr":"10.0.0.0/8","country_code":"DE"}"#,
    r#"[{"id":"a","doc":{"x":1}},{"op":"delete","id":"b"},{"doc":{}},{"op":"create","id":"c","doc":{"y":[1,2,{"z":null}]},"if_match":"1f"}]"#,
    r#"{"a":"\u0000\ud83d\ude00","b":[true,false,null,-1e308,1.5e-5]}"#,
];

/// xorshift64*: reproducible mutations without a dependency.
fn rng(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn hostile_bodies() {
    let deep_obj = "{\"a\":".repeat(10_000) + &"}".repeat(10_000);
    let deep_arr = "[".repeat(100_000);
    let dup = r#"{"k":1,"k":2}"#.to_string();
    let dup_escaped = r#"{"k":1,"\u006b":2}"#.to_string();
    let huge_num = format!("{{\"n\":{}}}", "9".repeat(100_000));
    let long_str = format!("{{\"s\":\"{}\"}}", "x".repeat(1 << 20));
    let bad_utf8 = b"{\"a\":\"\xc3\x28\"}".to_vec();
    let lone_surrogate = r#"{"a":"\ud800"}"#.to_string();
    let nul = b"{\"a\":1}\0".to_vec();
    for b in [
        deep_obj.into_bytes(),
        deep_arr.into_bytes(),
        dup.into_bytes(),
        dup_escaped.into_bytes(),
        huge_num.into_bytes(),
        long_str.into_bytes(),
        bad_utf8,
        lone_surrogate.into_bytes(),
        nul,
        Vec::new(),
        b"   ".to_vec(),
    ] {
        support::decode_body(&b);
    }
    assert!(cairn_server::decode::document(br#"{"k":1,"\u006b":2}"#).is_err());
    assert!(cairn_server::decode::document(&"[".repeat(100_000).into_bytes()).is_err());
}

#[test]
fn mutated_bodies() {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..6000 {
        let seed = SEEDS[(rng(&mut s) % SEEDS.len() as u64) as usize];
        let mut b = seed.as_bytes().to_vec();
        for _ in 0..1 + rng(&mut s) % 4 {
            let i = (rng(&mut s) as usize) % b.len().max(1);
            match rng(&mut s) % 4 {
                0 if !b.is_empty() => b[i] = rng(&mut s) as u8,
                1 if !b.is_empty() => {
                    b.remove(i);
                }
                2 => {
                    let alphabet = b"{}[]\",:\\u";
                    let c = alphabet[(rng(&mut s) % alphabet.len() as u64) as usize];
                    b.insert(i.min(b.len()), c);
                }
                _ => {
                    let j = (rng(&mut s) as usize) % b.len().max(1);
                    let (lo, hi) = (i.min(j), i.max(j));
                    let piece = b[lo..hi].to_vec();
                    b.splice(hi..hi, piece);
                }
            }
        }
        support::decode_body(&b);
    }
}
