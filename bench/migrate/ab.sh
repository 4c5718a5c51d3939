#!/bin/sh
# Alternating side-by-side runs: for each binary given (repeat them to alternate, e.g. OLD NEW
# OLD NEW), a fresh copy of the environment flushed with `sync` (so its write-back does not
# share the disk with the migration), both data files read to warm the cache, `cairn migrate`
# under GNU time, then `mdb_copy -c` of the same environment right after, likewise. The load
# average is printed before each pair.
# Usage: bench/migrate/ab.sh SRC_ENV_DIR WORK_DIR CAIRN_BIN...
set -eu
SRC=$1; WORK=$2; shift 2
mkdir -p "$WORK"
for b in "$@"; do
  rm -rf "$WORK/m"; cp -r "$SRC" "$WORK/m"; sync
  cat "$SRC/data.mdb" "$WORK/m/data.mdb" > /dev/null
  echo "$(uptime | sed 's/.*load/load/')"
  /usr/bin/time -f "$b: %e s elapsed, %U s user, %S s sys, %M KiB peak RSS" "$b" migrate -q "$WORK/m" > /dev/null
  rm -rf "$WORK/c"; mkdir "$WORK/c"; sync
  cat "$SRC/data.mdb" > /dev/null
  /usr/bin/time -f "mdb_copy -c: %e s elapsed, %U s user, %S s sys" mdb_copy -c "$SRC" "$WORK/c"
done
rm -rf "$WORK/m" "$WORK/c"
