"""A follower rebuilt from a snapshot of 1M keys (`make bench-replication-rebuild`; issue 25's
"a follower rebuilt from a snapshot of 1M keys in under 10 s"; docs/bench/replication/README.md
"Rebuild").

One `cairn-cluster node` (--snapshot-every 50) is made a cluster of itself and given N puts
(16-byte keys, 100-byte values) in batches of 10,000 through `POST /write`; once it has built a
snapshot, an empty node is started and added as a learner (`POST /admin/add-learner`, which
answers once the learner has caught up: with the log purged behind the snapshot, by installing
the snapshot, then the entries after it). Timed: from the add-learner request to its answer,
then to the learner's applied index reaching the leader's. Checked: the learner's state of
the database (`GET /scan`) holds every key with its value. Every process on loopback.

    python3 bench/replication/rebuild.py [--cluster target/release/cairn-cluster] [--keys N]
        [--repeat 3] [--out docs/bench/replication/rebuild.md]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

BATCH = 10_000


def http(method, url, body=None, timeout=600):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


def start(binary, nid, d):
    p = subprocess.Popen([binary, "node", "--id", str(nid), "--dir", d, "--listen",
                          "127.0.0.1:0", "--snapshot-every", "50"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "listening on " not in line:
        p.kill()
        sys.exit(f"node {nid} did not start: {line!r}")
    addr = line.split("listening on ", 1)[1].split()[0]
    return p, addr


def key(i):
    return f"{i:016d}"


def value(i):
    return f"{i:0100d}"


def du(d):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs)


def one(a, rnd):
    work = tempfile.mkdtemp(prefix="cairn-rebuild-", dir=a.work)
    procs = []
    try:
        p1, a1 = start(a.cluster, 1, os.path.join(work, "n1"))
        procs.append(p1)
        http("POST", f"http://{a1}/admin/init", {"members": {"1": a1}})
        t = time.monotonic()
        for s in range(0, a.keys, BATCH):
            ops = [{"db": "kv", "key": key(i), "value": value(i)}
                   for i in range(s, min(s + BATCH, a.keys))]
            http("POST", f"http://{a1}/write", {"ops": ops})
        load_s = time.monotonic() - t
        # The last snapshot the load causes (one every 50 entries) covers all but the last
        # few batches: wait for it, so the learner gets the 1M keys by snapshot, not by log.
        deadline = time.monotonic() + 120
        while True:
            st = http("GET", f"http://{a1}/status")
            if (st.get("snapshot") or 0) > st["last_applied"] - 50:
                break
            if time.monotonic() > deadline:
                sys.exit(f"no snapshot of the whole load after 120 s: {st}")
            time.sleep(0.2)
        leader = http("GET", f"http://{a1}/status")
        p2, a2 = start(a.cluster, 2, os.path.join(work, "n2"))
        procs.append(p2)
        t0 = time.monotonic()
        http("POST", f"http://{a1}/admin/add-learner", {"id": 2, "addr": a2})
        t1 = time.monotonic()
        target = http("GET", f"http://{a1}/status")["last_applied"]
        # null until the learner has applied anything.
        while (http("GET", f"http://{a2}/status")["last_applied"] or 0) < target:
            if time.monotonic() > t0 + 120:
                sys.exit("the learner did not catch up in 120 s")
            time.sleep(0.01)
        t2 = time.monotonic()
        entries = http("GET", f"http://{a2}/scan?db=kv")["entries"]
        if len(entries) != a.keys or any(
                k != key(i) or v != value(i) for i, (k, v) in enumerate(entries)):
            sys.exit(f"the learner holds {len(entries)} keys, not the {a.keys} written")
        r = {"round": rnd, "keys": a.keys, "load_s": round(load_s, 2),
             "snapshot_index": leader["snapshot"], "leader_last_applied": target,
             "add_learner_s": round(t1 - t0, 3), "caught_up_s": round(t2 - t0, 3),
             "learner_dir_bytes": du(os.path.join(work, "n2")),
             "when": time.strftime("%H:%M:%S", time.gmtime()),
             "loadavg": round(os.getloadavg()[0], 2)}
        print(json.dumps(r), flush=True)
        return r
    finally:
        for p in procs:
            p.terminate()
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cluster", default="target/release/cairn-cluster")
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", default="target")
    ap.add_argument("--out", default="docs/bench/replication/rebuild.md")
    a = ap.parse_args()
    runs = [one(a, r) for r in range(1, a.repeat + 1)]
    lines = [
        "# A follower rebuilt from a snapshot (bench/replication/rebuild.py)",
        "",
        f"{a.keys:,} keys of 16 bytes with 100-byte values written to a one-node cluster in "
        f"batches of {BATCH:,}; then an empty node added as a learner. Seconds from the "
        "add-learner request to its answer and to the learner's applied index reaching the "
        "leader's; the learner's database checked key by key after.",
        "",
        "| round | UTC | load average | load (s) | snapshot at index | add-learner answered (s) "
        "| caught up (s) | learner's directory (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        lines.append(f"| {r['round']} | {r['when']} | {r['loadavg']} | {r['load_s']} | "
                     f"{r['snapshot_index']} | {r['add_learner_s']} | {r['caught_up_s']} | "
                     f"{r['learner_dir_bytes'] / 1e6:.0f} |")
    worst = max(r["caught_up_s"] for r in runs)
    lines += ["", f"Slowest round: caught up in {worst:.2f} s (target: under 10 s).", ""]
    with open(a.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
