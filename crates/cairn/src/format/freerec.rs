//! The free tree's records (docs/design.md, "Free tree"): since format version 4, one record
//! per span of pages, keyed by the span's number, holding the runs that start in the span;
//! version 3's records, one per run, are still decoded (such files are rewritten at their
//! first commit). What a run means, and which pages are free, is `alloc.rs`'s.
//!
//! Invariants of a version-4 record, checked by [`decode_free_record`]: a value is never empty;
//! offsets are below the span's size and strictly ascending; every field is a whole LEB128
//! varint of at most 64 bits, and nothing follows the last run.

use super::*;

/// Pages per span, as a shift: the free tree (format version 4) holds one record per span of
/// 1,024 pages that holds the first page of some run. A random workload changes runs all over
/// the file at every commit (each page copied frees one run and takes another), ~2,400
/// free-tree keys a commit at 1M keys when every run was a key, which fell in ~63 spans of
/// 1,024 pages (docs/bench/causes.md, session 18): a commit rewrites a span's record once,
/// however many of its runs changed.
pub const SPAN_SHIFT: u32 = 10;

/// Free-tree key of a span: its number, big-endian so bytewise order is numeric.
pub fn span_key(span: u64) -> [u8; 8] {
    span.to_be_bytes()
}

/// Appends one run to a span's record: its first page's offset in the span (below
/// 2^SPAN_SHIFT), its length, birth and freeing txnid. Runs go in ascending order of offset.
pub fn put_free_run(out: &mut Vec<u8>, offset: u64, len: u64, birth: u64, freed: u64) {
    debug_assert!(offset >> SPAN_SHIFT == 0);
    out.extend_from_slice(&(offset as u16).to_le_bytes());
    put_varint(out, len);
    put_varint(out, birth);
    put_varint(out, freed);
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A LEB128 varint from `b` at `*at`; None when truncated or past 64 bits.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at)?;
        *at += 1;
        let bits = u64::from(x & 0x7f);
        if shift == 63 && bits > 1 {
            return None;
        }
        v |= bits << shift;
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// Decodes one record of a free tree written in format `version`, calling `f` with each run
/// (first page, length, birth, freeing txnid) in ascending order of first page. Version 4:
/// key = span number, value = the span's runs (docs/design.md, "Free tree"); version 3: key =
/// the run's first page, value = one run in 24 bytes. Checks the record's own shape (lengths,
/// order, offsets inside the span); the caller checks runs against the file and each other.
pub fn decode_free_record(
    version: u32,
    key: &[u8],
    val: &[u8],
    mut f: impl FnMut(u64, u64, u64, u64) -> Result<()>,
) -> Result<()> {
    let bad = |what: &str| Error::corrupted(format!("free tree record: {what}"));
    let k: [u8; 8] = key.try_into().map_err(|_| bad("key is not 8 bytes"))?;
    let k = u64::from_be_bytes(k);
    if version == 3 {
        let v: &[u8; 24] = val.try_into().map_err(|_| bad("value is not 24 bytes"))?;
        let g = |i: usize| u64::from_le_bytes(v[i..i + 8].try_into().expect("8 bytes"));
        return f(k, g(0), g(8), g(16));
    }
    if k > u64::MAX >> SPAN_SHIFT {
        return Err(bad("span number out of range"));
    }
    if val.is_empty() {
        return Err(bad("empty span"));
    }
    let base = k << SPAN_SHIFT;
    let mut at = 0;
    let mut last: Option<u64> = None;
    // Each run takes at least 5 bytes (the offset, a byte per varint): at most len / 5 turns.
    while at < val.len() {
        let off = val
            .get(at..at + 2)
            .map(|b| u64::from(u16::from_le_bytes([b[0], b[1]])))
            .ok_or_else(|| bad("truncated offset"))?;
        at += 2;
        if off >> SPAN_SHIFT != 0 || last.is_some_and(|l| off <= l) {
            return Err(bad(&format!(
                "span {k}: offset {off} out of order or range"
            )));
        }
        last = Some(off);
        let mut field = || get_varint(val, &mut at).ok_or_else(|| bad("truncated varint"));
        let (len, birth, freed) = (field()?, field()?, field()?);
        f(base + off, len, birth, freed)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any bytes as a span's record: runs or a `Corrupted` error, never a panic, and
        /// offsets always ascending inside the span.
        #[test]
        fn span_records_from_any_bytes(
            span in 0u64..(1 << 38),
            val in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let mut last = None;
            let r = decode_free_record(4, &span_key(span), &val, |s, _, _, _| {
                assert_eq!(s >> SPAN_SHIFT, span);
                assert!(last.is_none_or(|l| s > l));
                last = Some(s);
                Ok(())
            });
            if let Err(e) = r {
                proptest::prop_assert!(matches!(e, Error::Corrupted { .. }), "{e:?}");
            }
        }
    }

    #[test]
    fn span_records_refuse_bad_shapes() {
        let key = span_key(3);
        let bad = |v: &[u8]| decode_free_record(4, &key, v, |_, _, _, _| Ok(())).is_err();
        assert!(bad(&[]), "an empty record");
        assert!(bad(&[0]), "a truncated offset");
        assert!(bad(&[0, 4, 1, 1, 1]), "offset 1,024, past the span");
        assert!(bad(&[5, 0, 1, 1, 1, 5, 0, 1, 1, 1]), "a repeated offset");
        assert!(bad(&[5, 0, 1, 0x80]), "a truncated varint");
        let mut past_64_bits = vec![5, 0];
        past_64_bits.extend([0xff; 9]);
        past_64_bits.extend([0x02, 1, 1]);
        assert!(bad(&past_64_bits), "a varint past 64 bits");
        assert!(bad(&[0; 24][..23]) && !bad(&[1, 0, 1, 2, 3]));
        assert!(decode_free_record(4, &[0; 7], &[1, 0, 1, 2, 3], |_, _, _, _| Ok(())).is_err());
        let mut v3 = Vec::new();
        decode_free_record(
            3,
            &7u64.to_be_bytes(),
            &[[2, 0, 0, 0, 0, 0, 0, 0], [9; 8], [0; 8]].concat(),
            |s, len, birth, freed| {
                v3.push((s, len, birth, freed));
                Ok(())
            },
        )
        .unwrap();
        assert_eq!(v3, [(7, 2, 0x0909_0909_0909_0909, 0)]);
    }
}
