#!/usr/bin/env bash
# Table of `make bench-capi`'s runs: each phase's best ns per operation, and the ratios.
set -euo pipefail
d="$1"
best() { awk '{ if (!($1 in m) || $2 < m[$1]) m[$1] = $2; if (!($1 in o)) o[$1] = n++ }
              END { for (p in o) print o[p], p, m[p] }' "$1" | sort -n | cut -d' ' -f2-; }
printf '%-14s %12s %12s %12s %14s %14s\n' phase "LMDB (C)" "Cairn (C)" "Cairn (Rust)" "C/Rust Cairn" "Cairn/LMDB C"
paste -d' ' <(best "$d/lmdb.txt") <(best "$d/cairn_c.txt") <(best "$d/cairn_rust.txt") |
    while read -r p l _ c _ r; do
        printf '%-14s %12.1f %12.1f %12.1f %14.3f %14.3f\n' "$p" "$l" "$c" "$r" \
            "$(echo "$c / $r" | bc -l)" "$(echo "$c / $l" | bc -l)"
    done
