#!/bin/sh
# CPU time of `cairn migrate` builds side by side (e.g. main's and a branch's; repeat them to
# alternate: OLD NEW OLD NEW) and of `mdb_copy -c`, on the environment `make bench-migrate`
# wrote: for each binary a fresh copy of the environment, flushed with `sync` (its write-back
# would otherwise share the disk with the migration), both data files read once to warm the
# cache, then GNU time's elapsed, user, system seconds and peak RSS; right after each, the same
# for `mdb_copy -c` of the environment. The load average is printed before each pair.
# Usage: bench/migrate/cpu.sh SRC_ENV_DIR WORK_DIR CAIRN_BIN...
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
