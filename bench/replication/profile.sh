#!/bin/sh
# Where the time of a put goes (docs/bench/replication/results.md, "Where the time goes"):
# runs one point of the benchmark (SYSTEM cairn|etcd, CLIENTS) and, in its middle, counts the
# flushes and connections of each of the 3 server processes for WINDOW seconds with
# `strace -f -w -c` (wall time per call). Prints the point's figures (slowed by strace) and
# each process's counts; divide a count by puts/s x WINDOW for the calls per put.
# Usage: bench/replication/profile.sh SYSTEM CLIENTS [WINDOW]   (after make bench-replication)
set -eu
system=${1:?cairn or etcd}
clients=${2:?client count}
window=${3:-4}
out=$(mktemp -d)
bin=target/release/cairn-bench-replication
seconds=$((window + 4))
$bin --systems "$system" --clients "$clients" --seconds "$seconds" --warm 1 --repeat 1 \
  --no-report --work target/bench-replication-profile >"$out/run.log" 2>&1 &
bench=$!
# The cluster starts, the warm-up passes, then the strace window opens inside the counted time.
sleep 4
pids=$(pgrep -P "$bench" || true)
for p in $pids; do
  timeout "$window" strace -f -w -c -e trace=fdatasync,fsync,connect,accept4 -p "$p" \
    -o "$out/strace-$p.txt" 2>/dev/null &
done
wait "$bench"
sleep 1
grep -E '^round' "$out/run.log"
for p in $pids; do
  echo "== process $p (strace window ${window} s)"
  grep -E 'calls|fdatasync|fsync|connect|accept4' "$out/strace-$p.txt" || true
done
rm -rf "$out"
