#!/bin/sh
# `make bench-migrate`: one LMDB environment of N records (16-byte keys, 100-byte values,
# written by py-lmdb), converted three ways side by side, each from a warm page cache:
#   cairn migrate DIR                   (in place, verified)
#   mdb_dump DIR | cairn load NEW       (LMDB's tool and Cairn's loader)
#   mdb_copy -c DIR NEW                 (LMDB's own compacting copy: the floor)
#   mdb_copy -c DIR NEW; sync NEW/data.mdb  (the same, flushed as cairn migrate flushes)
# Prints seconds, peak RSS (GNU time's %M: the largest process of each pipeline; it counts the
# pages of mapped files) and peak anonymous memory (RssAnon summed over the process tree,
# sampled every 200 ms: what the conversion itself holds) per way.
# Usage: bench/migrate/run.sh CAIRN_BIN PYTHON OUT_DIR [N]
set -eu
CAIRN=$1; PY=$2; OUT=$3; N=${4:-10000000}
HERE=$(cd "$(dirname "$0")" && pwd)
GEN=$HERE/../../crates/cairn-lmdb/tests/gen_lmdb.py
mkdir -p "$OUT"
SRC=$OUT/src-$N
if [ ! -f "$SRC/env/data.mdb" ]; then
  echo "writing $N records with py-lmdb into $SRC/env ..."
  rm -rf "$SRC"; GEN_N=$N "$PY" "$GEN" "$SRC" 1 big
fi
SIZE=$(du -sh "$SRC/env/data.mdb" | cut -f1)
warm() { cat "$SRC/env/data.mdb" > /dev/null; }
anon() { # the RssAnon (KiB) of a process and its descendants
  t=0
  for p in $1 $(pgrep -P "$1" 2>/dev/null) $(for c in $(pgrep -P "$1" 2>/dev/null); do pgrep -P "$c"; done); do
    a=$(awk '/RssAnon/{print $2}' /proc/$p/status 2>/dev/null || true)
    t=$((t + ${a:-0}))
  done
  echo $t
}
row() { # label, then the command
  label=$1; shift
  warm
  /usr/bin/time -f "%e %M" -o "$OUT/time" "$@" > /dev/null &
  pid=$!
  peak=0
  while kill -0 $pid 2>/dev/null; do
    a=$(anon $pid)
    [ "$a" -gt "$peak" ] && peak=$a
    sleep 0.2
  done
  wait $pid
  set -- $(cat "$OUT/time")
  printf '| %s | %s | %s | %s |\n' "$label" "$1" "$(( $2 / 1024 ))" "$(( peak / 1024 ))"
}
echo "LMDB environment: $N records, data.mdb $SIZE; $(nproc) cores; $(uptime | sed 's/.*load/load/') at the start"
echo
echo '| way | seconds | peak RSS (MiB) | peak anonymous (MiB) |'
echo '|---|---|---|---|'
# The copy is flushed first: its write-back would otherwise share the disk with the migration.
rm -rf "$OUT/m"; cp -r "$SRC/env" "$OUT/m"; sync
row "cairn migrate" "$CAIRN" migrate -q "$OUT/m"
rm -rf "$OUT/l"
row "mdb_dump \\| cairn load" sh -c "mdb_dump '$SRC/env' | '$CAIRN' load -q '$OUT/l'"
rm -rf "$OUT/c"; mkdir "$OUT/c"
row "mdb_copy -c" mdb_copy -c "$SRC/env" "$OUT/c"
rm -rf "$OUT/c"; mkdir "$OUT/c"; sync
row "mdb_copy -c, then sync" sh -c "mdb_copy -c '$SRC/env' '$OUT/c' && sync '$OUT/c/data.mdb'"
rm -rf "$OUT/m" "$OUT/l" "$OUT/c" "$OUT/time"
echo
echo "$(uptime | sed 's/.*load/load/') at the end"
