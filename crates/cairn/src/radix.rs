//! Sorting by page number in linear time. A write transaction that rewrites most of the file
//! sorts tens of thousands of page numbers per commit (the pages it freed, the free runs it
//! changed, the pages it writes); page numbers are small integers (below the high-water
//! mark), so a least-significant-digit radix sort over the few bytes they use does in two or
//! three linear passes what a comparison sort does in a dozen.
//!
//! Invariant: the result is ascending by key; the order among equal keys is unspecified
//! (every caller either rejects equal keys or removes the repeats).

/// Below this length the library's sort is cheaper than clearing the digit histograms.
const SMALL: usize = 128;

/// Sorts `v` ascending by `key`, in `ceil(bits of the largest key / 8)` counting passes (a
/// pass is skipped when every key has the same digit there).
pub(crate) fn sort_by_page<T: Copy>(v: &mut Vec<T>, key: impl Fn(&T) -> u64) {
    let n = v.len();
    if n < SMALL {
        v.sort_unstable_by_key(key);
        return;
    }
    let max = v.iter().map(&key).max().unwrap_or(0);
    let digits = (64 - max.leading_zeros()).div_ceil(8) as usize;
    // Every digit's histogram in one pass over the input.
    let mut counts = vec![[0usize; 256]; digits];
    for x in v.iter() {
        let k = key(x);
        for (d, c) in counts.iter_mut().enumerate() {
            c[((k >> (8 * d)) & 0xff) as usize] += 1;
        }
    }
    let mut src = std::mem::take(v);
    let mut dst = src.clone();
    for (d, c) in counts.iter_mut().enumerate() {
        if c.contains(&n) {
            continue; // one bucket holds everything: this pass would copy in order
        }
        let mut at = 0;
        for slot in c.iter_mut() {
            let k = *slot;
            *slot = at;
            at += k;
        }
        let shift = 8 * d;
        for x in &src {
            let b = ((key(x) >> shift) & 0xff) as usize;
            dst[c[b]] = *x;
            c[b] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *v = src;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against the library sort, over short and long inputs, small and wide keys, and
        /// many repeats.
        #[test]
        fn sorts_like_the_library(
            v in prop::collection::vec((0u64..1 << 20, any::<u8>()), 0..2000),
            shift in 0u32..44,
            narrow in any::<bool>(),
        ) {
            let mut v: Vec<(u64, u8)> = v
                .into_iter()
                .map(|(k, t)| (if narrow { k % 300 } else { k << shift }, t))
                .collect();
            let mut want = v.clone();
            want.sort_unstable();
            sort_by_page(&mut v, |x| x.0);
            // Equal keys may come in any order: compare keys, and the pairs as multisets.
            let keys: Vec<u64> = v.iter().map(|x| x.0).collect();
            let want_keys: Vec<u64> = want.iter().map(|x| x.0).collect();
            prop_assert_eq!(keys, want_keys);
            v.sort_unstable();
            prop_assert_eq!(v, want);
        }
    }

    #[test]
    fn full_width_keys() {
        let mut v: Vec<u64> = (0..1000u64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let mut want = v.clone();
        want.sort_unstable();
        sort_by_page(&mut v, |&x| x);
        assert_eq!(v, want);
    }
}
