#!/bin/sh
# Where the time of a put goes (docs/bench/replication/results.md, "Where the time goes"):
# runs one point of the benchmark (SYSTEM cairn|etcd, CLIENTS) and, inside its counted time,
# counts for WINDOW seconds the flushes and connections of each of the 3 server processes
# (`strace -f -w -c`: calls and wall time per call) and the log entries (Cairn: the leader's
# last_log_index) or revisions (etcd: one per put) made meanwhile. strace slows the servers:
# the point's own figures printed here are not the benchmark's.
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
# The leader's progress counter: Cairn's last log index, etcd's revision.
counter() {
  python3 - "$system" "$1" <<'PY'
import json, sys, urllib.request
system, addr = sys.argv[1], sys.argv[2]
if system == "cairn":
    s = json.load(urllib.request.urlopen(f"http://{addr}/status", timeout=5))
    print(s["last_log_index"])
else:
    r = urllib.request.Request(f"http://{addr}/v3/maintenance/status", data=b"{}", method="POST")
    print(json.load(urllib.request.urlopen(r, timeout=5))["header"]["revision"])
PY
}
# The cluster starts, the warm-up passes, then the window opens inside the counted time.
sleep 5
leader=$(sed -n 's/.*: leader \([^ ]*\) .*/\1/p' "$out/run.log" | head -1)
pids=$(pgrep -P "$bench" || true)
c0=$(counter "$leader")
for p in $pids; do
  timeout "$window" strace -f -w -c -e trace=fdatasync,fsync,connect,accept4 -p "$p" \
    -o "$out/strace-$p.txt" 2>/dev/null &
done
sleep "$window"
c1=$(counter "$leader")
wait "$bench"
grep -E '^round' "$out/run.log"
echo "leader $leader: $((c1 - c0)) log entries (cairn) / puts (etcd) in the ${window} s window"
for p in $pids; do
  echo "== process $p"
  grep -E 'calls|fdatasync|fsync|connect|accept4' "$out/strace-$p.txt" || true
done
rm -rf "$out"
